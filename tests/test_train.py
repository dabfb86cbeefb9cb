"""tfm_lab.train: a tiny model learns; resume and data parallelism change nothing; bad input is one line."""
from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys

import psutil
import pytest
import torch
from cli_errors import BAD_INPUT_EITHER_CLI, error_line

from tfm_lab.cli import SettingsError
from tfm_ref.decoding import lm_generate
from tfm_lab.pretrained import load_date_model
from tfm_ref.schedule import noam_lr
from tfm_ref.losses import label_smoothed_cross_entropy
from tfm_lab.tasks import IGNORE_INDEX, CopyTask, DateTask
from tfm_lab.train import (
    TrainConfig,
    _evaluate,
    autocast_dtype,
    build_model,
    eval_chunks,
    exact_match,
    lr_at,
    main,
    model_logits,
    reached_for_good,
    restore_rng_state,
    rng_state,
    token_loss_sum,
    train,
    warm_up,
)
import tfm_lab.train as train_module

TINY = dict(d_model=64, n_heads=4, d_ff=128, n_decoder_layers=2)
TINY_SEQ2SEQ = dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)
FAST = dict(task="copy", task_args={"n_digits": 4}, batch_size=64, lr=1e-2, warmup=10, eval_size=200,
            progress=False, model=TINY)


@pytest.mark.parametrize("task", ["copy", "reverse"])
@pytest.mark.slow
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


class _Killed(Exception):
    """Stands for the process being killed in the middle of a step."""


def test_checkpoint_every_saves_between_evaluations_so_a_killed_run_resumes_from_there(tmp_path, monkeypatch):
    """One evaluation, at the end; a checkpoint every 3 steps. Killed in step 8, the run resumes from
    step 6 and ends as the uninterrupted run, dropout included (the generators are restored)."""
    settings = dict(FAST, model={**TINY, "dropout": 0.1}, steps=10, eval_every=10, checkpoint_every=3, log_every=2)
    whole = train(TrainConfig(**settings, out=str(tmp_path / "whole")))
    draw = CopyTask.batch_for_step

    def killed_in_step_8(task, step, n, seed):
        if step == 7:
            raise _Killed
        return draw(task, step, n, seed)

    monkeypatch.setattr(CopyTask, "batch_for_step", killed_in_step_8)
    with pytest.raises(_Killed):
        train(TrainConfig(**settings, out=str(tmp_path / "killed")))
    monkeypatch.undo()
    assert torch.load(tmp_path / "killed" / "checkpoint.pt", weights_only=False)["step"] == 6
    resumed = train(TrainConfig(**settings, out=str(tmp_path / "killed"), resume=True))
    assert [x["loss"] for x in resumed["losses"]] == [x["loss"] for x in whole["losses"]]
    for (name, a), (_, b) in zip(whole["model"].state_dict().items(), resumed["model"].state_dict().items()):
        assert torch.equal(a, b), name


