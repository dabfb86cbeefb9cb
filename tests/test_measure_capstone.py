"""tfm_lab/results/measure_capstone.py: it runs the capstone notebook's full run as the notebook does and records
what it took and reached (here on a notebook whose run is cut to a few steps), and the recorded figure the
notebook prints is one it made."""
import json
import sys
from pathlib import Path

import pytest

from autograde.release import source_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tfm_lab" / "results"))
import measure_capstone  # noqa: E402

RUN = "steps, batch_size, checkpoint_every, checkpoints_averaged = 800, 128, 50, 4"


@pytest.mark.slow
def test_the_notebooks_full_run_is_timed_and_scored(tmp_path):
    source = source_notebook("ch10_capstone").read_text(encoding="utf-8")  # written from the .md when it is newer
    assert RUN in source, "the notebook's full run changed: update this test and the recorded figure"
    short = tmp_path / measure_capstone.NOTEBOOK.name
    short.write_text(source.replace(RUN, "steps, batch_size, checkpoint_every, checkpoints_averaged = 4, 8, 1, 2"),
                     encoding="utf-8")
    summary = measure_capstone.run_notebook(short)
    assert summary["steps"] == 4 and summary["device"] == "cpu" and summary["train_seconds"] > 0
    assert 0 <= summary["exact_match_averaged"] <= 1 and summary["held_out"] > 0


def test_the_recorded_run_is_the_notebooks():
    record = json.loads((ROOT / "tfm_lab" / "results" / "cpu_capstone.json").read_text())
    assert record["command"].startswith("python3 tfm_lab/results/measure_capstone.py")
    assert record["summary"]["steps"] == 800 and record["summary"]["batch_size"] == 128
