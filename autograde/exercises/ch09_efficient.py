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

import math

import torch

import tfm_ref

from ..checking import Call, Case, Exercise, Mistake, randn, random_dims
from .ch01_attention import ATTENTION_LIBRARY, SOFTMAX_LIBRARY, _qkv
from .ch02_multihead import _repeat_tiled

__all__ = ["ONLINE_SOFTMAX", "TILED_ATTENTION", "CACHED_ATTENTION", "EXERCISES"]

# Library code that would find the softmax's normaliser or do the attention for the student.
EFFICIENT_LIBRARY = (
    *SOFTMAX_LIBRARY, *ATTENTION_LIBRARY,
    torch.logsumexp, torch.Tensor.logsumexp, torch.special.logsumexp, torch._safe_softmax, torch._masked_softmax,
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
          running_max: bool = True, safe: bool = True):
    """One step of the online softmax, right unless a keyword says otherwise: the new running max,
    the shift used, the new running sum, the block's exponentials and the rescaling factor."""
    block_max = block.amax(dim=-1, keepdim=True)
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
        if minus_inf:  # masked scores: whole leading blocks of some rows, and row 0 entirely
            x = x.masked_fill(torch.rand(x.shape, generator=gen) < 0.4, NEG_INF)
            x[0, 0] = NEG_INF
        return Call(x, dims["K"], dim=dim)
    return inputs


def _online_variant(*, per_block: bool = False, drop_partial: bool = False, last_axis: bool = False, **fold):
    """The online softmax with one thing done wrong (the keywords, and those of `_fold`, say which)."""
    def online_softmax(x, block_size, dim=-1):
        row = x.movedim(-1 if last_axis else dim, -1)  # (…, N)
        m = torch.full((*row.shape[:-1], 1), NEG_INF, dtype=x.dtype)  # (…, 1)
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


