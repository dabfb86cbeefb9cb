"""tfm_lab/results/measure_gpu.py, the one command that re-measures the GPU records, run on a CPU
with tiny settings: its records have the layout the book reads from the recorded files, a part
that fails does not stop the others, and with a budget the most needed runs go first and what
does not fit is skipped."""
import importlib.util
import json
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "tfm_lab" / "results"
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
    record = measure_gpu.new_date_record("cpu", TINY_RECIPE)
    runs = [("seed", 0), ("eager baseline", 0), ("seed", 1)]
    reached = measure_gpu.measure_dates(tmp_path, "cpu", runs, TINY_RECIPE, record, measure_gpu.Budget(None))
    written = json.loads((tmp_path / "date.json").read_text())
    assert written == record
    assert [run["seed"] for run in record["runs"]] == [0, 1]
    # the shipped model's run (recorded before wall_seconds), and the CUDA-graph runs this script recorded
    for name in ("h100_date.json", "h100_date_graphs.json", "h100_date_graphs_rerun.json", "h100_date_graphs_nov27.json"):
        recorded = json.loads((RESULTS / name).read_text())
        assert set(recorded) - {"export", "code"} <= set(record)
        for run, recorded_run in zip(record["runs"], recorded["runs"]):
            assert set(run) == set(recorded_run) | {"wall_seconds"}
            assert set(recorded_run["summary"]) <= set(run["summary"])
    for run in record["runs"]:
        assert run["wall_seconds"] > run["summary"]["train_seconds"]  # start-up and evaluations too
        assert run["summary"]["steps"] == 4 and [e["step"] for e in run["evals"]] == [2, 4]
    assert record["runs"][0]["losses"] != record["runs"][1]["losses"]  # each seed its own run
    assert "--seed {seed}" in record["command"] and TINY_RECIPE in record["command"]
    assert record["train_config"]["batch_size"] == 16 and record["train_config"]["seed"] == "{seed}"
    baseline = record["eager_baseline"]
    assert baseline["seed"] == 0 and set(baseline) == set(record["runs"][0]) | {"command"}
    assert baseline["command"] == f"python -m tfm_lab.train {TINY_RECIPE} --device cpu --seed 0 --no-progress " \
                                  "--out runs/eager"
    assert reached == "seed 0: 99.9% not reached; eager baseline 0: 99.9% not reached; seed 1: 99.9% not reached"
    assert "dates, seed 1: 99.9% not reached, final accuracy" in capsys.readouterr().out


def test_the_baseline_is_the_recipe_without_compiling(measure_gpu):
    assert measure_gpu._uncompiled("--task dates --compile-mode reduce-overhead --steps 450") == \
        "--task dates --steps 450"
    assert measure_gpu._uncompiled("--compile --lr 3e-3") == "--lr 3e-3"
    assert measure_gpu._uncompiled(measure_gpu.DATE_RECIPE) + " --compile-mode reduce-overhead" == \
        measure_gpu.DATE_RECIPE


@pytest.mark.slow
def test_the_bench_record_has_the_recorded_layout_and_its_command(measure_gpu, tmp_path, capsys):
    headline = measure_gpu.measure_bench(tmp_path, "cpu", "--tiny", "bench.json", measure_gpu.Budget(None), (0, 120))
    record = json.loads((tmp_path / "bench.json").read_text())
    for name in ("h100_bench.json", "h100_bench_rerun.json", "h100_bench_nov27.json", "h100_bench_graphs.json",
                 "h100_bench_d1024.json", "h100_bench_d1024_rerun.json", "h100_bench_d1024_graphs.json",
                 "h100_bench_d1024_b128.json", "h100_bench_d1024_b128_no_dropout.json"):
        recorded = json.loads((RESULTS / name).read_text())
        assert set(recorded) - {"machine"} <= set(record)
        compiled_only = {"ratio_vs_torch_compiled_loss", "torch_compiled_loss_tokens_per_s"}  # --tiny compiles nothing
        assert set(recorded["summary"]) - compiled_only <= set(record["summary"])
    assert record["command"] == "python -m tfm_lab.bench --tiny --out bench.json" and record["device"] == "cpu"
    assert headline == f"{record['summary']['ratio_vs_torch']:.3f}× nn.Transformer's tokens/s"


def test_tfm_ref_alone_is_said_by_its_tokens_per_second(measure_gpu, tmp_path):
    headline = measure_gpu.measure_bench(tmp_path, "cpu", "--tiny --no-compile --only-tfm-ref", "alone.json",
                                         measure_gpu.Budget(None), (0, 120))
    record = json.loads((tmp_path / "alone.json").read_text())
    assert headline == f"{record['summary']['tokens_per_s']:,.0f} tokens/s"  # a CPU has no MFU, alone no ratio
    assert "--only-tfm-ref" in measure_gpu.BENCH_D1024_ARGS.split()


@pytest.mark.slow
def test_the_gpu_tests_run_and_say_their_count(measure_gpu, tmp_path):
    said = measure_gpu.measure_tests(tmp_path, measure_gpu.Budget(None))
    assert said == (tmp_path / "test_gpu.log").read_text().strip().splitlines()[-1]
    assert " skipped" in said and "failed" not in said  # no CUDA here: each one is skipped, none fails


