"""tfm_lab.bench: the comparison runs on CPU, its FLOP formula matches PyTorch's FLOP counter, the
peak for MFU follows the GPU's name, sizes fit the memory, and bad input is one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from cli_errors import BAD_INPUT_EITHER_CLI, error_line
from torch.utils.flop_counter import FlopCounterMode

from tfm_lab import bench
from tfm_ref.attention import scaled_dot_product_attention, sdpa_attention
from tfm_lab.bench import (
    DEVICE_SIZES,
    TINY,
    BenchConfig,
    TorchTransformerLM,
    attention_memory,
    available_memory,
    bench_attention,
    fit_to_memory,
    peak_bf16_flops,
    training_flops,
    training_memory,
)
from tfm_lab.cli import SettingsError
from tfm_ref.config import TransformerConfig
from tfm_lab.train import token_loss_sum
from tfm_ref.transformer import Transformer
from tfm_widgets.efficiency import PeakMemory


def _models(cfg: BenchConfig):
    ours = Transformer(TransformerConfig(cfg.vocab_size, cfg.d_model, cfg.n_heads, None, cfg.n_layers, cfg.n_layers,
                                         cfg.d_ff, 0.0, max_len=cfg.seq_len, attn_impl="eager"))
    return ours, TorchTransformerLM(BenchConfig(**{**TINY, "dropout": 0.0}), cfg.seq_len)


@pytest.mark.slow
def test_bench_cli_runs_on_cpu_and_prints_json_last():
    result = subprocess.run([sys.executable, "-m", "tfm_lab.bench", "--tiny", "--device", "cpu"],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"tokens_per_s", "torch_tokens_per_s", "ratio_vs_torch"} <= summary.keys()
    assert summary["tokens_per_s"] > 0 and summary["torch_tokens_per_s"] > 0
    assert summary["ratio_vs_torch"] == pytest.approx(summary["tokens_per_s"] / summary["torch_tokens_per_s"])


@pytest.mark.slow
def test_the_profile_says_where_tfm_refs_step_spends_its_time(tmp_path, capsys):
    profile = tmp_path / "profile.txt"
    bench.main(["--tiny", "--device", "cpu", "--no-compile", "--profile", str(profile)])
    header, table = profile.read_text().split("\n", 1)
    assert header.startswith("tfm_ref_eager, BenchConfig(d_model=64")
    rows = [line.split() for line in table.splitlines() if line.lstrip().startswith("aten::")]
    assert {"aten::addmm", "aten::mm"} & {row[0] for row in rows}  # the linear maps, forward and backward
    assert "Self CPU time total" in table


@pytest.fixture
def compiled(monkeypatch):
    """What the rows give torch.compile, in order ("loss", or the model's class), compiling nothing."""
    given = []
    monkeypatch.setattr(torch, "compile", lambda fn, mode: given.append(
        "loss" if fn is token_loss_sum else type(fn).__name__) or fn)
    return given


def test_each_compiled_row_ends_the_compile_workers_after_its_warmup_and_before_its_clock(compiled, monkeypatch):
    # from a warm compile cache the workers would still be starting while the row is timed
    monkeypatch.setattr(bench, "stop_compile_workers", lambda: compiled.append("stop workers"))
    real_clock = bench.time.perf_counter
    monkeypatch.setattr(bench.time, "perf_counter", lambda: compiled.append("clock") or real_clock())
    bench.run(BenchConfig(**{**TINY, "compile": True, "attn_lengths": (16,)}), torch.device("cpu"))
    stops = [i for i, event in enumerate(compiled) if event == "stop workers"]
    assert len(stops) == 3  # tfm_ref, nn.Transformer, nn.Transformer with the compiled loss
    assert all(compiled[i + 1] == "clock" for i in stops)
    assert compiled.index("stop workers") > compiled.index("Transformer")  # not in the eager rows before


def test_compiled_each_model_trains_its_own_way_and_nn_transformer_with_the_compiled_loss_too(compiled):
    results = bench.run(BenchConfig(**{**TINY, "compile": True, "attn_lengths": (16,)}), torch.device("cpu"))
    assert list(results["training"]) == ["tfm_ref_eager", "torch_eager", "tfm_ref_compiled", "torch_compiled",
                                         "torch_compiled+loss"]
    assert compiled == ["Transformer", "loss", "TorchTransformerLM", "TorchTransformerLM", "loss"]
    s, rows = results["summary"], results["training"]
    assert s["ratio_vs_torch"] == rows["tfm_ref_compiled"]["tokens_per_s"] / rows["torch_compiled"]["tokens_per_s"]
    assert s["ratio_vs_torch_compiled_loss"] == \
        rows["tfm_ref_compiled"]["tokens_per_s"] / rows["torch_compiled+loss"]["tokens_per_s"]


def test_tfm_ref_alone_trains_no_nn_transformer_and_gives_no_ratio(compiled, capsys):
    results = bench.run(BenchConfig(**{**TINY, "compile": True, "compare": False, "attn_lengths": (16,)}),
                        torch.device("cpu"))
    assert list(results["training"]) == ["tfm_ref_eager", "tfm_ref_compiled"]
    assert compiled == ["Transformer", "loss"]
    s = results["summary"]
    assert s["tokens_per_s"] == results["training"]["tfm_ref_compiled"]["tokens_per_s"]
    assert s["ratio_vs_torch"] is None and s["torch_tokens_per_s"] is None and "ratio_vs_torch_compiled_loss" not in s
    summary = bench.main(["--tiny", "--device", "cpu", "--no-compile", "--only-tfm-ref"])["summary"]
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == summary and summary["ratio_vs_torch"] is None


@pytest.mark.parametrize("capability, expected", [((7, 5), None), ((9, 0), torch.bfloat16)], ids=["T4", "H100"])
def test_a_gpu_computes_in_the_trainers_precision_and_a_cpu_in_float32(monkeypatch, capability, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert bench._dtype(torch.device("cuda")) == expected  # on a T4 bf16 is emulated through float32
    assert bench._dtype(torch.device("cpu")) is None


def test_both_models_have_the_same_parameter_count():
    ours, theirs = _models(BenchConfig(**TINY))
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


def test_training_flops_match_pytorchs_flop_counter():
    cfg = BenchConfig(**TINY)
    ours, _ = _models(cfg)
    src = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len))
    tgt = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len))
    with FlopCounterMode(display=False) as counter:
        logits = ours(src, tgt)
        F.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()
    # the counter sees the matrix products (attention's too, on the eager path), as the formula counts
    assert training_flops(cfg) == pytest.approx(counter.get_total_flops(), rel=0.02)