def test_checkpoint_holds_and_restores_the_gpu_generator_state(monkeypatch):
    """On CUDA the GPU's generator state is saved beside the CPU's and set back on resume, from a
    checkpoint loaded onto any device (CUDA is faked here: the calls are recorded)."""
    gpu, fake_state = torch.device("cuda", 0), torch.arange(16, dtype=torch.uint8)
    restored = {}
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": fake_state.clone())
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": restored.update(state=state,
                                                                                                  device=device))
    file = io.BytesIO()
    torch.save(rng_state(gpu), file)
    cpu_draw = torch.rand(3)  # the CPU generator moves on after the save …
    file.seek(0)
    restore_rng_state(torch.load(file, weights_only=False), gpu)
    assert torch.equal(torch.rand(3), cpu_draw)  # … and is set back to where it was
    assert torch.equal(restored["state"], fake_state) and restored["state"].device.type == "cpu"
    assert restored["device"] == gpu
    assert "rng_cuda" not in rng_state(torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_resume_with_dropout_is_bit_identical(tmp_path):
    # the readable attention path in float32: deterministic kernels, so any difference is the generator's
    settings = dict(FAST, device="cuda", precision="fp32", model={**TINY, "dropout": 0.1, "attn_impl": "eager"},
                    steps=12, eval_every=4, log_every=2)
    whole = train(TrainConfig(**settings, out=str(tmp_path / "whole")))
    train(TrainConfig(**settings, out=str(tmp_path / "split"), stop_after=6))
    resumed = train(TrainConfig(**settings, out=str(tmp_path / "split"), resume=True))
    assert [x["loss"] for x in resumed["losses"]] == [x["loss"] for x in whole["losses"]]
    for (name, a), (_, b) in zip(whole["model"].state_dict().items(), resumed["model"].state_dict().items()):
        assert torch.equal(a, b), name


def test_resume_refuses_a_checkpoint_of_another_model(tmp_path):
    train(TrainConfig(**FAST, steps=2, eval_every=2, out=str(tmp_path)))
    with pytest.raises(SettingsError, match="another task or model"):
        train(TrainConfig(**{**FAST, "model": {**TINY, "d_model": 32}}, steps=4, eval_every=2, out=str(tmp_path),
                          resume=True))


def test_resume_accepts_a_checkpoint_that_differs_only_in_the_attention_path(tmp_path):
    train(TrainConfig(**FAST, steps=2, eval_every=2, out=str(tmp_path), precision="fp32"))
    resumed = train(TrainConfig(**{**FAST, "model": {**TINY, "attn_impl": "eager"}}, steps=4, eval_every=2,
                                out=str(tmp_path), resume=True))
    assert [e["step"] for e in resumed["evals"]] == [2, 4]


def test_evaluations_during_training_use_the_quick_set_and_the_last_one_all_of_it():
    history = train(TrainConfig(**FAST, steps=4, eval_every=1, quick_eval_size=50))
    assert [e["examples"] for e in history["evals"]] == [50, 50, 50, FAST["eval_size"]]


def test_a_cpu_trains_the_readable_attention_path_unless_told_otherwise():
    run = lambda **kw: train(TrainConfig(**{**FAST, **kw}, steps=1, device="cpu"))  # noqa: E731
    bf16, fp32 = run(precision="bf16"), run(precision="fp32")
    assert (bf16["model_config"]["attn_impl"], bf16["summary"]["precision"]) == ("eager", "bf16")
    assert (fp32["model_config"]["attn_impl"], fp32["summary"]["precision"]) == ("eager", "fp32")
    assert (bf16["summary"]["length_buckets"], fp32["summary"]["length_buckets"]) == (1, 2)  # where the padding costs
    assert run(precision="fp32", model={**TINY, "attn_impl": "sdpa"})["model_config"]["attn_impl"] == "sdpa"


def test_a_threshold_counts_as_reached_from_the_evaluation_after_the_last_dip():
    evals = [dict(step=step, time_s=step / 10, accuracy=accuracy)
             for step, accuracy in ((25, 0.5), (50, 0.9995), (75, 0.998), (100, 0.9991), (125, 1.0))]
    assert reached_for_good(evals, 0.999) == 10.0 and reached_for_good(evals, 0.999, key="step") == 100
    assert reached_for_good(evals, 0.99, key="step") == 50
    assert reached_for_good(evals[:3], 0.999) is None  # the last evaluation is below it


def test_the_compile_warm_up_leaves_no_trace_in_the_run(monkeypatch):
    # torch.compile as the identity: the warm-up passes run, without minutes of compiling. With
    # dropout, a warm-up that stepped, kept its gradients or drew from the generators shows.
    monkeypatch.setattr(torch, "compile", lambda module, mode, dynamic=None: module)
    settings = dict(FAST, steps=3, eval_every=3, log_every=1, model={**TINY, "dropout": 0.2})
    run = lambda compile: train(TrainConfig(**settings, compile=compile))  # noqa: E731
    plain, warmed = run(False), run(True)
    assert [log["loss"] for log in warmed["losses"]] == [log["loss"] for log in plain["losses"]]
    for a, b in zip(plain["model"].parameters(), warmed["model"].parameters(), strict=True):
        assert torch.equal(a, b)
    assert plain["summary"]["compile_seconds"] == 0.0 < warmed["summary"]["compile_seconds"]


def test_the_compile_warm_up_ends_the_compile_workers_so_that_their_start_up_takes_no_cpu_from_training():
    from torch._inductor.async_compile import AsyncCompile

    def workers() -> list[str]:
        found = []
        for process in psutil.Process().children(recursive=True):
            try:
                found += [command for command in process.cmdline() if "compile_worker" in command]
            except psutil.NoSuchProcess:  # one that ended while being listed
                pass
        return found

    AsyncCompile.process_pool()  # what compiling GPU kernels starts; started by hand here, where none are compiled
    assert workers()
    warm_up(lambda batch: None, None, torch.nn.Linear(2, 2), torch.device("cpu"))
    assert not workers()


@pytest.mark.slow
def test_the_compiled_loss_equals_the_eager_one_with_its_gradient():
    # what --compile trains with: one fused pass over bf16 logits (as autocast gives them), smoothed,
    # with unscored positions
    logits = torch.randn(4, 6, 50, dtype=torch.bfloat16) * 3
    target = torch.randint(0, 50, (4, 6))
    target[0, 3:] = IGNORE_INDEX
    results = []
    for loss_sum_of in (token_loss_sum, torch.compile(token_loss_sum)):
        x = logits.clone().requires_grad_()
        loss = loss_sum_of(x, target, 0.1)
        loss.backward()
        results.append((loss, x.grad))
    (eager, eager_grad), (fused, fused_grad) = results
    assert eager.dtype == fused.dtype == torch.float32 and fused_grad.dtype == torch.bfloat16
    torch.testing.assert_close(fused, eager)
    torch.testing.assert_close(fused_grad, eager_grad)
    assert not fused_grad[0, 3:].any()  # the unscored positions get no gradient


@pytest.mark.slow
@pytest.mark.parametrize("length_buckets, passes", [(0, 1), (2, 2)], ids=["default", "two-buckets"])
def test_a_compiled_run_trains_as_the_eager_one_and_compiles_off_the_clock(length_buckets, passes, monkeypatch):
    # groups trimmed to their longest source change width from step to step: compiled, the default is one pass
    # per step, and two buckets asked for share one dynamic graph; before, each new width compiled again on the
    # clock (a CI run measured 6.2 s of training against 6.0 s of compiling)
    settings = dict(FAST, task="dates", task_args={}, steps=4, eval_every=4, log_every=1, device="cpu",
                    precision="fp32", model=TINY_SEQ2SEQ, length_buckets=length_buckets)
    eager = train(TrainConfig(**settings))

    torch.compiler.reset()  # graphs cached by an earlier test would serve this model uncounted
    graphs = torch._dynamo.utils.counters["stats"]  # graphs compiled in this process so far
    graphs_after_warm_up = []

    def counted_warm_up(*args, **kwargs):
        seconds = warm_up(*args, **kwargs)
        graphs_after_warm_up.append(graphs["unique_graphs"])  # from here the clock runs
        return seconds

    monkeypatch.setattr(train_module, "warm_up", counted_warm_up)
    before = graphs["unique_graphs"]
    compiled = train(TrainConfig(**settings, compile=True))
    assert graphs_after_warm_up[0] > before, "the warm-up compiled"
    assert graphs["unique_graphs"] == graphs_after_warm_up[0], "nothing compiled again once the clock ran"
    assert [log["loss"] for log in compiled["losses"]] == pytest.approx([log["loss"] for log in eager["losses"]],
                                                                       rel=1e-4)
    assert compiled["summary"]["length_buckets"] == passes
    assert (compiled["summary"]["compiled"], compiled["summary"]["compile_mode"]) == (True, "default")


def test_length_buckets_trim_only_padding_and_give_the_whole_batch_gradient():
    """Rows split by source length and trimmed: the same rows, the same loss, the same gradient."""
    torch.manual_seed(0)
    task = DateTask()
    model, _ = build_model(task, TINY_SEQ2SEQ)
    batch = task.batch_for_step(0, 48, seed=0)
    n_scored = int((batch.target != IGNORE_INDEX).sum())

    def loss_and_gradient(parts):
        model.zero_grad()
        total = 0.0
        for part in parts:
            loss = label_smoothed_cross_entropy(model_logits(model, part), part.target, 0.1, IGNORE_INDEX,
                                                reduction="sum") / n_scored
            loss.backward()
            total += loss.item()
        return total, [p.grad.clone() for p in model.parameters()]

    parts = batch.by_source_length(3)
    assert [len(p) for p in parts] == [16, 16, 16]
    widths = [p.src.shape[1] for p in parts]
    assert widths == sorted(widths) and widths[0] < batch.src.shape[1], "shorter groups are narrower"
    assert all(p.src_mask[:, -1].any() for p in parts), "each group is trimmed to its longest source, no further"
    rows = lambda b: sorted(map(tuple, b.src[b.src_mask].split(b.src_mask.sum(1).tolist())))  # noqa: E731
    assert sorted(r for p in parts for r in rows(p)) == rows(batch), "the same rows, padding aside"
    whole_loss, whole_gradient = loss_and_gradient([batch])
    split_loss, split_gradient = loss_and_gradient(parts)
    assert split_loss == pytest.approx(whole_loss, rel=1e-5)
    for split, whole in zip(split_gradient, whole_gradient):
        torch.testing.assert_close(split, whole, rtol=1e-4, atol=1e-6)
    assert CopyTask(4).batch_for_step(0, 8, 0).by_source_length(2)[0].src is None  # no source: one part


def test_training_in_length_buckets_takes_the_steps_of_whole_batches():
    # 50 rows in 3 groups of 17, 17 and 16: a group weighed by its own size would show
    runs = [train(TrainConfig(task="dates", steps=4, batch_size=50, log_every=1, eval_every=4, eval_size=50,
                              device="cpu", precision="fp32", length_buckets=k, progress=False, model=TINY_SEQ2SEQ))
            for k in (1, 3)]
    assert [r["summary"]["length_buckets"] for r in runs] == [1, 3]
    whole, split = ([x["loss"] for x in r["losses"]] for r in runs)
    assert split == pytest.approx(whole, rel=1e-4)
    for (name, a), b in zip(runs[0]["model"].state_dict().items(), runs[1]["model"].state_dict().values()):
        if not name.endswith("k_proj.bias"):  # rounding noise that Adam scales up (see the DDP test below)
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=name)


