"""Chapter 9 — exact attention without the (T, S) matrix: the online softmax and tiling.

The online softmax (Milakov & Gimelshein 2018) keeps, per row, a running maximum m and a
running sum ℓ of exponentials; when a new block raises the maximum from m to m', what was
accumulated is rescaled by exp(m − m'):

    m' = max(m, max(x_blk)),   ℓ' = ℓ · exp(m − m') + Σ exp(x_blk − m'),   softmax(x) = exp(x − m_n) / ℓ_n

Tiled attention (the FlashAttention idea, Dao et al. 2022) does the same per query row over
key tiles and also carries the un-normalised output o' = o · exp(m − m') + exp(S_blk − m') V_blk,
dividing by ℓ once at the end. Both equal their one-shot counterparts (`softmax`,
`scaled_dot_product_attention`) for every block size; `tests/test_tiling.py` checks them
against PyTorch.

Masks are boolean, True = may attend; a row with no visible key gives zeros, never NaN.

Shapes: T query positions · S key positions · Dk query/key width · Dv value width ·
N length of the softmax axis.
"""
from __future__ import annotations

import math

import torch

from .attention import _check_qkv, _scores_shape
from .precision import at_least_float32
from .shapes import check_mask, check_positive

__all__ = ["online_softmax", "tiled_attention"]


def _fold(m: torch.Tensor, total: torch.Tensor, block: torch.Tensor):
    """Fold one block of scores (…, n) into the running max ``m`` and sum ``total`` (…, 1).

    Returns the new max and sum, the block's exp(block − m_new) and the factor exp(m − m_new)
    that rescales whatever was accumulated relative to the old maximum.
    """
    m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True).detach())  # any shift is exact: no gradient
    # A row with no finite score yet keeps m = −inf; shifting by 0 gives exp(−inf) = 0, not NaN.
    shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
    p = torch.exp(block - shift)
    rescale = torch.exp(m - shift)
    return m_new, total * rescale + p.sum(dim=-1, keepdim=True), p, rescale


def _divide(x: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """x / total, with 0 / 0 = 0 for rows that saw no finite score."""
    return x / torch.where(total == 0, torch.ones_like(total), total)


def online_softmax(x: torch.Tensor, block_size: int, dim: int = -1) -> torch.Tensor:
    """Softmax of ``x`` along ``dim``, its max and normaliser found in one pass over blocks.

    Args:
        x: any shape. block_size: elements read per step along ``dim`` (the last block may
            be shorter). dim: the softmax axis.
    Returns:
        the same as ``softmax(x, dim)``; a slice that is all −inf gives zeros.
    Raises:
        ValueError: block_size < 1.
    """
    check_positive(block_size=block_size)
    row = x.movedim(dim, -1)  # (…, N)
    m = torch.full((*row.shape[:-1], 1), -math.inf, dtype=x.dtype, device=x.device)  # (…, 1) running max
    total = torch.zeros_like(m)  # (…, 1) running sum of exp(x − m)
    for start in range(0, row.shape[-1], block_size):
        m, total, _, _ = _fold(m, total, row[..., start:start + block_size])
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return _divide(torch.exp(row - shift), total).movedim(-1, dim)


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    q_tile: int = 64,
    k_tile: int = 64,
) -> torch.Tensor:
    """softmax(q kᵀ / √Dk) v, computed tile by tile; no (T, S) matrix is ever formed.

    Args:
        q: (…, T, Dk).  k: (…, S, Dk).  v: (…, S, Dv).
        mask: bool, broadcastable to (…, T, S); True = may attend.
        q_tile, k_tile: query rows and key columns per tile (the last tiles may be shorter).
    Returns:
        (…, T, Dv), equal to ``scaled_dot_product_attention(q, k, v, mask)``.
    Raises:
        ValueError: mismatched shapes, a bad mask, or a tile size < 1.
    """
    _check_qkv(q, k, v)
    check_positive(q_tile=q_tile, k_tile=k_tile)
    shape = _scores_shape(q, k)  # (…, T, S), never allocated
    batch = torch.broadcast_shapes(shape[:-2], v.shape[:-2])
    if mask is not None:
        check_mask(mask, shape)
        mask = mask.expand(shape)  # a view: tiles of it can be sliced whatever the mask broadcasts over
    dtype = at_least_float32(q).dtype  # the running statistics need at least float32
    scale = 1 / math.sqrt(q.shape[-1])
    n_queries, n_keys = shape[-2], shape[-1]
    rows = []
    for i in range(0, n_queries, q_tile):
        q_blk = q[..., i:i + q_tile, :].to(dtype)  # (…, Tq, Dk)
        m = torch.full((*batch, q_blk.shape[-2], 1), -math.inf, dtype=dtype, device=q.device)  # (…, Tq, 1)
        total = torch.zeros_like(m)  # (…, Tq, 1)
        out = torch.zeros(*batch, q_blk.shape[-2], v.shape[-1], dtype=dtype, device=q.device)  # (…, Tq, Dv)
        for j in range(0, n_keys, k_tile):
            scores = q_blk @ k[..., j:j + k_tile, :].to(dtype).transpose(-2, -1) * scale  # (…, Tq, Sk)
            if mask is not None:
                scores = scores.masked_fill(~mask[..., i:i + q_tile, j:j + k_tile], -math.inf)
            m, total, p, rescale = _fold(m, total, scores)
            out = out * rescale + p @ v[..., j:j + k_tile, :].to(dtype)  # (…, Tq, Dv)
        rows.append(_divide(out, total))
    return torch.cat(rows, dim=-2).to(q.dtype)  # (…, T, Dv)
