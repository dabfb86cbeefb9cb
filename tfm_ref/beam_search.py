"""Chapter 8 — beam search: keep the K most likely partial translations instead of one.

Greedy decoding commits to the most likely token at every step; a sequence whose first
token is slightly less likely but whose continuation is much more likely is lost. Beam
search keeps K hypotheses (the "beam"): at every step each one is extended by every token,
and the K extensions with the highest total log-probability survive. K = 1 is greedy decoding.

With the key/value cache the surviving hypotheses' cached keys and values must follow their
parents: `KVCache.reorder` gathers them by the parent index each step.

Shapes: B batch · K beam size · S source positions · T generated positions · V vocabulary.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .transformer import Transformer

__all__ = ["beam_search", "sequence_log_prob"]


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor | None = None,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
    use_cache: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The most likely translation of each source that beam search finds.

    Args:
        src: (B, S) ids. src_mask: (B, S) bool, True = real token.
        max_len: most tokens generated (``<eos>`` included).
        beam_size: K, hypotheses kept per source; 1 gives greedy decoding.
        length_penalty: α; the final choice ranks hypotheses by log p / len^α (0: plain log p).
    Returns:
        ids (B, ≤ max_len) without the leading ``<bos>``, ``eos_id`` after a sequence's end
        (as `greedy_decode`), and their log-probabilities (B,).
    Raises:
        ValueError: beam_size or max_len below 1.
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(f"beam_size and max_len must be at least 1, got {beam_size} and {max_len}")
    batch, k = src.shape[0], beam_size
    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)  # (B·K, S, D): K copies per source
    mask = None if src_mask is None else src_mask.repeat_interleave(k, dim=0)  # (B·K, S)
    tokens = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=src.device)  # (B·K, 1)
    # Only the first copy of each source is live at step 0; the others would duplicate it.
    scores = torch.full((batch, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    finished = torch.zeros(batch * k, dtype=torch.bool, device=src.device)
    lengths = torch.zeros(batch * k, dtype=torch.long, device=src.device)
    cache = model.new_cache() if use_cache else None
    for _ in range(max_len):
        step_input = tokens[:, -1:] if use_cache else tokens
        logits = model.decode(step_input, memory, mask, cache)[:, -1]  # (B·K, V)
        log_probs = F.log_softmax(logits.float(), dim=-1)  # (B·K, V)
        # A finished hypothesis can only be followed by <eos>, at no cost: its score stays fixed.
        ended = torch.full_like(log_probs, float("-inf"))
        ended[:, eos_id] = 0.0
        log_probs = torch.where(finished[:, None], ended, log_probs)
        vocab = log_probs.shape[-1]
        candidates = (scores[:, :, None] + log_probs.view(batch, k, vocab)).view(batch, k * vocab)  # (B, K·V)
        scores, best = candidates.topk(k, dim=-1)  # (B, K) each
        parent = best // vocab + torch.arange(batch, device=src.device)[:, None] * k  # (B, K) rows of B·K
        parent, token = parent.flatten(), (best % vocab).flatten()  # (B·K,) each
        tokens = torch.cat([tokens.index_select(0, parent), token[:, None]], dim=1)  # (B·K, t + 1)
        lengths = lengths.index_select(0, parent) + (~finished.index_select(0, parent)).long()
        finished = finished.index_select(0, parent) | (token == eos_id)
        if cache is not None:
            cache.reorder(parent)  # the cached keys/values follow their hypotheses
        if finished.all():
            break
    ranking = scores / lengths.view(batch, k).clamp(min=1).float() ** length_penalty  # (B, K)
    choice = ranking.argmax(dim=-1) + torch.arange(batch, device=src.device) * k  # (B,)
    return tokens.index_select(0, choice)[:, 1:], scores.flatten().index_select(0, choice)


@torch.no_grad()
def sequence_log_prob(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor | None, seq: torch.Tensor, *, bos_id: int, eos_id: int
) -> torch.Tensor:
    """log p(seq | src) under teacher forcing, counting tokens up to and including the first ``<eos>``.

    Args:
        seq: (B, T) generated ids without ``<bos>`` (what `beam_search` and `greedy_decode` return).
    Returns:
        (B,) log-probabilities.
    """
    bos = torch.full_like(seq[:, :1], bos_id)
    logits = model(src, torch.cat([bos, seq[:, :-1]], dim=1), src_mask)  # (B, T, V)
    token_log_probs = F.log_softmax(logits.float(), dim=-1).gather(-1, seq[..., None])[..., 0]  # (B, T)
    is_eos = (seq == eos_id).long()
    after_end = (is_eos.cumsum(dim=1) - is_eos) > 0  # positions after the first <eos>
    return token_log_probs.masked_fill(after_end, 0.0).sum(dim=1)