def test_chunks_hold_every_row_once_in_pieces_trimmed_to_their_longest_source():
    dates = DateTask().eval_set(103)
    chunks = dates.in_chunks(25)
    assert [len(c) for c in chunks] == [21, 21, 21, 20, 20], "at most 25 rows, as even as they come"
    assert all(c.src_mask[:, -1].any() for c in chunks), "each trimmed to its longest source, no further"
    assert chunks[0].src.shape[1] < dates.src.shape[1], "the short sources lose their padding"
    rows = lambda b: sorted(map(tuple, b.src[b.src_mask].split(b.src_mask.sum(1).tolist())))  # noqa: E731
    assert sorted(r for c in chunks for r in rows(c)) == rows(dates), "the same rows, padding aside"
    copies = CopyTask(4).eval_set(60)
    assert [c.inp.tolist() for c in copies.in_chunks(25)] == [copies.inp[s:s + 25].tolist() for s in (0, 25, 50)]


def test_evaluation_in_chunks_scores_as_one_pass_over_the_whole_set():
    """Sorted, trimmed pieces give the accuracy and loss of one pass over the rows as they come."""
    model = load_date_model().model.float()
    torch.manual_seed(0)
    with torch.no_grad():  # a damaged copy of the shipped model: some dates right, some wrong
        for p in model.parameters():
            p.add_(0.3 * p.std() * torch.randn_like(p))
    data = DateTask().eval_set(600)
    with torch.no_grad():
        logits = model_logits(model, data)
    whole_accuracy = exact_match(logits, data.target).float().mean().item()
    whole_loss = label_smoothed_cross_entropy(logits, data.target, 0.0, IGNORE_INDEX).item()
    assert 0.1 < whole_accuracy < 0.9, "a part-right model, so that a lost or repeated row shows"
    accuracy, loss = _evaluate(model, eval_chunks(data, torch.device("cpu")), torch.device("cpu"), None)
    assert abs(accuracy - whole_accuracy) <= 1 / len(data)  # a near tie may round the other way
    assert loss == pytest.approx(whole_loss, rel=1e-5)