A100_PART = "A100 (40 or 80 GB, SXM or PCIe)"


@pytest.mark.parametrize("name, part", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA A100-SXM4-40GB", A100_PART), ("NVIDIA A100-SXM4-80GB", A100_PART), ("NVIDIA A100-PCIE-40GB", A100_PART),
    ("NVIDIA A100 80GB PCIe", A100_PART), ("NVIDIA L4", "L4"), ("NVIDIA L40S", "L40S"), ("NVIDIA L40", "L40"),
    ("NVIDIA A10", "A10"),
])
def test_peak_flops_follow_the_device_name(name, part):
    assert peak_bf16_flops(name)[0] == part


def test_pcie_and_nvl_parts_get_lower_peaks_than_sxm():
    peak = lambda name: peak_bf16_flops(name)[1]  # noqa: E731
    assert peak("NVIDIA H100 PCIe") < peak("NVIDIA H100 NVL") < peak("NVIDIA H100 80GB HBM3") == peak("NVIDIA H200")
    assert peak("NVIDIA H200 NVL") < peak("NVIDIA H200")
    assert peak("NVIDIA L4") < peak("NVIDIA L40") < peak("NVIDIA L40S")


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB", "NVIDIA H100",
                                  "NVIDIA B200"])
def test_a_gpu_not_listed_gets_no_peak_unless_given_one(name, monkeypatch):
    assert peak_bf16_flops(name) is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    assert bench._peak_flops(BenchConfig(), torch.device("cuda", 0)) is None
    assert bench._peak_flops(BenchConfig(peak_tflops=100.0), torch.device("cuda", 0)) == ("--peak-tflops", 100e12)


