"""Re-measure the GPU figures of this folder in one go, on one CUDA GPU, from the repository root:

    python3 tfm_ref/results/measure_gpu.py --out runs/gpu                  # everything
    python3 tfm_ref/results/measure_gpu.py --out runs/gpu dates tests      # at most 10 minutes
    python3 tfm_ref/results/measure_gpu.py --out runs/gpu bench bench-d1024   # at most 10 minutes

Parts, in the order they run:

* ``dates``: the date model with the recipe `DATE_RECIPE` (CUDA graphs, compiled before the clock),
  one run per seed, each in a process of its own → ``date.json``, laid out as ``h100_date.json``
  (the Training results page reads that layout); first the same recipe uncompiled, for the first
  seed, as ``eager_baseline``: timings compare only on the same machine.
* ``tests``: ``tests/test_gpu.py``, the fast paths against the readable ones → ``test_gpu.log``.
* ``bench``: the base model against compiled ``nn.Transformer`` (`BENCH_ARGS`) → ``bench.json``,
  laid out as ``h100_bench.json``, and where tfm_ref's compiled step spends its time → ``bench_profile.txt``.
* ``bench-d1024``: the same at d_model 1024, 16 heads, d_ff 4096, for MFU (`BENCH_D1024_ARGS`)
  → ``bench_d1024.json``.

A part that fails or runs out of its time limit (`TIME_LIMITS`) is reported and the next one runs.
Nothing here writes into ``tfm_ref/results/``: compare the new files with the recorded ones, then
copy over those that are better measured. ``--device cpu`` with a ``--recipe`` of a few steps runs
the same code without a GPU (the tests do), but a CPU run is no GPU figure.
"""
from __future__ import annotations

import argparse
import datetime
import json
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
BENCH_D1024_ARGS = "--d-model 1024 --n-heads 16 --d-ff 4096 --steps 20 --attn-lengths 1024"
PARTS = ("dates", "tests", "bench", "bench-d1024")
# seconds (dates: per run, the baseline and three seeds by default), so that each pair above fits a
# 10-minute call
TIME_LIMITS = {"dates": 100, "tests": 180, "bench": 290, "bench-d1024": 290}
ROOT = Path(__file__).resolve().parents[2]


def _python(args: str, timeout: float) -> None:
    """``python {args}`` in the repository root; its stdout dropped (the records hold it), its stderr shown."""
    subprocess.run([sys.executable, *shlex.split(args)], cwd=ROOT, stdout=subprocess.DEVNULL, timeout=timeout,
                   check=True)


def _header(what: str, command: str, device: str) -> dict:
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


def measure_dates(out: Path, device: str, seeds: list[int], recipe: str) -> dict:
    """One training run per seed, each in its own process, after the recipe's `_uncompiled` baseline
    for the first seed; their histories in the layout of ``h100_date.json``, written after each run,
    so that a later run's failure keeps the earlier ones."""
    command = f"python -m tfm_ref.train {recipe} --device {device} --seed {{seed}} --no-progress --out runs/dates{{seed}}"
    record = _header("date translation: exact match on held-out dates vs training seconds (evaluation and "
                     "compilation excluded)", command, device=None)
    record["runs"] = []
    with tempfile.TemporaryDirectory() as runs:
        for label, settings, seed in [("eager baseline", _uncompiled(recipe), seeds[0])] + \
                [(f"seed {seed}", recipe, seed) for seed in seeds]:
            folder = Path(runs) / label.replace(" ", "_")
            args = f"-m tfm_ref.train {settings} --device {device} --seed {seed} --no-progress --out {folder}"
            _python(args, TIME_LIMITS["dates"])
            history = json.loads((folder / "history.json").read_text())
            run = {"seed": seed, **{k: history[k] for k in ("summary", "evals", "losses")}}
            record["device"] = history["summary"]["device"]
            if label == "eager baseline":
                record["eager_baseline"] = {"command": f"python {args}".replace(str(folder), "runs/eager"), **run}
            else:
                record.setdefault("model_config", history["model_config"])
                record.setdefault("train_config", {**history["config"], "seed": "{seed}", "out": "runs/dates{seed}"})
                record["runs"].append(run)
            s = history["summary"]
            reached = {level: "not reached" if s[key] is None else f"{s[key]:.1f} s"
                       for level, key in (("99%", "seconds_to_99"), ("99.9%", "seconds_to_999"))}
            print(f"dates, {label}: 99% {reached['99%']}, 99.9% {reached['99.9%']}, compiled in "
                  f"{s['compile_seconds']:.0f} s, final accuracy {s['accuracy']:.4f}", flush=True)
            (out / "date.json").write_text(json.dumps(record, indent=1))
    return record


def measure_bench(out: Path, device: str, args: str, name: str, time_limit: float) -> dict:
    """``python -m tfm_ref.bench {args}`` with its command, device, date and torch version on top."""
    target = out / name
    _python(f"-m tfm_ref.bench {args.format(out=out)} --device {device} --out {target}", time_limit)
    results = json.loads(target.read_text())
    record = {**_header("tfm_ref.Transformer vs torch.nn.Transformer (same configuration, same run), training "
                        "tokens/s, eager and torch.compile; attention alone: eager vs SDPA",
                        f"python -m tfm_ref.bench {args.format(out='.')} --out {name}", results["summary"]["device"]),
              **results}
    target.write_text(json.dumps(record, indent=1))
    s = results["summary"]
    mfu = "" if s.get("mfu") is None else f", MFU {s['mfu']:.1%} (nn.Transformer {s['torch_mfu']:.1%})"
    print(f"{name}: {s['ratio_vs_torch']:.3f}× nn.Transformer's tokens/s{mfu}", flush=True)
    return record


def measure_tests(out: Path) -> None:
    with open(out / "test_gpu.log", "w") as log:
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_gpu.py"],
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=TIME_LIMITS["tests"])
    tail = (out / "test_gpu.log").read_text().strip().splitlines()[-1:]
    print(f"tests/test_gpu.py: {tail[0] if tail else 'no output'}", flush=True)
    if result.returncode:
        raise RuntimeError(f"tests/test_gpu.py failed (exit {result.returncode}); see {out / 'test_gpu.log'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure_gpu.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", help=f"what to measure, of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--out", type=Path, default=Path("runs/gpu"), help="folder for the new records")
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (cpu: only to try the script)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--recipe", default=DATE_RECIPE, help="the date runs' tfm_ref.train settings")
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA GPU here; --device cpu only tries the script")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = {"dates": lambda: measure_dates(args.out, args.device, args.seeds, args.recipe),
            "tests": lambda: measure_tests(args.out),
            "bench": lambda: measure_bench(args.out, args.device, BENCH_ARGS, "bench.json", TIME_LIMITS["bench"]),
            "bench-d1024": lambda: measure_bench(args.out, args.device, BENCH_D1024_ARGS, "bench_d1024.json",
                                                 TIME_LIMITS["bench-d1024"])}
    failed = []
    for part in [p for p in PARTS if p in (args.parts or PARTS)]:
        start = time.perf_counter()
        try:
            jobs[part]()
        except (subprocess.SubprocessError, RuntimeError, OSError) as error:
            failed.append(part)
            print(f"{part} failed: {error}", flush=True)
        print(f"{part}: {time.perf_counter() - start:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