@pytest.mark.parametrize("capabilities, expected", [({"avx512_bf16": True}, torch.bfloat16),
                                                    ({"amx_bf16": True}, torch.bfloat16),
                                                    ({"avx512_bf16": False, "amx_bf16": False}, None)])
def test_auto_precision_is_bf16_on_cpus_with_bf16_instructions(monkeypatch, capabilities, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities, raising=False)
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu) == expected
    assert autocast_dtype("fp32", cpu) is None and autocast_dtype("bf16", cpu) == torch.bfloat16


@pytest.mark.parametrize("gpu, capability, expected", [("T4 (Colab's free GPU)", (7, 5), None),
                                                       ("V100", (7, 0), None),
                                                       ("A100", (8, 0), torch.bfloat16),
                                                       ("RTX 4090", (8, 9), torch.bfloat16),
                                                       ("H100", (9, 0), torch.bfloat16)])
def test_auto_precision_is_bf16_on_gpus_with_bf16_units_and_float32_where_it_is_emulated(monkeypatch, gpu, capability,
                                                                                        expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    cuda = torch.device("cuda")
    assert autocast_dtype("auto", cuda) == expected, gpu
    assert autocast_dtype("bf16", cuda) == torch.bfloat16 and autocast_dtype("fp32", cuda) is None


@pytest.mark.slow
@pytest.mark.parametrize("task", [["--task", "copy", "--n-digits", "4"],
                                  ["--task", "dates", "--n-encoder-layers", "1", "--length-buckets", "2"]],
                         ids=["decoder-only", "encoder-decoder-in-length-buckets"])
def test_two_process_ddp_matches_one_process(task, tmp_path):
    """torchrun with 2 CPU processes (gloo) gives the single-process run: same losses, same weights."""
    # float32: in bf16 a half batch rounds differently from the whole one
    args = [*task, "--steps", "8", "--batch-size", "32", "--eval-every", "8",
            "--eval-size", "100", "--log-every", "2", "--d-model", "32", "--n-heads", "2", "--d-ff", "64",
            "--n-decoder-layers", "1", "--device", "cpu", "--precision", "fp32", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ddp = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
         "tfm_lab.train", *args, "--out", str(tmp_path / "ddp"), "--export", str(tmp_path / "ddp.pt")],
        capture_output=True, text=True, env=env, timeout=240)
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    single = subprocess.run(
        [sys.executable, "-m", "tfm_lab.train", *args, "--out", str(tmp_path / "one"), "--export", str(tmp_path / "one.pt")],
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


@pytest.mark.slow
def test_cli_prints_a_json_summary_last(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tfm_lab.train", "--task", "sort", "--n-digits", "3", "--steps", "3", "--batch-size", "8",
         "--eval-every", "3", "--eval-size", "20", "--d-model", "32", "--n-heads", "2", "--d-ff", "32",
         "--device", "cpu", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"task", "steps", "accuracy", "loss", "tokens_per_s"} <= summary.keys()
    assert summary["task"] == "sort" and summary["steps"] == 3 and summary["tokens_per_s"] > 0
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "history.json").exists()


