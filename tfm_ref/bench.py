"""Chapter 9 in numbers — tfm_ref against ``torch.nn.Transformer``, same configuration, same run.

    python -m tfm_ref.bench                      # base model (d 512, 8 heads, 6+6 layers), GPU if any
    python -m tfm_ref.bench --tiny --device cpu  # seconds, for CI

Measures, for both models: training tokens per second (forward, loss, backward, AdamW step),
eager and ``torch.compile``d, peak memory, and on a GPU the model FLOPs utilisation (MFU: the
FLOPs the model needs per step, by the formula in `training_flops`, over the device's dense
bf16 peak). Then the attention kernels alone: the readable eager path against SDPA over
sequence lengths, time (forward + backward) and peak memory. The last stdout line is JSON with
``tokens_per_s`` (tfm_ref; compiled when compiling), ``torch_tokens_per_s`` and ``ratio_vs_torch``.

Both models: embeddings shared by source, target and output head (scaled by √D), sinusoidal
positions, Post-Norm, ReLU, dropout as configured; on CUDA bf16 autocast and fused AdamW.

Shapes: B batch · S source positions · T target positions · D model width · V vocabulary.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .attention import scaled_dot_product_attention, sdpa_attention
from .config import TransformerConfig
from .positional import sinusoidal_positional_encoding
from .train import autocast, pick_device, synchronize
from .transformer import Transformer

__all__ = ["BenchConfig", "TorchTransformerLM", "training_flops", "bench_training", "bench_attention", "run", "main"]

# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets, for MFU.
PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}


@dataclass
class BenchConfig:
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6  # encoder and decoder each
    d_ff: int = 2048
    vocab_size: int = 32000
    batch_size: int = 64
    seq_len: int = 256  # source and target length
    dropout: float = 0.1
    steps: int = 20  # timed steps
    warmup: int = 5  # untimed steps (and compilation)
    compile: bool = True
    attn_lengths: tuple[int, ...] = (256, 512, 1024, 2048, 4096)
    attn_batch: int = 8


TINY = dict(d_model=64, n_heads=4, n_layers=1, d_ff=128, vocab_size=100, batch_size=4, seq_len=16, steps=3,
            warmup=1, compile=False, attn_lengths=(16, 32), attn_batch=2)


class TorchTransformerLM(nn.Module):
    """``nn.Transformer`` with the same embeddings, positions and output head as `tfm_ref.Transformer`."""

    def __init__(self, cfg: BenchConfig, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=cfg.d_model**-0.5)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, cfg.d_model), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.n_layers, cfg.d_ff, cfg.dropout,
                                   batch_first=True)
        # nn.Transformer always ends both stacks with a LayerNorm; a Post-Norm model has none (the
        # last block already normalises), so drop them to compare the same computation.
        self.core.encoder.norm = None
        self.core.decoder.norm = None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight
        self.scale = math.sqrt(cfg.d_model)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(ids) * self.scale + self.pe[: ids.shape[1]])  # (B, T, D)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)  # float, -inf above
        hidden = self.core(self._embed(src), self._embed(tgt), tgt_mask=causal, tgt_is_causal=True)
        return self.lm_head(hidden)  # (B, T, V)


def training_flops(cfg: BenchConfig) -> float:
    """FLOPs of one training step: 3 × the forward pass (the backward costs twice the forward).

    Forward: 2 FLOPs per multiply-add of every linear map on the tokens it reads, plus the
    attention products Q Kᵀ and A V (2 · 2 · positions² · D each, the causal one counted
    in full as the kernels that take a mask compute it), plus the output head.
    """
    b, n, d, f, v, layers = cfg.batch_size, cfg.seq_len, cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.n_layers
    encoder = layers * (2 * b * n * (4 * d * d + 2 * d * f) + 4 * b * n * n * d)
    decoder = layers * (2 * b * n * (8 * d * d + 2 * d * f) + 2 * 4 * b * n * n * d)  # self + cross attention
    head = 2 * b * n * d * v
    return 3.0 * (encoder + decoder + head)


def bench_training(model: nn.Module, forward, cfg: BenchConfig, device: torch.device, *, compile: bool,
                   desc: str) -> dict:
    """Time ``cfg.steps`` training steps of ``model`` after ``cfg.warmup`` untimed ones."""
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    run_model = torch.compile(model) if compile else model
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, cfg.vocab_size, (cfg.batch_size, cfg.seq_len), generator=g).to(device)
    tgt = torch.randint(3, cfg.vocab_size, (cfg.batch_size, cfg.seq_len + 1), generator=g).to(device)

    def step() -> torch.Tensor:
        with autocast(device):
            logits = forward(run_model, src, tgt[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in tqdm(range(cfg.warmup), desc=f"{desc} warmup", leave=False):
        step()
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    for _ in tqdm(range(cfg.steps), desc=desc, leave=False):
        loss = step()
    loss.item()
    synchronize(device)
    seconds = (time.perf_counter() - start) / cfg.steps
    result = {"step_ms": seconds * 1e3, "tokens_per_s": 2 * cfg.batch_size * cfg.seq_len / seconds,
              "tflops": training_flops(cfg) / seconds / 1e12}
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        peak = _peak_flops(device)
        result["mfu"] = None if peak is None else training_flops(cfg) / seconds / peak
    return result


def _peak_flops(device: torch.device) -> float | None:
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16.items() if key in name), None)


def bench_attention(cfg: BenchConfig, device: torch.device, repeats: int = 5) -> list[dict]:
    """Eager attention against SDPA (no mask, as in the encoder): forward + backward time and peak memory."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    head_dim = cfg.d_model // cfg.n_heads
    rows = []
    for n in tqdm(cfg.attn_lengths, desc="attention", leave=False):
        row = {"seq_len": n}
        for name, attend in (("eager", scaled_dot_product_attention), ("sdpa", sdpa_attention)):
            shape = (cfg.attn_batch, cfg.n_heads, n, head_dim)  # (B, H, T, Dh)
            q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
            try:
                attend(q, k, v).sum().backward()  # warm-up (kernel selection, allocator)
                synchronize(device)
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                    base = torch.cuda.memory_allocated(device)
                start = time.perf_counter()
                for _ in range(repeats):
                    attend(q, k, v).sum().backward()
                synchronize(device)
                row[f"{name}_ms"] = (time.perf_counter() - start) / repeats * 1e3
                if device.type == "cuda":
                    row[f"{name}_memory_mib"] = (torch.cuda.max_memory_allocated(device) - base) / 2**20
            except torch.OutOfMemoryError:
                row[f"{name}_ms"] = None  # the eager path materialises B·H·T² scores and can run out
            del q, k, v
            if device.type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
    return rows


