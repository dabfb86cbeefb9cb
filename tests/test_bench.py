"""tfm_ref.bench: the comparison runs on CPU, and its FLOP formula matches PyTorch's FLOP counter."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from tfm_ref.bench import TINY, BenchConfig, TorchTransformerLM, training_flops
from tfm_ref.config import TransformerConfig
from tfm_ref.transformer import Transformer


def _models(cfg: BenchConfig):
    ours = Transformer(TransformerConfig(cfg.vocab_size, cfg.d_model, cfg.n_heads, None, cfg.n_layers, cfg.n_layers,
                                         cfg.d_ff, 0.0, max_len=cfg.seq_len, attn_impl="eager"))
    return ours, TorchTransformerLM(BenchConfig(**{**TINY, "dropout": 0.0}), cfg.seq_len)


def test_bench_cli_runs_on_cpu_and_prints_json_last():
    result = subprocess.run([sys.executable, "-m", "tfm_ref.bench", "--tiny", "--device", "cpu"],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"tokens_per_s", "torch_tokens_per_s", "ratio_vs_torch"} <= summary.keys()
    assert summary["tokens_per_s"] > 0 and summary["torch_tokens_per_s"] > 0
    assert summary["ratio_vs_torch"] == pytest.approx(summary["tokens_per_s"] / summary["torch_tokens_per_s"])


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