def test_a_compile_mode_on_the_command_line_compiles_in_that_mode(monkeypatch, capsys):
    modes = []  # (what was compiled, in which mode)
    monkeypatch.setattr(torch, "compile", lambda fn, mode, dynamic=None: modes.append((getattr(fn, "__name__", type(fn).__name__),
                                                                          mode)) or fn)
    args = ["--task", "copy", "--n-digits", "3", "--steps", "1", "--batch-size", "8", "--eval-size", "8", "--d-model",
            "32", "--n-heads", "2", "--d-ff", "32", "--device", "cpu", "--no-progress"]
    main(args)
    main([*args, "--compile"])
    summary = main([*args, "--compile-mode", "reduce-overhead"])["summary"]
    assert modes == [("DecoderOnlyLM", "default"), ("token_loss_sum", "default"),
                     ("DecoderOnlyLM", "reduce-overhead"), ("token_loss_sum", "reduce-overhead")]
    assert (summary["compiled"], summary["compile_mode"]) == (True, "reduce-overhead")


def test_learning_rate_warms_up_then_decays_by_cosine():
    cfg = TrainConfig(steps=1000, warmup=100, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(1e-5)
    assert lr_at(99, cfg) == pytest.approx(1e-3)
    assert lr_at(550, cfg) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # halfway through the cosine
    assert lr_at(1000, cfg) == pytest.approx(1e-4)
    decay = [lr_at(s, cfg) for s in range(100, 1000)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))
    assert not math.isnan(lr_at(5, TrainConfig(steps=5, warmup=5)))


