"""Re-measure the GPU figures of this folder in one go, on one CUDA GPU, from the repository root:

    python3 tfm_lab/results/measure_gpu.py --out runs/gpu                 # everything
    python3 tfm_lab/results/measure_gpu.py --out runs/gpu --budget 540    # what fits in 9 minutes, most needed first
    python3 tfm_lab/results/measure_gpu.py --out runs/gpu bench           # one part

The parts (`PARTS`: bench-d1024, bench-graphs, dates, tests, bench) run the benchmark, the trainer and
tests/test_gpu.py with the recorded settings (`BENCH_*_ARGS`, `DATE_RECIPE`), each under a time limit
(`TIME_LIMITS`) cut to what is left of ``--budget``; a run that fails or does not fit is reported and the
next one runs. The last lines printed are a table of every run. Nothing is written into
``tfm_lab/results/``: compare, then copy over what is better measured. Each part, and why it runs in its
place: tfm_lab/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

DATE_RECIPE = ("--task dates --batch-size 2048 --lr 3e-3 --warmup 50 --steps 450 --eval-every 25 --eval-size 5000 "
               "--compile-mode reduce-overhead")
BENCH_ARGS = "--steps 50 --profile {out}/bench_profile.txt"
BENCH_GRAPHS_ARGS = "--steps 50 --compile-mode reduce-overhead"
BENCH_D1024_ARGS = ("--d-model 1024 --n-heads 16 --d-ff 4096 --steps 20 --attn-lengths 1024 --only-tfm-ref "
                    "--compile-mode reduce-overhead")
BENCH_D1024_B128_ARGS = BENCH_D1024_ARGS + " --batch-size 128 --memory-gib 78"
BENCH_D1024_B128_NO_DROPOUT_ARGS = BENCH_D1024_B128_ARGS + " --dropout 0"
PARTS = ("bench-d1024", "bench-graphs", "dates", "tests", "bench")
# Seconds each run (each date run on its own) may take: the least it needs, an estimate (compiling is most
# of it; the first date run compiles on an empty cache, the other seeds find it warm), under which it is
# skipped rather than started and cut off; and its limit.
TIME_LIMITS = {"dates": (30, 150), "bench": (120, 290), "bench-graphs": (120, 290), "tests": (60, 180),
               "bench-d1024": (90, 200), "bench-d1024-b128": (90, 200),
               "bench-d1024-b128-no-dropout": (90, 200)}
ROOT = Path(__file__).resolve().parents[2]


class OutOfBudget(Exception):
    """Too little of ``--budget`` is left to start a run."""


class Budget:
    """What is left of ``seconds`` (None: no limit), and the time limit a run gets from it."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def limit(self, times: tuple[float, float]) -> float:
        """The limit of a run that needs at least ``times[0]`` seconds and may take ``times[1]``.

        Raises:
            OutOfBudget: less than ``times[0]`` is left.
        """
        least, most = times
        if self.deadline is None:
            return most
        left = self.deadline - time.monotonic()
        if left < least:
            raise OutOfBudget(f"{max(left, 0):.0f} s of the budget left, and it needs about {least:.0f} s")
        return min(most, left)


def _run(command: list[str], timeout: float, log: Path) -> None:
    """``command`` in the repository root, its output appended to ``log`` after a line naming it (no
    progress bars: they would fill it).

    Raises:
        RuntimeError: it failed (with the last line it wrote: the error, or pytest's count) or ran past ``timeout``.
    """
    with open(log, "a") as f:
        f.write(f"\n$ {shlex.join(command)}\n")
        f.flush()
        start = f.tell()
        try:
            subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, check=True,
                           env={**os.environ, "TQDM_DISABLE": "1"})
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"stopped at its time limit, {timeout:.0f} s") from None
        except subprocess.CalledProcessError as error:
            with open(log) as written:
                written.seek(start)
                lines = written.read().strip().splitlines()
            raise RuntimeError(f"exit {error.returncode}: {lines[-1] if lines else 'no output'}") from None


def _python(args: str, timeout: float, log: Path) -> None:
    _run([sys.executable, *shlex.split(args)], timeout, log)


def _header(what: str, command: str, device: str | None) -> dict:
    """What a record starts with; ``device``: the name the run's own summary gives (this process
    never touches the GPU, so that it holds none of its memory)."""
    return {"what": what, "command": command, "device": device,
            "date": datetime.date.today().isoformat(), "torch": torch.__version__}