ONLINE_SOFTMAX = Exercise(
    name="online_softmax",
    reference=tfm_ref.online_softmax,
    inputs=_softmax_inputs(),
    arg_names=("x", "block_size"),
    shapes=[dict(B=1, T=1, N=3, K=2), dict(B=1, T=2, N=5, K=2), dict(B=2, T=2, N=7, K=3), dict(B=2, T=3, N=10, K=4)],
    visible=[Case("random logits, blocks of 4 along the last axis (N = 10: blocks of 4, 4, 2)")],
    hidden=[
        Case("random sizes and block sizes", dims=random_dims(B=(1, 3), T=(1, 4), N=(1, 20), K=(1, 8))),
        Case("block size 1", dims=dict(B=2, T=3, N=7, K=1)),
        Case("one block (block size ≥ length)", dims=dict(B=2, T=3, N=6, K=9)),
        Case("blocks along dim=0", inputs=_softmax_inputs(dim=0), dims=dict(B=7, T=2, N=3, K=3)),
        Case("length-1 rows", dims=dict(B=2, T=3, N=1, K=2)),
        Case("−inf entries and an all −inf row", inputs=_softmax_inputs(minus_inf=True), dims=dict(B=2, T=3, N=9, K=2)),
        Case("float64", dtype=torch.float64),
        Case("huge logits", inputs=lambda gen, dims, dtype: _softmax_inputs()(gen, dims, dtype).scaled(1e3)),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("running sum not rescaled when the maximum changes", _online_variant(rescale_total=False),
                "every term already in the running sum ℓ is exp(x − m_old); when a block raises the maximum to "
                "m_new, multiply ℓ by exp(m_old − m_new) before adding the block's exp(x − m_new)."),
        Mistake("blocks normalised with the statistics so far", _online_variant(per_block=True),
                "a block's outputs cannot be written while the pass is running: later blocks change both the "
                "maximum and the sum. Finish the pass first, then return exp(x − m) / ℓ with the final m and ℓ."),
        Mistake("last, shorter block skipped", _online_variant(drop_partial=True),
                "when block_size does not divide the length the last block is shorter; it still counts. Loop "
                "over range(0, N, block_size) and slice [start:start + block_size]."),
        Mistake("blocks taken along the last axis (dim ignored)", _online_variant(last_axis=True),
                "use the `dim` argument: x.movedim(dim, -1) puts that axis last, and .movedim(-1, dim) puts it back."),
        Mistake("exp without subtracting the running maximum", _online_variant(subtract_max=False),
                "exp(x) overflows to inf for large logits (exp(1000) = inf, and inf/inf = NaN); every exponent "
                "must be taken relative to the running maximum m, so that it is ≤ 0."),
        Mistake("the block's maximum instead of the running maximum", _online_variant(running_max=False),
                "m_new = max(m_old, max(block)): the running maximum never goes down. With the block's own "
                "maximum, a later block of smaller (or all −inf) values makes exp(m_old − m_new) > 1: the sum is "
                "then taken relative to the wrong maximum, and overflows for large logits."),
        Mistake("NaN for −inf entries (masked scores)", _online_variant(safe=False),
                "while a row has seen only −inf, its maximum is −inf and exp(−inf − (−inf)) is NaN. Subtract 0 "
                "instead of a non-finite maximum, and divide by 1 where the sum is 0: an all −inf row gives zeros."),
        # Last: its output is NaN throughout, which other mistakes also give on some inputs.
        Mistake("running sum rescaled by exp(m_new − m_old)", _online_variant(inverted=True),
                "the factor is exp(m_old − m_new) ≤ 1: the old terms were relative to a smaller maximum and must "
                "shrink. (With m starting at −inf, exp(m_new − m_old) is inf and 0 · inf is NaN.)"),
    ],
    forbidden=EFFICIENT_LIBRARY,
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


def _tiled_inputs(mask: str = "random"):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        q, k, v = _qkv(gen, dims, dtype)  # (B, H, T, Dk), (B, H, S, Dk), (B, H, S, Dv)
        made = {
            "none": lambda: None,
            "random": lambda: _random_mask(gen, dims),
            "empty rows": lambda: _random_mask(gen, dims, empty_rows=True),
            "causal": lambda: tfm_ref.causal_mask(dims["T"], dims["S"]),  # (T, S), aligned to the end
            "padding": lambda: tfm_ref.key_mask(
                tfm_ref.padding_mask(torch.randint(1, dims["S"] + 1, (dims["B"],), generator=gen), dims["S"])),
        }[mask]()
        return Call(q, k, v, made, q_tile=dims["QT"], k_tile=dims["KT"])
    return inputs


def _tiled_variant(*, rescale_out: bool = True, divide_inside: bool = False, drop_partial: bool = False,
                   short_key_tiles: bool = False, use_mask: bool = True, fill: float = NEG_INF, scaled: bool = True,
                   **fold):
    """Tiled attention with one thing done wrong (the keywords, and those of `_fold`, say which)."""
    def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
        n_queries, n_keys = q.shape[-2], k.shape[-2]
        if mask is not None:
            mask = mask.expand(torch.broadcast_shapes(mask.shape, (*q.shape[:-1], n_keys)))  # (…, T, S)
        scale = 1 / math.sqrt(q.shape[-1]) if scaled else 1.0
        width = k_tile - 1 if short_key_tiles else k_tile
        rows = []
        for i in _starts(n_queries, q_tile, drop_partial):
            q_blk = q[..., i:i + q_tile, :]  # (…, Tq, Dk)
            m = torch.full((*q_blk.shape[:-1], 1), NEG_INF, dtype=q.dtype)  # (…, Tq, 1)
            total, out = torch.zeros_like(m), torch.zeros(*q_blk.shape[:-1], v.shape[-1], dtype=q.dtype)
            for j in _starts(n_keys, k_tile, drop_partial):
                scores = q_blk @ k[..., j:j + width, :].transpose(-2, -1) * scale  # (…, Tq, Sk)
                if mask is not None and use_mask:
                    scores = scores.masked_fill(~mask[..., i:i + q_tile, j:j + width], fill)
                m, _, total, p, factor = _fold(m, total, scores, **fold)
                contribution = p @ v[..., j:j + width, :]  # (…, Tq, Dv)
                if divide_inside:  # normalised at every tile, by the sum so far
                    contribution = _safe_divide(contribution, total)
                out = (out * factor if rescale_out else out) + contribution
            rows.append(out if divide_inside else _safe_divide(out, total))
        return torch.cat(rows, dim=-2)  # (…, T, Dv)
    return tiled_attention


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
    visible=[Case("random mask; T = 5 in query tiles of 2, S = 7 in key tiles of 3")],
    hidden=[
        Case("random sizes and tile sizes", dims=_tiled_sizes),
        Case("tiles of 1", dims=dict(B=2, H=2, T=4, S=6, Dk=4, Dv=3, QT=1, KT=1)),
        Case("tiles longer than the sequence", dims=dict(B=2, H=2, T=4, S=6, Dk=4, Dv=3, QT=8, KT=9)),
        Case("causal mask, T < S (aligned to the end)", inputs=_tiled_inputs("causal"),
             dims=dict(B=2, H=2, T=5, S=8, Dk=4, Dv=3, QT=2, KT=3)),
        Case("key padding mask (B, 1, 1, S)", inputs=_tiled_inputs("padding")),
        Case("fully masked rows", inputs=_tiled_inputs("empty rows")),
        Case("mask=None", inputs=_tiled_inputs("none")),
        Case("length 1 (T = S = 1)", dims=dict(B=2, H=2, T=1, S=1, Dk=4, Dv=3, QT=2, KT=3)),
        Case("float64", dtype=torch.float64),
        Case("huge logits", inputs=lambda gen, dims, dtype: _tiled_inputs()(gen, dims, dtype).scaled(30.0)),
        Case("gradients (q, k, v)", grad=True),
    ],
    mistakes=[
        Mistake("running sum not rescaled when the maximum changes", _tiled_variant(rescale_total=False),
                "ℓ holds exp(s − m_old) terms; when a key tile raises a row's maximum, multiply ℓ by "
                "exp(m_old − m_new) before adding the tile's sum, exactly as the output accumulator."),
        Mistake("output accumulator not rescaled when the maximum changes", _tiled_variant(rescale_out=False),
                "the un-normalised output o = Σ exp(s − m) v was built relative to the old maximum: multiply it "
                "by exp(m_old − m_new), the same factor as ℓ, before adding exp(s − m_new) @ v_tile."),
        Mistake("divided by the running sum at every tile", _tiled_variant(divide_inside=True),
                "keep o un-normalised while the key tiles stream past and divide by ℓ once, after the last key "
                "tile: the sum so far is not the final normaliser."),
        Mistake("last, shorter tiles skipped", _tiled_variant(drop_partial=True),
                "when the tile size does not divide T or S the last tile is shorter; it still counts. Loop over "
                "range(0, n, tile) and slice [start:start + tile] (slicing past the end is fine)."),
        Mistake("key tiles one short (off by one at the tile edges)", _tiled_variant(short_key_tiles=True),
                "a tile starting at j holds keys j … j + k_tile − 1: slice k[..., j:j + k_tile, :] (the end is "
                "exclusive), and the same for v and the mask."),
        Mistake("mask ignored", _tiled_variant(use_mask=False),
                "fill the masked scores of every tile with -inf: mask[..., i:i + q_tile, j:j + k_tile] is the "
                "tile of the mask, after mask.expand(…, T, S) so that broadcast dimensions can be sliced."),
        Mistake("exp without subtracting the running maximum", _tiled_variant(subtract_max=False),
                "exp(s) overflows to inf for large scores; take every exponent relative to the row's running "
                "maximum m (and rescale what was accumulated when m grows)."),
        Mistake("NaN for a row with no visible key yet", _tiled_variant(safe=False),
                "while every key a row has seen is masked, its maximum is −inf and exp(−inf − (−inf)) is NaN. "
                "Subtract 0 instead of a non-finite maximum, and divide by 1 where ℓ is 0: a fully masked "
                "query then gets a zero output."),
        Mistake("masked scores set to a large negative number", _tiled_variant(fill=-1e9),
                "with -1e9 a query whose keys are all masked averages every value instead of giving zeros; "
                "use -inf and treat a row with no finite score as exp(·) = 0."),
        Mistake("missing scaling", _tiled_variant(scaled=False),
                "the scores are q kᵀ / √d_k, with d_k = q.shape[-1], in every tile."),
        # Last: its output is NaN throughout, which other mistakes also give on some inputs.
        Mistake("rescaled by exp(m_new − m_old)", _tiled_variant(inverted=True),
                "the factor is exp(m_old − m_new) ≤ 1: what was accumulated relative to a smaller maximum shrinks. "
                "(With m starting at −inf, exp(m_new − m_old) is inf and 0 · inf is NaN.)"),
    ],
    forbidden=EFFICIENT_LIBRARY,
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
                   store_repeated: bool = False, tile_heads: bool = False):
    """One decoding step with one thing done wrong. ``causal``: "end" right, "start" (the triangle
    of a square mask), "none", or "strict" (a position does not see itself)."""
    def cached_attention(q, k, v, k_cache, v_cache):
        n_rep = q.shape[1] // k.shape[1]
        repeat = _repeat_tiled if tile_heads else tfm_ref.repeat_kv
        if store_repeated:
            k, v, k_cache, v_cache = (repeat(t, n_rep) for t in (k, v, k_cache, v_cache))  # (B, H, ·, Dh)
            n_rep = 1
        parts = (k, k_cache, v, v_cache) if prepend else (k_cache, k, v_cache, v)
        keys, values = torch.cat(parts[:2], dim=-2), torch.cat(parts[2:], dim=-2)  # (B, G, S + T, Dh)
        seen_k, seen_v = (keys, values) if use_cache else (k, v)
        n_new, n_all = q.shape[-2], seen_k.shape[-2]
        offset = {"end": n_all - n_new, "start": 0, "strict": n_all - n_new - 1, "none": n_all}[causal]
        mask = torch.ones(n_new, n_all, dtype=torch.bool).tril(diagonal=offset)  # (T, S + T)
        out = tfm_ref.scaled_dot_product_attention(q, repeat(seen_k, n_rep), repeat(seen_v, n_rep), mask)
        return (out, keys, values) if update else (out, k_cache, v_cache)
    return cached_attention


