"""What the command lines' bad-input tests share (test_train.py, test_bench.py).

`error_line` runs a CLI's ``main`` with bad arguments and returns what it printed, after checking
it is what bad input must give: one line on stderr, no traceback, exit status 2.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

# Bad input both `python -m tfm_lab.train` and `python -m tfm_lab.bench` must refuse in one line
# (CUDA is made unavailable by the tests), and a part of what the line must say.
BAD_INPUT_EITHER_CLI = [
    (["--steps", "-3"], "steps must be at least 1, got -3"),
    (["--device", "cuda"], "CUDA is not available here; use --device cpu"),
    (["--device", "tpu"], "unknown device 'tpu': use auto, cpu, cuda or cuda:N"),
]


def error_line(main: Callable, argv: list[str], capsys: pytest.CaptureFixture, tmp_path: Path) -> str:
    """``main(argv)``'s error line; in an argument ``{file}`` stands for a file where a folder should
    be, and ``{folder}`` for a folder where a file should be."""
    (tmp_path / "file").write_text("a file where a folder should be")
    with pytest.raises(SystemExit) as exited:
        main([arg.format(file=tmp_path / "file", folder=tmp_path) for arg in argv])
    error = capsys.readouterr().err
    assert exited.value.code == 2, error
    assert error.count("\n") == 1 and ": error: " in error, error
    return error
