"""tfm_ref/results/measure_gpu.py, the one command that re-measures the GPU records, run on a CPU
with tiny settings: its records have the layout the book reads from the recorded files, and a
part that fails does not stop the others."""
import importlib.util
import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "tfm_ref" / "results"
TINY_RECIPE = "--task dates --batch-size 16 --steps 4 --eval-every 2 --eval-size 50 --warmup 1"


@pytest.fixture
def measure_gpu(monkeypatch):
    spec = importlib.util.spec_from_file_location("measure_gpu", RESULTS / "measure_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "BENCH_ARGS", "--tiny --profile {out}/bench_profile.txt")  # seconds, not the base model
    return module


@pytest.mark.slow
def test_the_date_record_has_the_recorded_layout_with_one_run_per_seed(measure_gpu, tmp_path, capsys):
    record = measure_gpu.measure_dates(tmp_path, "cpu", [0, 1], TINY_RECIPE)
    recorded = json.loads((RESULTS / "h100_date.json").read_text())
    written = json.loads((tmp_path / "date.json").read_text())
    assert written == record
    assert set(recorded) - {"export"} <= set(record)
    assert [run["seed"] for run in record["runs"]] == [0, 1]
    for run, recorded_run in zip(record["runs"], recorded["runs"]):
        assert set(run) == set(recorded_run)
        assert set(recorded_run["summary"]) <= set(run["summary"])
        assert run["summary"]["steps"] == 4 and [e["step"] for e in run["evals"]] == [2, 4]
    assert record["runs"][0]["losses"] != record["runs"][1]["losses"]  # each seed its own run
    assert "--seed {seed}" in record["command"] and TINY_RECIPE in record["command"]
    assert record["train_config"]["batch_size"] == 16 and record["train_config"]["seed"] == "{seed}"
    baseline = record["eager_baseline"]
    assert baseline["seed"] == 0 and set(baseline) == set(record["runs"][0]) | {"command"}
    assert baseline["command"] == f"python -m tfm_ref.train {TINY_RECIPE} --device cpu --seed 0 --no-progress " \
                                  "--out runs/eager"
    assert "dates, seed 1: 99% not reached" in capsys.readouterr().out


def test_the_baseline_is_the_recipe_without_compiling(measure_gpu):
    assert measure_gpu._uncompiled("--task dates --compile-mode reduce-overhead --steps 450") == \
        "--task dates --steps 450"
    assert measure_gpu._uncompiled("--compile --lr 3e-3") == "--lr 3e-3"
    assert measure_gpu._uncompiled(measure_gpu.DATE_RECIPE) + " --compile-mode reduce-overhead" == \
        measure_gpu.DATE_RECIPE


@pytest.mark.slow
def test_the_bench_record_has_the_recorded_layout_and_its_command(measure_gpu, tmp_path, capsys):
    record = measure_gpu.measure_bench(tmp_path, "cpu", "--tiny", "bench.json", 120)
    recorded = json.loads((RESULTS / "h100_bench.json").read_text())
    assert json.loads((tmp_path / "bench.json").read_text()) == record
    assert set(recorded) <= set(record)
    assert set(recorded["summary"]) <= set(record["summary"])
    assert record["command"] == "python -m tfm_ref.bench --tiny --out bench.json" and record["device"] == "cpu"
    assert f"{record['summary']['ratio_vs_torch']:.3f}× nn.Transformer" in capsys.readouterr().out


@pytest.mark.slow
def test_a_failing_seed_keeps_the_runs_before_it(measure_gpu, tmp_path, monkeypatch):
    run_python = measure_gpu._python

    def fail_the_second_seed(args, timeout):
        if "--seed 1 " in args:
            raise measure_gpu.subprocess.TimeoutExpired(args, timeout)
        run_python(args, timeout)

    monkeypatch.setattr(measure_gpu, "_python", fail_the_second_seed)
    with pytest.raises(measure_gpu.subprocess.TimeoutExpired):
        measure_gpu.measure_dates(tmp_path, "cpu", [0, 1], TINY_RECIPE)
    assert [run["seed"] for run in json.loads((tmp_path / "date.json").read_text())["runs"]] == [0]


@pytest.mark.slow
def test_a_failing_part_is_reported_and_the_next_one_still_runs(measure_gpu, tmp_path, capsys):
    status = measure_gpu.main(["dates", "bench", "--device", "cpu", "--out", str(tmp_path), "--seeds", "0",
                               "--recipe", TINY_RECIPE + " --lr -1"])
    out = capsys.readouterr().out
    assert status == 1 and "dates failed" in out
    assert not (tmp_path / "date.json").exists() and (tmp_path / "bench.json").exists()
    assert (tmp_path / "bench_profile.txt").read_text().startswith("tfm_ref_eager, BenchConfig(d_model=64")
    assert json.loads((tmp_path / "bench.json").read_text())["command"] == \
        "python -m tfm_ref.bench --tiny --profile ./bench_profile.txt --out bench.json"


def test_an_unknown_part_or_a_missing_gpu_is_named(measure_gpu, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        measure_gpu.main(["date"])
    assert "unknown part 'date'" in capsys.readouterr().err
    monkeypatch.setattr(measure_gpu.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        measure_gpu.main(["dates"])
    assert "no CUDA GPU here" in capsys.readouterr().err