def _uncompiled(recipe: str) -> str:
    """``recipe`` without its ``--compile`` and ``--compile-mode MODE``."""
    words, kept = shlex.split(recipe), []
    for i, word in enumerate(words):
        if word != "--compile" and word != "--compile-mode" and (i == 0 or words[i - 1] != "--compile-mode"):
            kept.append(word)
    return shlex.join(kept)


def _train_args(settings: str, device: str, seed: int | str, out: Path | str) -> str:
    """The arguments of one date run: ``python`` + these is its command."""
    return f"-m tfm_lab.train {settings} --device {device} --seed {seed} --no-progress --out {out}"


def new_date_record(device: str, recipe: str) -> dict:
    """The date record's header, its command a template of the runs (``{seed}``), and no runs yet."""
    command = "python " + _train_args(recipe, device, "{seed}", "runs/dates{seed}")
    record = _header("date translation: exact match on held-out dates vs training seconds (evaluation and "
                     "compilation excluded)", command, device=None)
    record["runs"] = []
    return record


def measure_dates(out: Path, device: str, runs: list[tuple[str, int]], recipe: str, record: dict,
                  budget: Budget) -> str:
    """Add ``runs`` to ``record`` (from `new_date_record`), each in its own process: ("seed", seed) with
    the recipe, ("eager baseline", seed) with its `_uncompiled` form, each with its ``wall_seconds`` (the
    whole command). The record, in the layout of ``h100_date_graphs.json``, is written after each run. A run
    that fails does not stop the next: the baseline still runs where the compiled run failed.
    Returns what each run reached.

    Raises:
        OutOfBudget: a run cannot start, nor can those after it. RuntimeError: a run failed. Each says
        what every run before reached, or how it failed.
    """
    reached, failed = [], False
    with tempfile.TemporaryDirectory() as folders:
        for kind, seed in runs:
            baseline = kind == "eager baseline"
            folder = Path(folders) / f"{kind.replace(' ', '_')}{seed}"
            settings = _uncompiled(recipe) if baseline else recipe
            args = _train_args(settings, device, seed, folder)
            try:
                limit = budget.limit(TIME_LIMITS["dates"])
                start = time.monotonic()
                _python(args, limit, out / "measure_gpu.log")
            except OutOfBudget as why:
                raise OutOfBudget("; ".join([*reached, f"{kind} {seed} and after: {why}"])) from None
            except RuntimeError as error:
                reached.append(f"{kind} {seed}: {error}")
                failed = True
                continue
            wall_seconds = time.monotonic() - start  # what a user waits: start-up, compiling and evaluations too
            history = json.loads((folder / "history.json").read_text())
            run = {"seed": seed, "wall_seconds": wall_seconds,
                   **{k: history[k] for k in ("summary", "evals", "losses")}}
            record["device"] = history["summary"]["device"]
            if baseline:
                record["eager_baseline"] = {"command": "python " + _train_args(settings, device, seed, "runs/eager"),
                                            **run}
            else:
                record.setdefault("model_config", history["model_config"])
                record.setdefault("train_config", {**history["config"], "seed": "{seed}", "out": "runs/dates{seed}"})
                record["runs"].append(run)
            (out / "date.json").write_text(json.dumps(record, indent=1))
            s = history["summary"]
            to_999 = "not reached" if s["seconds_to_999"] is None else f"after {s['seconds_to_999']:.1f} s of training"
            reached.append(f"{kind} {seed}: 99.9% {to_999}")
            compiled = f", compiled in {s['compile_seconds']:.0f} s" if s["compiled"] else ""
            print(f"dates, {kind} {seed}: 99.9% {to_999}{compiled}, final accuracy {s['accuracy']:.4f}, "
                  f"{wall_seconds:.0f} s for the whole command", flush=True)
    if failed:
        raise RuntimeError("; ".join(reached))
    return "; ".join(reached)


