"""Chapter 8 — greedy decoding, one token at a time, with or without the key/value cache.

With the cache each step feeds only the newest token and attends to the stored keys and
values of all earlier ones: O(T) work per step instead of recomputing the whole prefix.
The results are identical (`tests/test_decoding.py`).

Shapes: B batch · S source positions · T generated positions.
"""
from __future__ import annotations

import torch

from .transformer import DecoderOnlyLM, Transformer

__all__ = ["greedy_decode", "lm_generate"]


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor | None = None,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    use_cache: bool = True,
) -> torch.Tensor:
    """Translate ``src`` (B, S) by always taking the most likely next token.

    Returns:
        (B, ≤ max_len) ids without the leading BOS; a sequence that has ended keeps
        producing ``eos_id``, and decoding stops once every sequence has ended.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    memory = model.encode(src, src_mask)  # (B, S, D)
    out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len):
        step_input = out[:, -1:] if use_cache else out  # only the newest token when cached
        logits = model.decode(step_input, memory, src_mask, cache)  # (B, t, V)
        next_token = logits[:, -1].argmax(dim=-1)  # (B,)
        next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
        out = torch.cat([out, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return out[:, 1:]


@torch.no_grad()
def lm_generate(
    model: DecoderOnlyLM, idx: torch.Tensor, max_new_tokens: int, *, eos_id: int | None = None, use_cache: bool = True
) -> torch.Tensor:
    """Continue the prompts ``idx`` (B, T) greedily; returns (B, T + ≤ max_new_tokens)."""
    cache = model.new_cache() if use_cache else None
    step_input = idx
    finished = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
    for _ in range(max_new_tokens):
        logits = model(step_input, cache)  # (B, t, V)
        next_token = logits[:, -1].argmax(dim=-1)  # (B,)
        if eos_id is not None:
            next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
            finished |= next_token == eos_id
        idx = torch.cat([idx, next_token[:, None]], dim=1)
        step_input = next_token[:, None] if use_cache else idx
        if eos_id is not None and finished.all():
            break
    return idx