CACHED_ATTENTION = Exercise(
    name="cached_attention",
    reference=tfm_ref.cached_attention,
    inputs=_cache_inputs,
    arg_names=("q", "k", "v", "k_cache", "v_cache"),
    shapes=[dict(B=1, H=1, G=1, T=1, S=1, Dh=2), dict(B=1, H=2, G=1, T=2, S=1, Dh=2),
            dict(B=1, H=4, G=2, T=1, S=2, Dh=2), dict(B=1, H=4, G=2, T=2, S=3, Dh=2),
            dict(B=2, H=4, G=2, T=1, S=5, Dh=8)],
    visible=[Case("one new token after 5 cached positions (GQA: H = 4, G = 2)"),
             Case("a chunk of 3 new positions after 4 cached ones", dims=dict(B=2, H=4, G=2, T=3, S=4, Dh=8))],
    hidden=[
        Case("random sizes, S = 0 … 8 cached positions", dims=_cache_sizes),
        Case("the first step: an empty cache (S = 0, a prompt of 4)", dims=dict(B=2, H=4, G=2, T=4, S=0, Dh=8)),
        Case("one position in all (S = 0, T = 1)", dims=dict(B=2, H=2, G=1, T=1, S=0, Dh=4)),
        Case("MQA (G = 1)", dims=dict(B=2, H=4, G=1, T=2, S=5, Dh=8)),
        Case("MHA (G = H)", dims=dict(B=2, H=3, G=3, T=2, S=5, Dh=8)),
        Case("float64", dtype=torch.float64),
        Case("huge logits", inputs=lambda gen, dims, dtype: _cache_inputs(gen, dims, dtype).scaled(30.0)),
        Case("gradients (q, k, v and the cache)", dims=dict(B=2, H=4, G=2, T=3, S=4, Dh=8), grad=True),
    ],
    mistakes=[
        Mistake("new keys and values put in front of the cache", _cache_variant(prepend=True),
                "the cache holds positions 0 … S − 1 in order and the new ones come after them: "
                "torch.cat([k_cache, k], dim=-2), not [k, k_cache]."),
        Mistake("causal mask aligned to the start", _cache_variant(causal="start"),
                "the T new queries are the *last* T of the S + T positions: query i may see keys 0 … S + i. "
                "A (T, S + T) mask built as ones(...).tril() lets query 0 see key 0 only; use tril(diagonal=S) "
                "(the end-aligned mask of chapter 3)."),
        Mistake("no causal mask among the new positions", _cache_variant(causal="none"),
                "with more than one new position, new query i must not see the new positions after it: "
                "mask with the (T, S + T) causal mask aligned to the end, tril(diagonal=S)."),
        Mistake("a new position does not attend to itself", _cache_variant(causal="strict"),
                "query i sees keys 0 … S + i, its own key included (tril(diagonal=S), not diagonal=S − 1); the "
                "first token of a sequence sees only itself."),
        Mistake("earlier positions ignored (only the new keys attended)", _cache_variant(use_cache=False),
                "attend over the whole cache after appending: the cached positions' keys and values followed by "
                "the new ones, (B, G, S + T, Dh)."),
        Mistake("cache returned without the new positions", _cache_variant(update=False),
                "return the cache after appending, (B, G, S + T, Dh): the next step needs this step's keys and values."),
        Mistake("cache stores the repeated heads", _cache_variant(store_repeated=True),
                "keep G key/value heads in the cache and repeat them to H only for attending: storing H heads "
                "throws away GQA's memory saving (the cache would be H/G times larger)."),
        Mistake("wrong K/V head grouping: repeat instead of repeat_interleave", _cache_variant(tile_heads=True),
                "query head i uses key/value head i // (H/G): repeat_kv(x, H // G), or "
                "x.repeat_interleave(H // G, dim=1) — not x.repeat(1, H // G, 1, 1), which pairs head i with i % G."),
    ],
    forbidden=EFFICIENT_LIBRARY,
    allowed=(tfm_ref.repeat_kv,),
)

EXERCISES = (ONLINE_SOFTMAX, TILED_ATTENTION, CACHED_ATTENTION)