def run(cfg: BenchConfig, device: torch.device) -> dict:
    """Every measurement; returns the results (the CLI prints them)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    model_config = TransformerConfig(cfg.vocab_size, cfg.d_model, cfg.n_heads, None, cfg.n_layers, cfg.n_layers,
                                     cfg.d_ff, cfg.dropout, max_len=cfg.seq_len + 1)
    ours = lambda m, src, tgt: m(src, tgt)  # noqa: E731
    results: dict = {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}, "training": {}}
    results["config"]["attn_lengths"] = list(cfg.attn_lengths)
    modes = [False, True] if cfg.compile else [False]
    for compile in modes:
        label = "compiled" if compile else "eager"
        torch.manual_seed(0)
        results["training"][f"tfm_ref_{label}"] = bench_training(
            Transformer(model_config), ours, cfg, device, compile=compile, desc=f"tfm_ref {label}")
        torch.manual_seed(0)
        results["training"][f"torch_{label}"] = bench_training(
            TorchTransformerLM(cfg, cfg.seq_len + 1), ours, cfg, device, compile=compile, desc=f"nn.Transformer {label}")
    results["attention"] = bench_attention(cfg, device)
    best = "compiled" if cfg.compile else "eager"
    ref, base = results["training"][f"tfm_ref_{best}"], results["training"][f"torch_{best}"]
    results["summary"] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "mode": best, "tokens_per_s": ref["tokens_per_s"], "torch_tokens_per_s": base["tokens_per_s"],
        "ratio_vs_torch": ref["tokens_per_s"] / base["tokens_per_s"], "mfu": ref.get("mfu"),
        "torch_mfu": base.get("mfu"),
    }
    return results


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tfm_ref.bench", description=__doc__.split("\n\n")[0])
    defaults = BenchConfig()
    for name in ("d_model", "n_heads", "n_layers", "d_ff", "vocab_size", "batch_size", "seq_len", "steps", "warmup",
                 "attn_batch"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None, help=f"default {getattr(defaults, name)}")
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--attn-lengths", type=lambda s: tuple(int(x) for x in s.split(",")), default=None,
                   help="comma-separated sequence lengths for the attention comparison")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile measurements")
    p.add_argument("--tiny", action="store_true", help="a tiny configuration that runs in seconds (CI)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--out", help="also write the full results here (JSON)")
    return p


def main(argv: list[str] | None = None) -> dict:
    args = _parser().parse_args(argv)
    options = dict(TINY) if args.tiny else {}
    options.update({k: v for k, v in vars(args).items() if k in BenchConfig.__dataclass_fields__ and v is not None})
    if args.no_compile:
        options["compile"] = False
    cfg = BenchConfig(**options)
    try:
        device = pick_device(args.device)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    results = run(cfg, device)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    for label, row in results["training"].items():
        print(f"{label:>18}: {row['tokens_per_s']:>12,.0f} tokens/s  {row['step_ms']:8.2f} ms/step"
              + (f"  MFU {row['mfu']:.1%}" if row.get("mfu") is not None else ""))
    print(json.dumps(results["summary"]), flush=True)
    return results


if __name__ == "__main__":
    main()
