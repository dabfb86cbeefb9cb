"""Chapter 1 — scaled dot-product attention.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V          (Vaswani et al. 2017, eq. 1)

Rows are positions (the row convention, ``Q = X W_Q``). Masks are boolean, True = may attend.
A query whose keys are all masked gets zero weights and a zero output, never NaN.

Two paths with one signature: `scaled_dot_product_attention` is the readable eager reference;
`sdpa_attention` calls PyTorch's fused kernel and falls back to the eager path when the
weights are asked for. `tests/test_attention.py` checks that they agree.

Shapes: T query positions · S key positions · Dk query/key width · Dv value width.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .masks import causal_mask
from .precision import at_least_float32
from .shapes import check_mask

__all__ = ["softmax", "scaled_dot_product_attention", "sdpa_attention", "ATTENTION_IMPLEMENTATIONS"]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax: subtract the row maximum before ``exp``.

    A row that is all ``-inf`` (every key masked) gives zeros instead of NaN.
    """
    row_max = x.amax(dim=dim, keepdim=True).detach()  # the result does not depend on it
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(x - row_max)
    total = exp.sum(dim=dim, keepdim=True)
    return exp / torch.where(total == 0, torch.ones_like(total), total)


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError("q, k and v need at least 2 dimensions (…, positions, width)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same width Dk, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions S, got k {tuple(k.shape)} and v {tuple(v.shape)}")


def _scores_shape(q: torch.Tensor, k: torch.Tensor) -> tuple[int, ...]:
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        raise ValueError(f"the batch dimensions of q {tuple(q.shape)} and k {tuple(k.shape)} do not broadcast") from None
    return (*batch, q.shape[-2], k.shape[-2])


def _with_causal(mask: torch.Tensor | None, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    causal = causal_mask(q.shape[-2], k.shape[-2], device=q.device)  # (T, S)
    return causal if mask is None else mask & causal


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    return_weights: bool = False,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √Dk) v, the readable reference.

    Args:
        q: (…, T, Dk) queries.  k: (…, S, Dk) keys.  v: (…, S, Dv) values.
        mask: bool, broadcastable to (…, T, S); True = may attend.
        return_weights: also return the attention weights.
        dropout_p: dropout on the weights (training only; callers pass 0.0 in eval).
        is_causal: also apply `causal_mask` (aligned to the end when S > T), without the
            caller building it, so the fast path can use its causal kernels.
    Returns:
        (…, T, Dv), and the weights (…, T, S) when ``return_weights``.
    Raises:
        ValueError: mismatched widths or positions, or a mask that is not boolean or does
        not broadcast.
    """
    _check_qkv(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (…, T, S)
    mask = _with_causal(mask, q, k) if is_causal else mask
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))  # before the softmax, never after
    weights = softmax(at_least_float32(scores), dim=-1).to(q.dtype)  # (…, T, S); each row sums to 1 (or 0)
    attended = weights if dropout_p == 0.0 else F.dropout(weights, dropout_p)
    out = attended @ v  # (…, T, Dv)
    return (out, weights) if return_weights else out


def sdpa_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    return_weights: bool = False,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The same function through ``F.scaled_dot_product_attention`` (fused kernels on GPU).

    The fused kernels never materialise the weights, so ``return_weights`` uses the eager path.
    """
    if return_weights:
        return scaled_dot_product_attention(q, k, v, mask, return_weights=True, dropout_p=dropout_p, is_causal=is_causal)
    _check_qkv(q, k, v)
    if is_causal and mask is None and q.shape[-2] == k.shape[-2]:
        # PyTorch aligns its causal triangle to the start; with T = S that is our triangle too
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    mask = _with_causal(mask, q, k) if is_causal else mask
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    check_mask(mask, _scores_shape(q, k))
    # The kernels give NaN for a query with no visible key; let such rows see every key, then
    # zero their output, which is what the eager path returns for them.
    empty_row = ~mask.any(dim=-1, keepdim=True)  # (…, T, 1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty_row, dropout_p=dropout_p)
    return out.masked_fill(empty_row, 0.0)


ATTENTION_IMPLEMENTATIONS = {"eager": scaled_dot_product_attention, "sdpa": sdpa_attention}
