"""Time the capstone notebook's own full run on this machine's CPU, and record it beside the trainer's figures:

    make release   # writes the instructor notebook, solutions/ch10_capstone/ch10_capstone.ipynb, from its .md
    python3 tfm_lab/results/measure_capstone.py --out tfm_lab/results/cpu_capstone.json

Runs the instructor notebook's code cells in order up to the held-out scores, without the graded test cells,
and times the training cell from outside. Run it on an idle machine: the load average is recorded with it.
What is run and left out: tfm_lab/README.md.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "solutions" / "ch10_capstone" / "ch10_capstone.ipynb"
TRAINING_CELL = "losses = fit("  # the full run's training
RECORD = "cpu_capstone.json"  # the cell that prints the recorded figures, this one's among them, is not run
LAST_CELL = "def held_out_exact_match("  # the held-out scores: the alignment view after them is not run


def _machine() -> str:
    """The CPU's model name and core count, as /proc/cpuinfo and the OS tell them."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return f"{os.cpu_count()}-core {line.split(':', 1)[1].strip()}"
    return f"{os.cpu_count()}-core {platform.processor() or platform.machine()}"


def _is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _code_cells(notebook: Path) -> list[str]:
    """The sources of the notebook's code cells, graded test cells left out (a notebook is JSON: no Jupyter needed)."""
    if not notebook.is_file():
        raise SystemExit(f"{notebook} is missing: `make release` writes it from its .md")
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells if c["cell_type"] == "code" and not _is_test_cell(c)]


def run_notebook(notebook: Path = NOTEBOOK) -> dict:
    """Run the notebook's code cells up to the held-out scores; what the full run took and reached."""
    namespace: dict = {"__name__": "__main__"}
    train_seconds = None
    for source in _code_cells(notebook):
        if RECORD in source:
            continue
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the notebook's own prints; tqdm's bar stays on stderr
            exec(compile(source, f"<{notebook.name} cell>", "exec"), namespace)
        if TRAINING_CELL in source:
            train_seconds = time.perf_counter() - started
        if LAST_CELL in source:
            break
    if train_seconds is None or "held_out_exact_match" not in namespace:
        raise RuntimeError(f"{notebook.name} has no cell with {TRAINING_CELL!r} followed by {LAST_CELL!r}")
    score, losses = namespace["held_out_exact_match"], namespace["losses"]
    return {"device": namespace["device"], "steps": namespace["steps"], "batch_size": namespace["batch_size"],
            "train_seconds": round(train_seconds, 1), "seconds_per_step": round(train_seconds / namespace["steps"], 4),
            "loss_first": round(float(losses[0]), 4), "loss_last": round(float(losses[-1]), 4),
            "exact_match_last": score(namespace["model"]), "exact_match_averaged": score(namespace["averaged"]),
            "held_out": len(namespace["held_out"].target)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    summary = run_notebook()
    record = {
        "what": "chapter 10's full run as the notebook runs it (the instructor's solution: float32, the 2017 "
                "schedule, label smoothing, the last four checkpoints averaged), on a CPU; exact match on "
                "held-out dates of the last weights and of the average",
        "command": "python3 tfm_lab/results/measure_capstone.py --out tfm_lab/results/cpu_capstone.json",
        "cpu": f"{_machine()}; {torch.get_num_threads()} threads",
        "date": datetime.date.today().isoformat(), "torch": torch.__version__,
        "load_average": {"before": [round(x, 2) for x in load_before],
                         "after": [round(x, 2) for x in os.getloadavg()]},
        "summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
