"""Chapter 9 exercises — the online softmax, tiled (FlashAttention-style) attention, and one
decoding step with a KV cache.

    m' = max(m, max x_blk),   ℓ' = ℓ · e^(m − m') + Σ e^(x_blk − m'),   softmax(x) = e^(x − m) / ℓ
    o' = o · e^(m − m') + e^(S_blk − m') V_blk,                          attention = o / ℓ
    decoding: K ← [K_cache; k], V ← [V_cache; v], causal mask aligned to the end

Each exercise is checked against `tfm_ref` (whose tiled and cached versions
`tests/test_tiling.py` and `tests/test_kv_cache.py` prove equal to PyTorch's one-shot softmax
and attention); each `Mistake` is a broken version a student plausibly writes, with the hint
the failure gives. `tests/test_exercises.py` proves every check passes the reference and
fails every mistake with its hint.

Shapes: B batch · H query heads · G key/value heads · T query (new) positions · S key
(cached) positions · Dk query/key width · Dv value width · Dh head width · N softmax length.
Sizes of a case that are not shapes: K block size · QT, KT query and key tile sizes.
"""
from __future__ import annotations

import dataclasses
import math

import torch

import tfm_ref

from ..spec import Call, Case, Exercise, Mistake, randn, random_dims
from .ch01_attention import ATTENTION_LIBRARY, ATTENTION_MISTAKES, MASK_MISTAKES, SOFTMAX_LIBRARY
from .ch02_multihead import KV_REPEATED_BY_G_HINT
from .shared import random_qkv, repeat_tiled

__all__ = ["ONLINE_SOFTMAX", "TILED_ATTENTION", "CACHED_ATTENTION", "EXERCISES"]

# Library code that would find the softmax's normaliser or do the attention for the student.
EFFICIENT_LIBRARY = (
    *SOFTMAX_LIBRARY, *ATTENTION_LIBRARY,
    torch._scaled_dot_product_attention_math, torch._scaled_dot_product_flash_attention,
    torch._scaled_dot_product_flash_attention_for_cpu, torch._scaled_dot_product_efficient_attention,
)
NEG_INF = -math.inf


def _starts(length: int, block: int, drop_partial: bool) -> range:
    """Where the blocks begin; ``drop_partial`` is the mistake of skipping a shorter last block."""
    return range(0, length - block + 1 if drop_partial else length, block)