@pytest.mark.slow
def test_a_failing_run_keeps_the_others_and_the_baseline_still_runs(measure_gpu, tmp_path, monkeypatch):
    run_python = measure_gpu._python

    def fail_seed_1(args, timeout, log):
        if args.endswith("/seed1"):  # the recipe's run of seed 1, not the baseline's (its folder: eager_baseline1)
            raise RuntimeError(f"stopped at its time limit, {timeout:.0f} s")
        run_python(args, timeout, log)

    monkeypatch.setattr(measure_gpu, "_python", fail_seed_1)
    record = measure_gpu.new_date_record("cpu", TINY_RECIPE)
    runs = [("seed", 0), ("seed", 1), ("eager baseline", 1)]
    with pytest.raises(RuntimeError, match=r"^seed 0: 99.9% not reached; seed 1: stopped at its time limit, 150 s; "
                                           r"eager baseline 1: 99.9% not reached$"):
        measure_gpu.measure_dates(tmp_path, "cpu", runs, TINY_RECIPE, record, measure_gpu.Budget(None))
    written = json.loads((tmp_path / "date.json").read_text())
    assert [run["seed"] for run in written["runs"]] == [0] and written["eager_baseline"]["seed"] == 1


def test_a_run_out_of_budget_ends_the_date_runs_and_says_what_came_before(measure_gpu, tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(measure_gpu, "time", clock)
    budget = measure_gpu.Budget(0)  # nothing left: the first run cannot start
    with pytest.raises(measure_gpu.OutOfBudget,
                       match=r"^seed 0 and after: 0 s of the budget left, and it needs about 30 s$"):
        measure_gpu.measure_dates(tmp_path, "cpu", [("seed", 0), ("seed", 1)], TINY_RECIPE,
                                  measure_gpu.new_date_record("cpu", TINY_RECIPE), budget)
    assert not (tmp_path / "date.json").exists()


@pytest.mark.slow
def test_a_failing_part_is_reported_and_the_next_one_still_runs(measure_gpu, tmp_path, capsys):
    status = measure_gpu.main(["dates", "bench", "--device", "cpu", "--out", str(tmp_path), "--seeds", "0",
                               "--recipe", TINY_RECIPE + " --lr -1"])
    out = capsys.readouterr().out
    assert status == 1 and "dates: failed" in out
    assert "seed 0: exit 2: python -m tfm_lab.train: error: lr must be positive, got -1.0" in out  # the cause
    assert "$ " in (tmp_path / "measure_gpu.log").read_text()  # each command above its output
    assert not (tmp_path / "date.json").exists() and (tmp_path / "bench.json").exists()
    assert (tmp_path / "bench_profile.txt").read_text().startswith("tfm_ref_eager, BenchConfig(d_model=64")
    assert json.loads((tmp_path / "bench.json").read_text())["command"] == \
        "python -m tfm_lab.bench --tiny --profile ./bench_profile.txt --out bench.json"


@pytest.mark.slow
def test_a_relative_out_folder_is_the_callers_wherever_it_is_called_from(measure_gpu, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert measure_gpu.main(["bench", "--device", "cpu", "--out", "records"]) == 0
    assert json.loads((tmp_path / "records" / "bench.json").read_text())["summary"]["device"] == "cpu"


def test_an_unknown_part_or_a_missing_gpu_is_named(measure_gpu, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        measure_gpu.main(["date"])
    assert "unknown part 'date'" in capsys.readouterr().err
    monkeypatch.setattr(measure_gpu.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        measure_gpu.main(["dates"])
    assert "no CUDA GPU here" in capsys.readouterr().err


class _Clock:
    """A stand-in for the `time` module whose clock moves only when a fake run says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize("budget, runs_after_d1024, skipped", [
    # 480 - 200 - 200 s leaves 80 s: too few for the CUDA-graph bench (120) and the run at batch 64 (90), enough
    # for the first date run (30), which takes 60; the 20 s left start nothing more
    (480, [([("seed", 0), ("eager baseline", 0)], 80)],
     {"bench-graphs": "80 s of the budget left, and it needs about 120 s",
      "bench-d1024": "80 s of the budget left, and it needs about 90 s",
      "dates, more seeds": "20 s of the budget left, and it needs about 30 s",
      "tests": "20 s of the budget left, and it needs about 60 s",
      "bench": "20 s of the budget left, and it needs about 120 s"}),
    # 960 s: the CUDA-graph bench and the run at batch 64 with their own limits, both date runs, then 40 s:
    # too few for the tests
    (960, [("bench_graphs.json", 290), ("bench_d1024.json", 200), ([("seed", 0), ("eager baseline", 0)], 150),
            ([("seed", 1), ("seed", 2)], 100)],
     {"tests": "40 s of the budget left, and it needs about 60 s",
      "bench": "40 s of the budget left, and it needs about 120 s"}),
])
def test_with_a_budget_the_most_needed_runs_go_first_and_what_does_not_fit_is_skipped(
        measure_gpu, tmp_path, monkeypatch, capsys, budget, runs_after_d1024, skipped):
    clock, calls = _Clock(), []
    monkeypatch.setattr(measure_gpu, "time", clock)

    def spend(seconds, *call):  # a run that takes ``seconds`` of the fake clock
        calls.append(call)
        clock.now += seconds
        return "measured"

    monkeypatch.setattr(measure_gpu, "measure_dates", lambda out, device, runs, recipe, record, budget: spend(
        60, runs, budget.limit(measure_gpu.TIME_LIMITS["dates"])))
    monkeypatch.setattr(measure_gpu, "measure_bench", lambda out, device, args, name, budget, times: spend(
        200, name, budget.limit(times)))
    monkeypatch.setattr(measure_gpu, "measure_tests", lambda out, budget: spend(
        80, "tests", budget.limit(measure_gpu.TIME_LIMITS["tests"])))
    status = measure_gpu.main(["--device", "cpu", "--out", str(tmp_path), "--budget", str(budget)])
    assert status == 0
    # d_model 1024 at batch 128 with and without dropout, then what fits of the rest, in order of need
    assert calls == [("bench_d1024_b128.json", 200), ("bench_d1024_b128_no_dropout.json", 200), *runs_after_d1024]
    table = capsys.readouterr().out.split("\npart")[-1].splitlines()[1:]
    names = ["bench-d1024-b128", "bench-d1024-b128-no-dropout", "bench-graphs", "bench-d1024", "dates",
             "dates, more seeds", "tests", "bench"]
    assert [row[:28].strip() for row in table] == names
    for name, row in zip(names, table):
        status, said = row[28:].split(maxsplit=1)
        assert status == ("skipped" if name in skipped else "done")
        assert said.endswith(skipped[name]) if name in skipped else said.endswith("measured")


def test_d_model_1024_at_batch_128_differs_from_the_recorded_run_only_in_its_batch_memory_plan_and_dropout(measure_gpu):
    assert measure_gpu.BENCH_D1024_B128_ARGS.split() == \
        measure_gpu.BENCH_D1024_ARGS.split() + ["--batch-size", "128", "--memory-gib", "78"]
    assert measure_gpu.BENCH_D1024_B128_NO_DROPOUT_ARGS.split() == \
        measure_gpu.BENCH_D1024_B128_ARGS.split() + ["--dropout", "0"]
    bench = pytest.importorskip("tfm_lab.bench")
    recorded = json.loads((RESULTS / "h100_bench_d1024_rerun.json").read_text())
    config = bench.BenchConfig(**{k: recorded["config"][k] for k in ("d_model", "n_heads", "d_ff", "vocab_size",
                                                                      "seq_len", "n_layers")}, batch_size=128)
    # the plan holds the bench's upper estimate, and twice the peak measured at batch 64 fits an H100 with room
    assert bench.training_memory(config, "cuda") < 78 * 2**30
    assert 2 * max(run["peak_memory_gib"] for run in recorded["training"].values()) < 0.6 * 78


def test_without_a_budget_every_run_gets_its_own_limit_and_the_other_seeds_follow_the_first(measure_gpu, tmp_path,
                                                                                           monkeypatch):
    calls = []
    monkeypatch.setattr(measure_gpu, "measure_dates", lambda out, device, runs, *rest: calls.append(runs) or "")
    monkeypatch.setattr(measure_gpu, "measure_bench", lambda out, device, args, name, *rest: calls.append(name) or "")
    monkeypatch.setattr(measure_gpu, "measure_tests", lambda *args: calls.append("tests") or "")
    assert measure_gpu.main(["--device", "cpu", "--out", str(tmp_path), "--seeds", "3", "4", "5"]) == 0
    assert calls == ["bench_d1024_b128.json", "bench_d1024_b128_no_dropout.json", "bench_graphs.json",
                     "bench_d1024.json",
                     [("seed", 3), ("eager baseline", 3)], [("seed", 4), ("seed", 5)], "tests", "bench.json"]
    assert measure_gpu.Budget(None).limit((120, 290)) == 290


def test_a_budget_cuts_a_run_s_limit_and_refuses_to_start_one_that_cannot_end(measure_gpu, monkeypatch, capsys):
    clock = _Clock()
    monkeypatch.setattr(measure_gpu, "time", clock)
    budget = measure_gpu.Budget(200)
    assert budget.limit((30, 100)) == 100
    clock.now = 150
    assert budget.limit((30, 100)) == 50
    with pytest.raises(measure_gpu.OutOfBudget, match="^50 s of the budget left, and it needs about 60 s$"):
        budget.limit((60, 100))
    clock.now = 171
    with pytest.raises(measure_gpu.OutOfBudget, match="^29 s of the budget left, and it needs about 30 s$"):
        budget.limit((30, 100))
    with pytest.raises(SystemExit):
        measure_gpu.main(["--budget", "0"])
    assert "--budget must be a positive number of seconds, got 0" in capsys.readouterr().err
