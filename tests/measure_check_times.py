"""How long a failing check takes in a student's kernel while the machine does other work (the bound: 10 s).

Runs the visible check of the slowest exercises (training, decoding) on each of their catalogued mistakes and on a
wrong answer that no mistake explains (the longest path: every mistake tried on the input that failed and again on
each smaller one), as ``check`` runs it in a notebook, with two busy processes (``python -c "while True: pass"``)
beside it, and prints the seconds of each and the slowest. A measurement to run by hand, not a test:

    .venv/bin/python tests/measure_check_times.py            # chapters 8 and 10's training and decoding checks
    .venv/bin/python tests/measure_check_times.py --all      # every exercise's mistakes
    .venv/bin/python tests/measure_check_times.py --quiet    # without the busy processes
"""
from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from unittest import mock

import torch

from autograde.exercises import ch08_encoder_decoder, ch10_capstone, load_all
from autograde.exercises.ch08_encoder_decoder import _greedy_variant
from autograde.spec import Exercise
from autograde.verdict import Report
from tfm_ref import training
from tfm_ref.losses import label_smoothed_cross_entropy

BUSY = [sys.executable, "-c", "while True: pass"]


@contextlib.contextmanager
def busy_processes(count: int = 2) -> Iterator[None]:
    """``count`` processes spinning beside what runs inside (the machine of a student doing other work)."""
    busy = [subprocess.Popen(BUSY) for _ in range(count)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


def timed_check(exercise: Exercise, impl: object, seed: int, hidden: bool = False) -> tuple[float, Report]:
    """Seconds and report of one check of ``impl``, as a notebook's first run of it (the fix not yet shown)."""
    started = time.perf_counter()
    report = exercise.run(impl, hidden, seed=seed, reveal_fix=False)
    return time.perf_counter() - started, report


def _step_with_loss_doubled(model, optimizer, batch, step, *, d_model, warmup, factor=1.0, smoothing=0.1):
    """A training step no catalogued mistake explains: the reference's, with its loss twice the right one."""
    def doubled(*args):
        return 2 * label_smoothed_cross_entropy(*args)

    with mock.patch.object(training, "label_smoothed_cross_entropy", doubled):
        return training.train_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor,
                                   smoothing=smoothing)


def _fit_with_sgd(model, batches, *, d_model, warmup, factor=1.0, smoothing=0.1):
    """A training loop no catalogued mistake explains: SGD instead of Adam."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    return [ch10_capstone.train_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor,
                                     smoothing=smoothing)[0] for step, batch in enumerate(batches)]


UNEXPLAINED = (  # (exercise, a wrong answer of its own that no catalogued mistake gives)
    (ch10_capstone.TRAIN_STEP, _step_with_loss_doubled),
    (ch10_capstone.FIT, _fit_with_sgd),
    (ch10_capstone.GREEDY, _greedy_variant(start=2)),  # decoding started from a token that is neither BOS nor PAD
    (ch08_encoder_decoder.GREEDY, _greedy_variant(start=2)),
)


def students(exercises: list[Exercise]) -> list[tuple[Exercise, str, object]]:
    """(exercise, what, implementation): each catalogued mistake, then the unexplained wrong answer, if any."""
    found = []
    for exercise in exercises:
        found += [(exercise, mistake.name, mistake.impl) for mistake in exercise.mistakes]
        found += [(exercise, "(no catalogued mistake)", impl) for owner, impl in UNEXPLAINED if owner is exercise]
    return found


def measure(exercises: list[Exercise], seed: int = 1000) -> list[tuple[float, str]]:
    """Seconds of each failing visible check, in the order run; every check with a seed of its own, as in a kernel."""
    times = []
    for i, (exercise, what, impl) in enumerate(students(exercises)):
        seconds, report = timed_check(exercise, impl, seed + i)
        named = report.mistake or ("passed" if report.passed else "-")
        times.append((seconds, f"{exercise.key}: {what}"))
        print(f"{seconds:6.2f} s  {exercise.key}: {what}  (named: {named})", flush=True)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every exercise's mistakes, not only the slowest checks")
    parser.add_argument("--quiet", action="store_true", help="no busy processes beside the checks")
    args = parser.parse_args(argv)
    exercises = ([e for chapter in load_all() for e in chapter.EXERCISES] if args.all else
                 [ch10_capstone.TRAIN_STEP, ch10_capstone.FIT, ch10_capstone.GREEDY, ch08_encoder_decoder.GREEDY])
    busy = 0 if args.quiet else 2
    with busy_processes(busy):
        print(f"{busy} busy processes beside, {torch.get_num_threads()} PyTorch threads outside the checks")
        times = sorted(measure(exercises), reverse=True)
    over = [t for t in times if t[0] > 10]
    print(f"slowest: {times[0][0]:.2f} s ({times[0][1]}); median {times[len(times) // 2][0]:.2f} s; "
          f"{len(over)} of {len(times)} over 10 s")


if __name__ == "__main__":
    main()