def test_available_memory_on_a_cpu_is_some_of_the_machines_memory():
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < available_memory(torch.device("cpu")) <= total


def _measured_training_step(model: torch.nn.Module, cfg: BenchConfig) -> int:
    """Bytes of the weights plus the peak of everything one training step creates."""
    optimizer = torch.optim.AdamW(model.parameters())
    src = torch.randint(3, cfg.vocab_size, (cfg.batch_size, cfg.seq_len))
    tgt = torch.randint(3, cfg.vocab_size, (cfg.batch_size, cfg.seq_len + 1))
    with PeakMemory() as memory:
        logits = model(src, tgt[:, :-1])
        F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten()).backward()
        optimizer.step()
    return memory.peak + 4 * sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("sizes", [dict(dropout=0.1, seq_len=64, batch_size=8),  # CPU dropout: unfused attention
                                   dict(dropout=0.0, d_model=128, d_ff=512, n_layers=2, seq_len=32, vocab_size=2000)])
@pytest.mark.slow
def test_training_memory_is_an_upper_estimate_of_a_measured_step(sizes):
    cfg = BenchConfig(**{**TINY, **sizes})
    config = TransformerConfig(cfg.vocab_size, cfg.d_model, cfg.n_heads, None, cfg.n_layers, cfg.n_layers, cfg.d_ff,
                               cfg.dropout, max_len=cfg.seq_len + 1)
    for model in (Transformer(config), TorchTransformerLM(cfg, cfg.seq_len + 1)):
        measured = _measured_training_step(model, cfg)
        assert measured <= training_memory(cfg, "cpu") <= 3 * measured, type(model).__name__