def measure_bench(out: Path, device: str, args: str, name: str, budget: Budget, times: tuple[float, float]) -> str:
    """``python -m tfm_lab.bench {args}`` with its command, device, date and torch version on top;
    returns its ratio to nn.Transformer and its MFU."""
    target = out / name
    _python(f"-m tfm_lab.bench {args.format(out=out)} --device {device} --out {target}", budget.limit(times),
            out / "measure_gpu.log")
    results = json.loads(target.read_text())
    record = {**_header("tfm_ref.Transformer vs torch.nn.Transformer (same configuration, same run), training "
                        "tokens/s, eager and torch.compile; attention alone: eager vs SDPA",
                        f"python -m tfm_lab.bench {args.format(out='.')} --out {name}", results["summary"]["device"]),
              **results}
    target.write_text(json.dumps(record, indent=1))
    s = results["summary"]
    said = [] if s["ratio_vs_torch"] is None else [f"{s['ratio_vs_torch']:.3f}× nn.Transformer's tokens/s"]
    if s.get("mfu") is not None:
        theirs = "" if s["torch_mfu"] is None else f" (nn.Transformer {s['torch_mfu']:.1%})"
        said.append(f"MFU {s['mfu']:.1%}{theirs}")
    return ", ".join(said) or f"{s['tokens_per_s']:,.0f} tokens/s"


def measure_tests(out: Path, budget: Budget) -> str:
    """``tests/test_gpu.py``, its output in ``test_gpu.log``; returns pytest's count. Three workers: the
    tests that compile spend their time on the CPU, compiling, and each can do so beside the others."""
    log = out / "test_gpu.log"
    _run([sys.executable, "-m", "pytest", "-q", "-n", "3", "-p", "no:cacheprovider", "tests/test_gpu.py"],
         budget.limit(TIME_LIMITS["tests"]), log)
    return log.read_text().strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure_gpu.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", help=f"what to measure, of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--out", type=Path, default=Path("runs/gpu"), help="folder for the new records")
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (cpu: only to try the script)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--recipe", default=DATE_RECIPE, help="the date runs' tfm_lab.train settings")
    parser.add_argument("--budget", type=float, help="seconds for everything (default: no limit); what does "
                                                     "not fit is skipped, the most needed runs first")
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be a positive number of seconds, got {args.budget:g}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA GPU here; --device cpu only tries the script")
    args.out = args.out.resolve()  # the runs write there from the repository root, wherever this was started
    args.out.mkdir(parents=True, exist_ok=True)
    budget, chosen = Budget(args.budget), args.parts or PARTS
    dates = new_date_record(args.device, args.recipe)
    first, *more = args.seeds
    # (name, the part it belongs to, the job), the most needed first: the MFU the recorded runs miss on every
    # machine (the new lever, with and without dropout), the CUDA-graph base model that misses 1.2x on one
    # machine, the recorded batch at d_model 1024 to compare the new lever with, the date runs from a full
    # compile cache, the tests, then the figure recorded twice already
    def bench(name: str, args_: str):  # its record is named after it: bench-d1024-b128 → bench_d1024_b128.json
        return name, "bench-d1024" if name.startswith("bench-d1024") else name, lambda: measure_bench(
            args.out, args.device, args_, name.replace("-", "_") + ".json", budget, TIME_LIMITS[name])

    plan = [
        bench("bench-d1024-b128", BENCH_D1024_B128_ARGS),
        bench("bench-d1024-b128-no-dropout", BENCH_D1024_B128_NO_DROPOUT_ARGS),
        bench("bench-graphs", BENCH_GRAPHS_ARGS),
        bench("bench-d1024", BENCH_D1024_ARGS),
        ("dates", "dates", lambda: measure_dates(args.out, args.device, [("seed", first), ("eager baseline", first)],
                                                 args.recipe, dates, budget)),
    ]
    if more:
        plan.append(("dates, more seeds", "dates", lambda: measure_dates(args.out, args.device,
                                                                         [("seed", s) for s in more], args.recipe,
                                                                         dates, budget)))
    plan += [
        ("tests", "tests", lambda: measure_tests(args.out, budget)),
        bench("bench", BENCH_ARGS),
    ]
    table, failed = [], False
    for name, part, job in plan:
        if part not in chosen:
            continue
        start = time.monotonic()
        try:
            status, result = "done", job()
        except OutOfBudget as why:
            status, result = "skipped", str(why)
        except (RuntimeError, OSError) as error:
            status, result, failed = "failed", str(error), True
        table.append((name, status, time.monotonic() - start, result))
        print(f"{name}: {status} in {table[-1][2]:.0f} s: {result}", flush=True)
    print(f"\n{'part':<28} {'status':<8} {'seconds':>7}  result")
    for name, status, seconds, result in table:
        print(f"{name:<28} {status:<8} {seconds:>7.0f}  {result}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