def test_noam_schedule_is_the_2017_curve_with_its_peak_at_lr():
    cfg = TrainConfig(steps=1000, warmup=100, lr=1e-3, schedule="noam")
    assert lr_at(99, cfg) == pytest.approx(1e-3)  # step 100, counted from 1 as in the paper: the peak
    assert lr_at(0, cfg) == pytest.approx(1e-5)  # linear warmup
    assert lr_at(399, cfg) == pytest.approx(1e-3 / 2)  # then 1/√step: 4× the steps, half the rate
    ratios = [lr_at(step - 1, cfg) / noam_lr(step, 512, 100) for step in (1, 50, 100, 400, 1000)]
    assert ratios == pytest.approx([ratios[0]] * len(ratios))


@pytest.mark.parametrize("settings, says", [
    (dict(task="poetry"), "unknown task"), (dict(steps=0), "steps must be at least 1"),
    (dict(resume=True), "resume"), (dict(device="tpu"), "unknown device 'tpu'"),
    (dict(schedule="linear"), "unknown schedule"), (dict(schedule="noam", warmup=0), "warmup"),
    (dict(precision="fp8"), "unknown precision"), (dict(quick_eval_size=-1), "quick_eval_size"),
    (dict(label_smoothing=1.0), "label_smoothing"), (dict(length_buckets=-1), "length_buckets must be 0 or more"),
    (dict(compile_mode="fastest"), "unknown compile_mode 'fastest'"),
])
def test_bad_settings_raise_errors_naming_them(settings, says):
    with pytest.raises(SettingsError, match=says):
        TrainConfig(**settings)


def test_help_formats_and_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert all(option in shown for option in ("--schedule", "--precision", "--quick-eval-size"))


@pytest.mark.parametrize("args, says", [
    *BAD_INPUT_EITHER_CLI,
    (["--out", "{file}/run"], "cannot write to {file}/run"),
    (["--export", "{file}/model.pt"], "cannot write to {file}"),
    (["--task", "poetry"], "invalid choice: 'poetry'"),
    (["--d-model", "30"], "d_model"),
])
def test_cli_bad_input_is_one_error_line_and_exit_status_2(args, says, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    error = error_line(main, ["--task", "copy", "--steps", "2", "--device", "cpu", "--no-progress", *args], capsys,
                       tmp_path)
    assert error.startswith("python -m tfm_lab.train: error: ")
    assert says.format(file=tmp_path / "file") in error