@pytest.mark.parametrize("path, attend", [("eager", scaled_dot_product_attention), ("sdpa", sdpa_attention)])
def test_attention_memory_is_an_upper_estimate_of_a_measured_pass(path, attend):
    cfg = BenchConfig(**TINY)
    shape = (cfg.attn_batch, cfg.n_heads, 256, cfg.d_model // cfg.n_heads)  # (B, H, T, Dh)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    with PeakMemory() as memory:
        attend(q, k, v).sum().backward()
    measured = memory.peak + 3 * q.numel() * 4
    assert measured <= attention_memory(cfg, 256, path) <= 3 * measured


def test_a_batch_nobody_chose_is_halved_until_it_fits():
    cfg = BenchConfig(**{**TINY, "batch_size": 64})
    assert fit_to_memory(cfg, training_memory(cfg, "cpu"), "cpu") == (cfg, [])
    fitted, notes = fit_to_memory(cfg, training_memory(replace(cfg, batch_size=16), "cpu"), "cpu")
    assert fitted.batch_size == 16 and "training at batch 16 instead" in notes[0]


def test_a_batch_that_cannot_fit_is_an_error_naming_what_to_change():
    cfg = BenchConfig(**{**TINY, "batch_size": 64})
    memory = training_memory(replace(cfg, batch_size=16), "cpu")
    with pytest.raises(SettingsError, match="choose a smaller --batch-size or --seq-len"):
        fit_to_memory(cfg, memory, "cpu", chosen={"batch_size"})
    with pytest.raises(SettingsError, match="even at batch 1"):
        fit_to_memory(cfg, training_memory(replace(cfg, batch_size=1), "cpu") - 1, "cpu")


def test_a_compile_mode_torch_does_not_know_is_named():
    with pytest.raises(SettingsError, match="unknown compile_mode 'fastest'"):
        BenchConfig(**{**TINY, "compile_mode": "fastest"})
    assert BenchConfig(**{**TINY, "compile_mode": "reduce-overhead"}).compile_mode == "reduce-overhead"


def test_attention_lengths_that_do_not_fit_are_skipped_and_said_so(capsys):
    cfg = BenchConfig(**TINY)
    short, long = cfg.attn_lengths
    memory = max(attention_memory(cfg, short, "eager"), attention_memory(cfg, long, "sdpa"))
    assert attention_memory(cfg, long, "eager") > memory  # the eager path at the longer length does not fit
    rows = bench_attention(cfg, torch.device("cpu"), repeats=1, memory=memory)
    assert rows[0]["eager_ms"] > 0 and rows[0]["sdpa_ms"] > 0 and rows[1]["sdpa_ms"] > 0
    assert rows[1]["eager_ms"] is None and "needs about" in rows[1]["eager_skipped"]
    assert f"attention: eager at length {long} skipped" in capsys.readouterr().err


@pytest.fixture
def planned(monkeypatch):
    """What `main` passes to `run`, without running it."""
    calls = {}

    def run(cfg, device, memory, profile=None):
        calls.update(cfg=cfg, device=device, memory=memory, profile=profile)
        return {"training": {}, "summary": {"device": "cpu", "peak_tflops": None}}

    monkeypatch.setattr(bench, "run", run)
    return calls


def test_help_formats_and_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exited:
        bench.main(["--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert "--memory-gib" in shown and "--peak-tflops" in shown


def test_cpu_sizes_are_chosen_for_the_cpu_unless_given(planned):
    bench.main(["--device", "cpu"])
    assert planned["cfg"].batch_size == DEVICE_SIZES["cpu"]["batch_size"]
    assert planned["cfg"].attn_lengths == DEVICE_SIZES["cpu"]["attn_lengths"]
    bench.main(["--device", "cpu", "--batch-size", "2", "--seq-len", "32"])
    assert (planned["cfg"].batch_size, planned["cfg"].seq_len) == (2, 32)


def test_a_small_memory_limit_shrinks_the_batch_and_says_so(planned, capsys):
    limit = training_memory(BenchConfig(**{**TINY, "batch_size": 2}), "cpu")
    bench.main(["--tiny", "--device", "cpu", "--memory-gib", str(limit / 2**30)])
    assert planned["cfg"].batch_size == 2 and planned["memory"] == int(limit / 2**30 * 2**30)
    assert "training at batch 2 instead" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    *BAD_INPUT_EITHER_CLI,
    (["--out", "{file}/bench.json"], "cannot write to {file}"),
    (["--out", "{folder}"], "is a folder; give a file name"),
    (["--profile", "{folder}"], "--profile {folder} is a folder; give a file name"),
    (["--profile", "{file}/profile.txt"], "cannot write to {file}"),
    (["--task", "dates"], "unrecognized arguments: --task dates"),
    (["--attn-lengths", "256,lots"], "expected comma-separated integers"),
    (["--n-heads", "3"], "d_model 64 is not divisible by n_heads 3"),
    (["--batch-size", "4", "--memory-gib", "0.000001"], "choose a smaller --batch-size"),
    (["--memory-gib", "-1"], "--memory-gib must be positive"),
    (["--compile-mode", "fastest"], "invalid choice: 'fastest'"),
])
def test_cli_bad_input_is_one_error_line_and_exit_status_2(args, says, tmp_path, capsys, monkeypatch, planned):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    error = error_line(bench.main, ["--tiny", "--device", "cpu", *args], capsys, tmp_path)
    assert error.startswith("python -m tfm_lab.bench: error: ")
    assert says.format(file=tmp_path / "file", folder=tmp_path) in error and not planned
