"""Synthetic tasks, generated on the fly (no downloads), each with a held-out evaluation set.

| name | model | example |
|---|---|---|
| copy | decoder-only | 31415926=31415926 |
| reverse | decoder-only | 31415926=62951413 |
| sort | decoder-only | 31415926=11234569 |
| addition | decoder-only | 0457+0682=93110 (sum least-significant digit first) |
| dates | encoder-decoder | "Nov 22, 2026" → "2026-11-22" |

``make_task("dates")`` builds one by name; each module's docstring shows an encoded example.
"""
from __future__ import annotations

from .base import EVAL_SEED, IGNORE_INDEX, Batch, Task, heldout_hash
from .dates import DATE_VOCAB, FORMATS, DateTask, render
from .digits import AdditionTask, CopyTask, DigitTask, ReverseTask, SortTask
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

__all__ = [
    "Batch", "Task", "IGNORE_INDEX", "EVAL_SEED", "heldout_hash", "Vocab", "PAD_ID", "BOS_ID", "EOS_ID",
    "DigitTask", "CopyTask", "ReverseTask", "SortTask", "AdditionTask", "DateTask", "FORMATS", "DATE_VOCAB",
    "render", "TASKS", "make_task",
]

TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (CopyTask, ReverseTask, SortTask, AdditionTask, DateTask)
}


def make_task(name: str, **kwargs) -> Task:
    """The task called ``name`` (a key of `TASKS`), built with ``kwargs``.

    Raises:
        ValueError: an unknown name.
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name](**kwargs)
