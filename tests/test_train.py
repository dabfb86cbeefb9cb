"""tfm_ref.train: a tiny model learns; resume and data parallelism change nothing."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from tfm_ref.decoding import lm_generate
from tfm_ref.tasks import IGNORE_INDEX, CopyTask
from tfm_ref.train import TrainConfig, exact_match, lr_at, model_logits, train

TINY = dict(d_model=64, n_heads=4, d_ff=128, n_decoder_layers=2)
FAST = dict(task="copy", task_args={"n_digits": 4}, batch_size=64, lr=1e-2, warmup=10, eval_size=200,
            progress=False, model=TINY)


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_tiny_model_learns_copy_and_reverse_within_seconds(task):
    history = train(TrainConfig(**{**FAST, "task": task}, steps=200, eval_every=200))
    assert history["summary"]["accuracy"] >= 0.95
    assert history["losses"][-1]["loss"] < history["losses"][0]["loss"] / 10


def test_teacher_forced_exact_match_equals_greedy_decoding():
    """The training loop's cheap accuracy (one forward pass) is greedy decoding's accuracy."""
    # stopped early in the schedule that learns copy: part-trained, some rows right and some wrong
    history = train(TrainConfig(**FAST, steps=200, eval_every=200, stop_after=40))
    model, task = history["model"].eval(), CopyTask(4)
    data = task.eval_set(300)
    with torch.no_grad():
        teacher_forced = exact_match(model_logits(model, data), data.target)
        generated = lm_generate(model, data.inp[:, : task.prompt_len], task.max_answer_len)
    answer = data.target[:, task.prompt_len - 1:]  # the scored positions: digits and <eos>
    greedy = (generated[:, task.prompt_len:] == answer).all(dim=1)
    assert 0 < int(greedy.sum()) < len(greedy), "pick a step count where the model is part-trained"
    assert torch.equal(teacher_forced, greedy)
    assert (data.target[:, : task.prompt_len - 1] == IGNORE_INDEX).all()


def test_resumed_run_ends_as_an_uninterrupted_run(tmp_path):
    settings = dict(FAST, steps=12, eval_every=4, log_every=2)
    whole = train(TrainConfig(**settings, out=str(tmp_path / "whole")))
    train(TrainConfig(**settings, out=str(tmp_path / "split"), stop_after=6))
    resumed = train(TrainConfig(**settings, out=str(tmp_path / "split"), resume=True))
    assert [e["step"] for e in resumed["evals"]] == [e["step"] for e in whole["evals"]]
    assert [x["loss"] for x in resumed["losses"]] == [x["loss"] for x in whole["losses"]]
    for (name, a), (_, b) in zip(whole["model"].state_dict().items(), resumed["model"].state_dict().items()):
        assert torch.equal(a, b), name


def test_resume_refuses_a_checkpoint_of_another_model(tmp_path):
    train(TrainConfig(**FAST, steps=2, eval_every=2, out=str(tmp_path)))
    with pytest.raises(ValueError, match="another task or model"):
        train(TrainConfig(**{**FAST, "model": {**TINY, "d_model": 32}}, steps=4, eval_every=2, out=str(tmp_path),
                          resume=True))


def test_two_process_ddp_matches_one_process(tmp_path):
    """torchrun with 2 CPU processes (gloo) gives the single-process run: same losses, same weights."""
    args = ["--task", "copy", "--n-digits", "4", "--steps", "8", "--batch-size", "32", "--eval-every", "8",
            "--eval-size", "100", "--log-every", "2", "--d-model", "32", "--n-heads", "2", "--d-ff", "64",
            "--n-decoder-layers", "1", "--device", "cpu", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ddp = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517", "-m",
         "tfm_ref.train", *args, "--out", str(tmp_path / "ddp"), "--export", str(tmp_path / "ddp.pt")],
        capture_output=True, text=True, env=env, timeout=240)
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    single = subprocess.run(
        [sys.executable, "-m", "tfm_ref.train", *args, "--out", str(tmp_path / "one"), "--export", str(tmp_path / "one.pt")],
        capture_output=True, text=True, env=env, timeout=240)
    assert single.returncode == 0, single.stderr[-2000:]
    summaries = [json.loads(out.stdout.strip().splitlines()[-1]) for out in (ddp, single)]
    assert summaries[0]["world_size"] == 2 and summaries[1]["world_size"] == 1
    losses = [[x["loss"] for x in json.loads((tmp_path / run / "history.json").read_text())["losses"]]
              for run in ("ddp", "one")]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4, abs=1e-6)
    weights = [torch.load(tmp_path / f"{run}.pt", weights_only=False)["state_dict"] for run in ("ddp", "one")]
    for name, value in weights[1].items():
        if name.endswith("k_proj.bias"):
            # softmax ignores a key bias (it adds the same q·b to every score of a query): its gradient
            # is rounding noise, which Adam scales up to full-size steps in either run
            continue
        torch.testing.assert_close(weights[0][name], value, rtol=1e-4, atol=1e-5, msg=name)


def test_cli_prints_a_json_summary_last(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tfm_ref.train", "--task", "sort", "--n-digits", "3", "--steps", "3", "--batch-size", "8",
         "--eval-every", "3", "--eval-size", "20", "--d-model", "32", "--n-heads", "2", "--d-ff", "32",
         "--device", "cpu", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"task", "steps", "accuracy", "loss", "tokens_per_s"} <= summary.keys()
    assert summary["task"] == "sort" and summary["steps"] == 3 and summary["tokens_per_s"] > 0
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "history.json").exists()


def test_learning_rate_warms_up_then_decays_by_cosine():
    cfg = TrainConfig(steps=1000, warmup=100, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(1e-5)
    assert lr_at(99, cfg) == pytest.approx(1e-3)
    assert lr_at(550, cfg) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # halfway through the cosine
    assert lr_at(1000, cfg) == pytest.approx(1e-4)
    decay = [lr_at(s, cfg) for s in range(100, 1000)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    assert not math.isnan(lr_at(5, TrainConfig(steps=5, warmup=5)))


def test_bad_settings_raise_value_errors():
    with pytest.raises(ValueError, match="unknown task"):
        TrainConfig(task="poetry")
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="resume"):
        TrainConfig(resume=True)
    with pytest.raises(ValueError, match="device"):
        TrainConfig(device="tpu")