def _finite_or_zero(m: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def _safe_divide(x: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    return x / torch.where(total == 0, torch.ones_like(total), total)


def _fold(m, total, block, *, rescale_total: bool = True, inverted: bool = False, subtract_max: bool = True,
          running_max: bool = True, safe: bool = True, max_of: torch.Tensor | None = None):
    """One step of the online softmax, right unless a keyword says otherwise: the new running max,
    the shift used, the new running sum, the block's exponentials and the rescaling factor.
    ``max_of``: the scores the block's maximum is taken from, if not ``block`` (before the mask, say)."""
    block_max = (block if max_of is None else max_of).amax(dim=-1, keepdim=True)
    m_new = (torch.maximum(m, block_max) if running_max else block_max) if subtract_max else torch.zeros_like(m)
    shift = _finite_or_zero(m_new) if safe else m_new
    p = torch.exp(block - shift)
    factor = torch.exp((shift - m) if inverted else (m - shift))
    total = (total * factor if rescale_total else total) + p.sum(dim=-1, keepdim=True)
    return m_new, shift, total, p, factor


# --------------------------------------------------------------------------- 1. online softmax

def _softmax_inputs(dim: int = -1, minus_inf: bool = False):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        x = randn(gen, dims["B"], dims["T"], dims["N"], dtype=dtype) * 3
        if minus_inf:  # masked scores: row 0 entirely, and row 1's first block (finite values after it)
            x = x.masked_fill(torch.rand(x.shape, generator=gen) < 0.4, NEG_INF)
            x[0, 0] = NEG_INF
            if x.shape[1] > 1:
                x[0, 1, :dims["K"]] = NEG_INF
                x[0, 1, dims["K"]:] = x[0, 1, dims["K"]:].nan_to_num(neginf=0.0)
        return Call(x, dims["K"], dim=dim)
    return inputs


def _very_negative(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x, block_size = _softmax_inputs()(gen, dims, dtype).args
    return Call(x - 1000.0, block_size, dim=-1)  # every logit far below 0


def _online_variant(*, per_block: bool = False, drop_partial: bool = False, last_axis: bool = False,
                    m_start: float = NEG_INF, **fold):
    """The online softmax with one thing done wrong (the keywords, and those of `_fold`, say which)."""
    def online_softmax(x, block_size, dim=-1):
        row = x.movedim(-1 if last_axis else dim, -1)  # (…, N)
        m = torch.full((*row.shape[:-1], 1), m_start, dtype=x.dtype)  # (…, 1)
        total = torch.zeros_like(m)
        shift, pieces = torch.zeros_like(m), []
        for start in _starts(row.shape[-1], block_size, drop_partial):
            m, shift, total, p, _ = _fold(m, total, row[..., start:start + block_size], **fold)
            pieces.append(_safe_divide(p, total))  # the per-block mistake: written out with the statistics so far
        if per_block:
            out = torch.cat(pieces, dim=-1)
        elif fold.get("safe", True):
            out = _safe_divide(torch.exp(row - shift), total)
        else:
            out = torch.exp(row - shift) / total
        return out.movedim(-1, -1 if last_axis else dim)
    return online_softmax


def _online_exps_against_first_maximum(x, block_size, dim=-1):
    """The right sum ℓ (relative to the final maximum M), but the output's exps taken against the first block's
    maximum m₀: exp(x − m₀) / ℓ = softmax(x) · exp(M − m₀)."""
    row = x.movedim(dim, -1)  # (…, N)
    first = _finite_or_zero(row[..., :block_size].amax(dim=-1, keepdim=True))  # (…, 1)
    final = _finite_or_zero(row.amax(dim=-1, keepdim=True))  # (…, 1)
    return (tfm_ref.online_softmax(row, block_size) * torch.exp(final - first)).movedim(-1, dim)


ONLINE_SOFTMAX = Exercise(
    name="online_softmax",
    reference=tfm_ref.online_softmax,
    inputs=_softmax_inputs(),
    arg_names=("x", "block_size"),
    shapes=[dict(B=1, T=1, N=3, K=2), dict(B=1, T=2, N=5, K=2), dict(B=2, T=2, N=7, K=3), dict(B=2, T=3, N=10, K=4)],
    # The notebook's text warns of another dim and of −inf rows: the visible check tries both (before them the huge
    # logits, where exp without the maximum fails both and the overflow names it).
    visible=[Case("random logits, blocks of 4 along the last axis (N = 10: blocks of 4, 4, 2)"),
             Case("blocks along dim=0", inputs=_softmax_inputs(dim=0), dims=dict(B=7, T=2, N=3, K=3)),
             Case("huge logits", inputs=lambda gen, dims, dtype: _softmax_inputs()(gen, dims, dtype).scaled(1e3)),
             Case("−inf entries, an all −inf row, and a row whose first block is all −inf",
                  inputs=_softmax_inputs(minus_inf=True), dims=dict(B=2, T=3, N=9, K=2)),
             # m starts at −inf, below every logit: started at 0, logits far below 0 underflow
             Case("very negative logits (all near −1000)", inputs=_very_negative)],
    hidden=[
        Case("random sizes and block sizes", dims=random_dims(B=(1, 3), T=(1, 4), N=(1, 20), K=(1, 8))),
        Case("block size 1", dims=dict(B=2, T=3, N=7, K=1)),
        Case("one block (block size ≥ length)", dims=dict(B=2, T=3, N=6, K=9)),
        Case("length-1 rows", dims=dict(B=2, T=3, N=1, K=2)),
        Case("very negative logits (all near −1000)", inputs=_very_negative),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("running sum not rescaled when the maximum changes", _online_variant(rescale_total=False),
                "every term already in the running sum ℓ is exp(x − m_old); when a block raises the maximum to "
                "m_new, those terms must be re-expressed relative to m_new.",
                "ℓ = ℓ · exp(m_old − m_new) + Σ exp(x_blk − m_new)."),
        Mistake("output's exps taken against the first block's maximum", _online_exps_against_first_maximum,
                "ℓ, the sum, is relative to the final maximum m, so the output must be too: exp(x − m) / ℓ with "
                "the m of the end of the pass. Yours takes the exps against the maximum of the first block, "
                "which a later block may have raised: the row no longer sums to 1.",
                "after the loop, out = exp(x − m) / ℓ with the final m (0 where m is still −inf)."),
        Mistake("blocks normalised with the statistics so far", _online_variant(per_block=True),
                "a block's outputs cannot be written while the pass is running: later blocks change both the "
                "maximum and the sum.",
                "finish the pass first, then return exp(x − m) / ℓ with the final m and ℓ."),
        Mistake("last, shorter block skipped", _online_variant(drop_partial=True),
                "when block_size does not divide the length the last block is shorter, and it still counts.",
                "loop over range(0, N, block_size) and slice [start:start + block_size]."),
        Mistake("blocks taken along the last axis (dim ignored)", _online_variant(last_axis=True),
                "the softmax runs along `dim`; yours always runs along the last axis.",
                "x.movedim(dim, -1) puts that axis last, and .movedim(-1, dim) puts it back."),
        # Before the next: on logits all below 0 the two are alike, and only this one survives huge logits.
        Mistake("running maximum started at 0", _online_variant(m_start=0.0),
                "the running maximum starts at −inf, below every logit; started at 0, it never falls below 0, so "
                "a row of logits far below 0 is shifted by 0 instead of its maximum: its exps underflow to 0.",
                "m = torch.full(..., float('-inf')) (and subtract 0 where m is still −inf)."),
        Mistake("exp without subtracting the running maximum", _online_variant(subtract_max=False),
                "exp(x) overflows to inf for large logits (exp(1000) = inf, and inf/inf = NaN).",
                "take every exponent relative to the running maximum m, so that it is ≤ 0: exp(x_blk − m_new)."),
        Mistake("the block's maximum instead of the running maximum", _online_variant(running_max=False),
                "the running maximum never goes down; with the block's own maximum, a later block of smaller (or "
                "all −inf) values makes exp(m_old − m_new) > 1, the sum is taken relative to the wrong maximum, "
                "and it overflows for large logits.",
                "m_new = torch.maximum(m_old, block.amax(dim=-1, keepdim=True))."),
        Mistake("NaN for −inf entries (masked scores)", _online_variant(safe=False),
                "while a row has seen only −inf, its maximum is −inf and exp(−inf − (−inf)) is NaN; an all −inf "
                "row must give zeros.",
                "subtract torch.where(torch.isfinite(m), m, torch.zeros_like(m)) instead of m, and divide by 1 "
                "where ℓ is 0."),
        # Last: its output is NaN throughout, which other mistakes also give on some inputs.
        Mistake("running sum rescaled by exp(m_new − m_old)", _online_variant(inverted=True),
                "the old terms were relative to a smaller maximum and must shrink, so the factor is ≤ 1; yours "
                "grows. (With m starting at −inf, exp(m_new − m_old) is inf and 0 · inf is NaN.)",
                "the factor is exp(m_old − m_new)."),
    ],
    forbidden=EFFICIENT_LIBRARY,
    withheld=(tfm_ref.softmax,),  # the same values, in one pass or two
)


# --------------------------------------------------------------------------- 2. tiled attention

def _random_mask(gen: torch.Generator, dims, empty_rows: bool = False) -> torch.Tensor:
    """(B, 1, T, S), True = may attend; every row sees one key at least (at a random place)
    unless ``empty_rows``, which blinds query 0 entirely."""
    mask = torch.rand(dims["B"], 1, dims["T"], dims["S"], generator=gen) < 0.5
    seen = torch.randint(0, dims["S"], (dims["B"], 1, dims["T"], 1), generator=gen)
    mask.scatter_(-1, seen, True)
    if empty_rows:
        mask[:, :, 0, :] = False
    return mask


def _first_key_tile_blind(gen: torch.Generator, dims) -> torch.Tensor:
    """A random mask (B, 1, T, S) where query 0 of the first sequence sees no key of the first key tile (keys
    0 … KT − 1) and one key after it: a row whose running maximum is still −inf after a tile, on every draw."""
    mask = _random_mask(gen, dims)
    if dims["S"] > dims["KT"]:
        mask[0, :, 0, :dims["KT"]] = False
        seen = dims["KT"] + int(torch.randint(0, dims["S"] - dims["KT"], (1,), generator=gen))
        mask[0, :, 0, seen] = True
    return mask


def _tiled_inputs(mask: str = "random"):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        q, k, v = random_qkv(gen, dims, dtype)  # (B, H, T, Dk), (B, H, S, Dk), (B, H, S, Dv)
        made = {
            "none": lambda: None,
            "random": lambda: _random_mask(gen, dims),
            "first key tile blind": lambda: _first_key_tile_blind(gen, dims),
            "empty rows": lambda: _random_mask(gen, dims, empty_rows=True),
            "causal": lambda: tfm_ref.causal_mask(dims["T"], dims["S"]),  # (T, S), aligned to the end
            "padding": lambda: tfm_ref.key_mask(
                tfm_ref.padding_mask(torch.randint(1, dims["S"] + 1, (dims["B"],), generator=gen), dims["S"])),
            "padded top key": lambda: tfm_ref.key_mask(
                tfm_ref.padding_mask(torch.randint(1, max(dims["S"], 2), (dims["B"],), generator=gen), dims["S"])),
        }[mask]()
        if mask == "padded top key":  # the last key, always padding, scores far above the rest for query 0
            k[..., -1, :] = 1000 * q[..., 0, :]
        return Call(q, k, v, made, q_tile=dims["QT"], k_tile=dims["KT"])
    return inputs


def _tiled_variant(*, rescale_out: bool = True, divide_inside: bool | str = False, drop_partial: bool = False,
                   short_key_tiles: bool = False, use_mask: bool = True, fill: float = NEG_INF, scaled: bool = True,
                   max_before_mask: bool = False, expand_mask: bool = True, inverted_mask: bool = False,
                   scaled_by_dv: bool = False, m_start: float = NEG_INF, final_guard: bool = True, **fold):
    """Tiled attention with one thing done wrong (the keywords, and those of `_fold`, say which;
    ``final_guard=False``: the accumulator divided by ℓ at the end even where ℓ = 0)."""
    def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
        n_queries, n_keys = q.shape[-2], k.shape[-2]
        if mask is not None and expand_mask:
            mask = mask.expand(torch.broadcast_shapes(mask.shape, (*q.shape[:-1], n_keys)))  # (…, T, S)
        if mask is not None and inverted_mask:
            mask = ~mask
        scale = 1 / math.sqrt(v.shape[-1] if scaled_by_dv else q.shape[-1]) if scaled else 1.0
        width = k_tile - 1 if short_key_tiles else k_tile
        rows = []
        for i in _starts(n_queries, q_tile, drop_partial):
            q_blk = q[..., i:i + q_tile, :]  # (…, Tq, Dk)
            m = torch.full((*q_blk.shape[:-1], 1), m_start, dtype=q.dtype)  # (…, Tq, 1)
            total, out = torch.zeros_like(m), torch.zeros(*q_blk.shape[:-1], v.shape[-1], dtype=q.dtype)
            for j in _starts(n_keys, k_tile, drop_partial):
                scores = raw = q_blk @ k[..., j:j + width, :].transpose(-2, -1) * scale  # (…, Tq, Sk)
                if mask is not None and use_mask:
                    scores = scores.masked_fill(~mask[..., i:i + q_tile, j:j + width], fill)
                m, _, total, p, factor = _fold(m, total, scores, max_of=raw if max_before_mask else None, **fold)
                contribution = p @ v[..., j:j + width, :]  # (…, Tq, Dv)
                if divide_inside == "unguarded":  # 0 / 0 while a row has seen only masked keys
                    contribution = contribution / total
                elif divide_inside:  # normalised at every tile, by the sum so far
                    contribution = _safe_divide(contribution, total)
                out = (out * factor if rescale_out else out) + contribution
            rows.append(out if divide_inside else _safe_divide(out, total) if final_guard else out / total)
        return torch.cat(rows, dim=-2)  # (…, T, Dv)
    return tiled_attention


def _tiled_each_key_tile_alone(q, k, v, mask=None, *, q_tile=64, k_tile=64):
    """Every key tile's own softmax(q kᵀ / √Dk) v, summed over the tiles: no statistic carried between them."""
    n_keys = k.shape[-2]
    if mask is not None:
        mask = mask.expand(torch.broadcast_shapes(mask.shape, (*q.shape[:-1], n_keys)))  # (…, T, S)
    return sum(tfm_ref.scaled_dot_product_attention(q, k[..., j:j + k_tile, :], v[..., j:j + k_tile, :],
                                                    None if mask is None else mask[..., j:j + k_tile])
               for j in range(0, n_keys, k_tile))


# made again tile by tile, with chapter 1's words
_CHAPTER1_MISTAKES = {m.name: m for m in (*ATTENTION_MISTAKES, *MASK_MISTAKES)}

def _scores_far_below_zero(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    """Every score below −1000: queries all positive, keys all negative, each at least 30 from 0."""
    call = _tiled_inputs()(gen, dims, dtype)
    q, k, v, mask = call.args
    return Call(q.abs() + 30, -(k.abs() + 30), v, mask, **call.kwargs)


_TILED_SHAPES = [
    dict(B=1, H=1, T=1, S=3, Dk=1, Dv=1, QT=1, KT=2), dict(B=1, H=1, T=2, S=3, Dk=2, Dv=1, QT=1, KT=2),
    dict(B=1, H=1, T=3, S=5, Dk=2, Dv=2, QT=2, KT=2), dict(B=2, H=2, T=5, S=7, Dk=4, Dv=3, QT=2, KT=3),
]


def _tiled_sizes(gen: torch.Generator) -> dict[str, int]:
    dims = random_dims(B=(1, 3), H=(1, 3), T=(1, 9), S=(1, 11), Dk=(1, 8), Dv=(1, 5))(gen)
    tiles = random_dims(QT=(1, dims["T"] + 2), KT=(1, dims["S"] + 2))(gen)  # 1 … longer than the sequence
    return {**dims, **tiles}


TILED_ATTENTION = Exercise(
    name="tiled_attention",
    reference=tfm_ref.tiled_attention,
    inputs=_tiled_inputs(),
    arg_names=("q", "k", "v", "mask"),
    shapes=_TILED_SHAPES,
    # the notebook's text warns of rows with no visible key: one whose first tile is masked, and one fully masked
    # (before it the huge logits, where exp without the maximum overflows and is named so, not as the masked rows)
    visible=[Case("random mask, query 0's first key tile all masked; T = 5 in query tiles of 2, S = 7 in key tiles "
                  "of 3", inputs=_tiled_inputs("first key tile blind")),
             Case("huge logits", dtype=torch.float64,
                  inputs=lambda gen, dims, dtype: _tiled_inputs()(gen, dims, dtype).scaled(30.0)),
             Case("fully masked rows", inputs=_tiled_inputs("empty rows")),
             Case("scores all far below 0", dtype=torch.float64, inputs=_scores_far_below_zero),
             # the notebook names a (B, 1, 1, S) mask: one sliced without being expanded fails here, not when graded
             Case("key padding mask (B, 1, 1, S)", inputs=_tiled_inputs("padding"))],
    hidden=[
        Case("random sizes and tile sizes", dims=_tiled_sizes),
        Case("tiles of 1", dims=dict(B=2, H=2, T=4, S=6, Dk=4, Dv=3, QT=1, KT=1)),
        Case("tiles longer than the sequence", dims=dict(B=2, H=2, T=4, S=6, Dk=4, Dv=3, QT=8, KT=9)),
        # Before the masks: exp without the maximum fails fully masked rows too, and the overflow names it.
        # In float64, where exp still overflows without the maximum (scores in the thousands), while float32's
        # rounding of such scores would part two right answers by more than the tolerance.
        Case("huge logits", dtype=torch.float64,
             inputs=lambda gen, dims, dtype: _tiled_inputs()(gen, dims, dtype).scaled(30.0)),
        Case("scores all far below 0", dtype=torch.float64, inputs=_scores_far_below_zero),
        Case("causal mask, T < S (aligned to the end)", inputs=_tiled_inputs("causal"),
             dims=dict(B=2, H=2, T=5, S=8, Dk=4, Dv=3, QT=2, KT=3)),
        Case("key padding mask (B, 1, 1, S)", inputs=_tiled_inputs("padding")),
        Case("a padded key that would score far above the visible ones", inputs=_tiled_inputs("padded top key")),
        Case("fully masked rows", inputs=_tiled_inputs("empty rows")),
        Case("mask=None", inputs=_tiled_inputs("none")),
        Case("length 1 (T = S = 1)", dims=dict(B=2, H=2, T=1, S=1, Dk=4, Dv=3, QT=2, KT=3)),
        Case("float64", dtype=torch.float64),
        Case("gradients (q, k, v)", grad=True),
    ],
    mistakes=[
        Mistake("running sum not rescaled when the maximum changes", _tiled_variant(rescale_total=False),
                "ℓ holds exp(s − m_old) terms; when a key tile raises a row's maximum they must be re-expressed "
                "relative to the new maximum, exactly as the output accumulator is.",
                "ℓ = ℓ · exp(m_old − m_new) + the tile's Σ exp(s − m_new)."),
        Mistake("output accumulator not rescaled when the maximum changes", _tiled_variant(rescale_out=False),
                "the un-normalised output o = Σ exp(s − m) v was built relative to the old maximum; when the "
                "maximum grows it must shrink by the same factor as ℓ.",
                "o = o · exp(m_old − m_new) + exp(s − m_new) @ v_tile."),
        Mistake("each key tile normalised on its own, and the tiles' outputs summed", _tiled_each_key_tile_alone,
                "a query's weights are one softmax over all S keys: a key tile's exps are divided by the sum over "
                "every tile, not by its own. With each tile's softmax the weights of a row sum to the number of "
                "tiles.",
                "carry m, ℓ and the un-normalised output o across the key tiles (o = o · exp(m − m′) + "
                "exp(S_blk − m′) V_blk) and divide by ℓ once, after the last tile."),
        Mistake("divided by the running sum at every tile", _tiled_variant(divide_inside=True),
                "the sum so far is not the final normaliser: later key tiles still add to it.",
                "keep o un-normalised while the key tiles stream past, and divide by ℓ once, after the last one."),
        Mistake("divided by the running sum at every tile, with no guard for ℓ = 0", _tiled_variant(
                    divide_inside="unguarded"),
                "the sum so far is not the final normaliser: later key tiles still add to it. And while every key "
                "a row has seen is masked, ℓ is 0, so dividing by it gives 0 / 0 = NaN, which stays in the row "
                "when its visible keys come.",
                "keep o un-normalised while the key tiles stream past, and divide by ℓ once, after the last one, "
                "by 1 where ℓ is 0: o / torch.where(l == 0, torch.ones_like(l), l)."),
        Mistake("last, shorter tiles skipped", _tiled_variant(drop_partial=True),
                "when the tile size does not divide T or S the last tile is shorter, and it still counts.",
                "loop over range(0, n, tile) and slice [start:start + tile] (slicing past the end is fine)."),
        Mistake("key tiles one short (off by one at the tile edges)", _tiled_variant(short_key_tiles=True),
                "a tile starting at j holds keys j … j + k_tile − 1; yours stops one key early, so a key between "
                "tiles is never seen.",
                "slice k[..., j:j + k_tile, :] (the end is exclusive), and the same for v and the mask."),
        Mistake("running maximum updated before the rescaling factor", _tiled_variant(rescale_total=False,
                                                                                      rescale_out=False),
                "neither ℓ nor the output accumulator was rescaled when a tile raised the maximum: the factor "
                "exp(m_old − m_new) needs the old maximum, and with m updated first it is exp(0) = 1.",
                "factor = torch.exp(m - m_new) first, then ℓ = ℓ · factor + …, o = o · factor + …, and only then "
                "m = m_new."),
        Mistake("running maximum taken before the mask", _tiled_variant(max_before_mask=True),
                "the maximum must come from the scores a row may see: taken before masking, a masked key with a "
                "large score sets it, and the visible keys' exp(s − m) underflow to 0.",
                "fill the masked scores with -inf first, then take the tile's maximum."),
        Mistake("a broadcast mask sliced without expanding it", _tiled_variant(expand_mask=False),
                "a mask that broadcasts, such as a (B, 1, 1, S) padding mask, has one row for every query: sliced "
                "by query tiles, mask[..., i:i + q_tile, :], it is empty past the first tile.",
                "mask = mask.expand(*q.shape[:-1], k.shape[-2]) before the loops, then slice it."),
        *(dataclasses.replace(_CHAPTER1_MISTAKES[name], impl=impl) for name, impl in (
            ("mask polarity inverted", _tiled_variant(inverted_mask=True)),
            ("masked scores set to 0 instead of -inf", _tiled_variant(fill=0.0)),
            ("wrong scaling: √d_v", _tiled_variant(scaled_by_dv=True)))),
        Mistake("running maximum started at 0", _tiled_variant(m_start=0.0),
                "the running maximum starts at −inf, below every score; started at 0, it never falls below 0, so "
                "a row whose scores are all far below 0 is shifted by 0 instead of its maximum: its exps "
                "underflow to 0.",
                "m = torch.full(..., float('-inf')) (and subtract 0 where m is still −inf)."),
        Mistake("mask ignored", _tiled_variant(use_mask=False),
                "the mask is not applied to the tiles' scores, so masked keys still get weight.",
                "fill the masked scores of every tile with -inf: mask[..., i:i + q_tile, j:j + k_tile], after "
                "mask.expand(…, T, S) so that broadcast dimensions can be sliced."),
        Mistake("exp without subtracting the running maximum", _tiled_variant(subtract_max=False),
                "exp(s) overflows to inf for large scores.",
                "take every exponent relative to the row's running maximum m (and rescale what was accumulated "
                "when m grows)."),
        Mistake("NaN for a row with no visible key yet", _tiled_variant(safe=False),
                "while every key a row has seen is masked, its maximum is −inf and exp(−inf − (−inf)) is NaN; a "
                "fully masked query must get a zero output.",
                "subtract 0 instead of a non-finite maximum, and divide by 1 where ℓ is 0."),
        Mistake("no guard for ℓ = 0 in the final division (fully masked rows)", _tiled_variant(final_guard=False),
                "a query whose keys are all masked never adds to ℓ, so after the last tile ℓ = 0 and o / ℓ is "
                "0 / 0 = NaN; a fully masked query must get a zero output.",
                "divide by 1 where ℓ is 0: o / torch.where(l == 0, torch.ones_like(l), l)."),
        Mistake("masked scores set to a large negative number", _tiled_variant(fill=-1e9),
                "with -1e9 a query whose keys are all masked averages every value instead of giving zeros.",
                "fill with -inf, and treat a row with no finite score as exp(·) = 0."),
        Mistake("missing scaling", _tiled_variant(scaled=False),
                "the scores of every tile must be divided by √d_k; yours are not.",
                "scores = q_tile @ k_tile.transpose(-2, -1) / math.sqrt(q.shape[-1])."),
        # Last: its output is NaN throughout, which other mistakes also give on some inputs.
        Mistake("rescaled by exp(m_new − m_old)", _tiled_variant(inverted=True),
                "what was accumulated relative to a smaller maximum must shrink, so the factor is ≤ 1; yours "
                "grows. (With m starting at −inf, exp(m_new − m_old) is inf and 0 · inf is NaN.)",
                "the factor is exp(m_old − m_new)."),
    ],
    forbidden=EFFICIENT_LIBRARY,
    withheld=(tfm_ref.scaled_dot_product_attention,),  # the same values, untiled
)


# --------------------------------------------------------------------------- 3. one decoding step with a KV cache

def _cache_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    q = randn(gen, dims["B"], dims["H"], dims["T"], dims["Dh"], dtype=dtype)
    new = [randn(gen, dims["B"], dims["G"], dims["T"], dims["Dh"], dtype=dtype) for _ in range(2)]  # k, v
    cached = [randn(gen, dims["B"], dims["G"], dims["S"], dims["Dh"], dtype=dtype) for _ in range(2)]
    return Call(q, *new, *cached)


def _cache_sizes(gen: torch.Generator) -> dict[str, int]:
    g = int(torch.randint(1, 4, (1,), generator=gen))
    dims = random_dims(B=(1, 3), T=(1, 4), S=(0, 8), Dh=(1, 8), R=(1, 3))(gen)
    return {**dims, "G": g, "H": g * dims.pop("R")}


def _cache_variant(*, prepend: bool = False, causal: str = "end", update: bool = True, use_cache: bool = True,
                   store_repeated: bool = False, new_repeated: bool = False, grow_dim: int = -2,
                   tile_heads: bool = False, detached: bool = False, repeat_by_g: bool = False, repeated: bool = True):
    """One decoding step with one thing done wrong. ``causal``: "end" right, "start" (the triangle
    of a square mask), "none", "strict" (a position does not see itself), "ahead" (it sees the next), "new
    first" (the triangle on the first T keys, the cached ones after it) or "square" (a (T, T) mask, which
    ``mask.expand(*q.shape[:-1], S + T)`` refuses, as the exercise's tiled_attention does, unless T = 1);
    ``repeat_by_g``: the G key/value heads repeated G times instead of H / G; ``repeated=False``: not repeated
    at all; ``new_repeated``: the new k and v repeated to H heads before they join the G-head cache;
    ``grow_dim``: the axis torch.cat joins the cache and the new positions along."""
    def cached_attention(q, k, v, k_cache, v_cache):
        n_rep = k.shape[1] if repeat_by_g else q.shape[1] // k.shape[1]
        repeat = repeat_tiled if tile_heads else tfm_ref.repeat_kv if repeated else (lambda x, n_rep: x)
        if store_repeated or new_repeated:
            k, v = repeat(k, n_rep), repeat(v, n_rep)  # (B, H, T, Dh)
        if store_repeated:
            k_cache, v_cache = repeat(k_cache, n_rep), repeat(v_cache, n_rep)  # (B, H, S, Dh)
        if store_repeated or new_repeated:
            n_rep = 1
        parts = (k, k_cache, v, v_cache) if prepend else (k_cache, k, v_cache, v)
        keys, values = torch.cat(parts[:2], dim=grow_dim), torch.cat(parts[2:], dim=grow_dim)  # (B, G, S + T, Dh)
        seen_k, seen_v = (keys, values) if use_cache else (k, v)
        n_new, n_all = q.shape[-2], seen_k.shape[-2]
        if causal == "new first":  # the triangle over the first T keys, as if the new positions came first
            mask = torch.cat([torch.ones(n_new, n_new, dtype=torch.bool).tril(),
                              torch.ones(n_new, n_all - n_new, dtype=torch.bool)], dim=-1)  # (T, S + T)
        else:
            offset = {"end": n_all - n_new, "start": 0, "strict": n_all - n_new - 1, "ahead": n_all - n_new + 1,
                      "none": n_all, "square": 0}[causal]
            mask = torch.ones(n_new, n_all, dtype=torch.bool).tril(diagonal=offset)  # (T, S + T)
        if causal == "square":  # (T, T), expanded as a tiled_attention expands its mask: an error unless T = 1
            mask = torch.ones(n_new, n_new, dtype=torch.bool).tril().expand(*q.shape[:-1], n_all)
        out = tfm_ref.scaled_dot_product_attention(q, repeat(seen_k, n_rep), repeat(seen_v, n_rep), mask)
        if detached:
            keys, values = keys.detach(), values.detach()
        return (out, keys, values) if update else (out, k_cache, v_cache)
    return cached_attention


CACHED_ATTENTION = Exercise(
    output_names=("output", "returned k_cache", "returned v_cache"),
    name="cached_attention",
    reference=tfm_ref.cached_attention,
    inputs=_cache_inputs,
    arg_names=("q", "k", "v", "k_cache", "v_cache"),
    # the visible cases have H / G ≠ G: with H = G² (4 and 2), K/V repeated G times passes
    shapes=[dict(B=1, H=1, G=1, T=1, S=1, Dh=2), dict(B=1, H=2, G=1, T=2, S=1, Dh=2),
            dict(B=1, H=4, G=2, T=1, S=2, Dh=2), dict(B=1, H=4, G=2, T=2, S=3, Dh=2),
            dict(B=2, H=6, G=2, T=1, S=5, Dh=8)],
    visible=[Case("one new token after 5 cached positions (GQA: H = 6, G = 2)"),
             Case("a chunk of 3 new positions after 4 cached ones", dims=dict(B=2, H=6, G=2, T=3, S=4, Dh=8)),
             # the notebook's text: S = 0 at the first step
             Case("the first step: an empty cache (S = 0, a prompt of 4)", dims=dict(B=2, H=4, G=2, T=4, S=0, Dh=8))],
    hidden=[
        Case("random sizes, S = 0 … 8 cached positions", dims=_cache_sizes),
        Case("the first step: an empty cache (S = 0, a prompt of 4)", dims=dict(B=2, H=4, G=2, T=4, S=0, Dh=8)),
        Case("one position in all (S = 0, T = 1)", dims=dict(B=2, H=2, G=1, T=1, S=0, Dh=4)),
        Case("MQA (G = 1)", dims=dict(B=2, H=4, G=1, T=2, S=5, Dh=8)),
        Case("MHA (G = H)", dims=dict(B=2, H=3, G=3, T=2, S=5, Dh=8)),
        Case("float64", dtype=torch.float64),
        # in float64, as in tiled_attention: float32 parted the reference and a right answer in 2 seeds of 600
        Case("huge logits", dtype=torch.float64,
             inputs=lambda gen, dims, dtype: _cache_inputs(gen, dims, dtype).scaled(30.0)),
        Case("gradients (q, k, v and the cache)", dims=dict(B=2, H=4, G=2, T=3, S=4, Dh=8), grad=True),
    ],
    mistakes=[
        Mistake("new keys and values put in front of the cache", _cache_variant(prepend=True),
                "the cache holds positions 0 … S − 1 in order and the new ones come after them; yours puts them "
                "first.",
                "torch.cat([k_cache, k], dim=-2), not [k, k_cache]."),
        Mistake("causal mask aligned to the start", _cache_variant(causal="start"),
                "the T new queries are the *last* T of the S + T positions, so query i may see keys 0 … S + i; a "
                "(T, S + T) mask built as ones(...).tril() lets query 0 see key 0 only.",
                "tril(diagonal=S), the end-aligned causal mask of chapter 3."),
        Mistake("square (T, T) causal mask instead of (T, S + T)", _cache_variant(causal="square"),
                "the T new queries attend over all S + T positions, so the mask has a column for every key, the "
                "cached ones too: (T, S + T). A square (T, T) mask (ones(T, T).tril(), or causal_mask(T)) has "
                "columns for the new keys only and cannot be expanded to the scores' (…, T, S + T) (with one new "
                "position, (1, 1), it broadcasts and happens to be right).",
                "torch.ones(T, S + T, dtype=torch.bool).tril(diagonal=S), chapter 3's causal_mask(T, S + T)."),
        Mistake("no causal mask among the new positions", _cache_variant(causal="none"),
                "with more than one new position, new query i must not see the new positions after it.",
                "mask with the (T, S + T) causal mask aligned to the end, tril(diagonal=S)."),
        Mistake("a new position does not attend to itself", _cache_variant(causal="strict"),
                "query i sees keys 0 … S + i, its own key included; the first token of a sequence sees only "
                "itself.",
                "tril(diagonal=S), not diagonal=S − 1."),
        Mistake("a new position sees the next one", _cache_variant(causal="ahead"),
                "query i sees keys 0 … S + i and no further; yours also sees key S + i + 1, the position after it.",
                "tril(diagonal=S), not diagonal=S + 1."),
        Mistake("earlier positions ignored (only the new keys attended)", _cache_variant(use_cache=False),
                "the new queries attend over the whole sequence so far, not over the new positions alone.",
                "attend over the cache after appending: (B, G, S + T, Dh), the cached keys and values followed by "
                "the new ones."),
        Mistake("cache returned without the new positions", _cache_variant(update=False),
                "the next step needs this step's keys and values; the cache you return lacks them.",
                "return the cache after appending, (B, G, S + T, Dh)."),
        Mistake("returned cache detached", _cache_variant(detached=True),
                "the returned cache is what the next step attends over, so the gradient reaches k and v through "
                "it as well; .detach() cuts that path (the values are right, the gradients are not).",
                "return torch.cat([k_cache, k], dim=-2) as it is, without .detach()."),
        Mistake("cache stores the repeated heads", _cache_variant(store_repeated=True),
                "storing H heads throws away GQA's memory saving (the cache would be H/G times larger).",
                "keep G key/value heads in the cache, and repeat them to H only for attending."),
        Mistake("new keys and values repeated to H heads before joining the cache", _cache_variant(new_repeated=True),
                "the cache holds G key/value heads, (B, G, S, Dh); the new k and v, repeated to the H query heads "
                "first, (B, H, T, Dh), no longer match it on the head axis, and torch.cat refuses to join them. "
                "Stored repeated, the cache would also lose GQA's memory saving (H/G times larger).",
                "join first, keys = torch.cat([k_cache, k], dim=-2) (the new cache, G heads), and repeat only what "
                "you attend over: repeat_kv(keys, H // G)."),
        Mistake("cache grown along the heads (torch.cat on dim=1)", _cache_variant(grow_dim=1),
                "k_cache is (B, G, S, Dh): axis 1 holds the key/value heads and axis 2 (-2) the positions. The new "
                "positions extend the cache along the positions; joined on dim=1 they would be new heads, and "
                "torch.cat refuses because the lengths S and T differ.",
                "torch.cat([k_cache, k], dim=-2), and the same for v."),
        Mistake("mask built as if the new positions came first", _cache_variant(causal="new first"),
                "the keys are the S cached positions followed by the T new ones: every query sees the whole cache, "
                "so the mask's triangle sits over its last T columns, not its first.",
                "torch.ones(T, S + T, dtype=torch.bool).tril(diagonal=S): the cache's columns all True."),
        Mistake("K/V heads not repeated to H", _cache_variant(repeated=False),
                "with G < H key/value heads the keys and values have fewer heads than the queries, so their "
                "scores do not line up (a shape error on the head axis, 1).",
                "repeat_kv(keys, H // G) and repeat_kv(values, H // G) before attending, with H = q.shape[1] and "
                "G = k.shape[1]; the cache keeps the G heads."),
        Mistake("K/V heads repeated G times instead of H / G", _cache_variant(repeat_by_g=True),
                KV_REPEATED_BY_G_HINT,
                "repeat_kv(x, H // G), with H = q.shape[1] and G = k.shape[1]."),
        Mistake("wrong K/V head grouping: heads tiled", _cache_variant(tile_heads=True),
                "query head i uses key/value head i // (H/G); yours come out tiled, pairing head i with i % G.",
                "repeat_kv(x, H // G) (or x.repeat_interleave(H // G, dim=1)), not x.repeat(1, H // G, 1, 1)."),
    ],
    forbidden=EFFICIENT_LIBRARY,
    allowed=(tfm_ref.repeat_kv,),
    uses=(TILED_ATTENTION,),
    withheld=(tfm_ref.scaled_dot_product_attention,),  # the same values over the cache
)

EXERCISES = (ONLINE_SOFTMAX, TILED_ATTENTION, CACHED_ATTENTION)
