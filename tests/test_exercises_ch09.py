"""Chapter 9 checks beyond tests/test_exercises.py (where the notebook's own solutions pass unflagged, its
decoding step calling the given repeat_kv): a normaliser from logsumexp is flagged, the decoding step may not
hand the attention to tfm_ref (withheld when grading), exp with no maximum at all is named as the overflow, and mistakes
a student audit found unnamed or caught by luck are named on every seed (the running sum divided by unguarded, no −inf
guard, a square causal mask in the decoding step, a cache joined along the wrong axis or to repeated heads).
"""
import math

import pytest
import torch
from exercise_proofs import assert_named, assert_named_in_both_languages

import tfm_ref
from autograde import check
from autograde.checking import CheckFailed
from autograde.exercises import ch09_efficient as chapter


def test_online_softmax_taking_its_normaliser_from_logsumexp_is_flagged():
    def online_softmax(x, block_size, dim=-1):
        return torch.exp(x - x.logsumexp(dim=dim, keepdim=True))

    assert "logsumexp" in chapter.ONLINE_SOFTMAX.run(online_softmax, seed=0).delegated


def test_cached_attention_may_not_hand_the_attention_to_tfm_ref():
    def cached_attention(q, k, v, k_cache, v_cache):
        k_cache, v_cache = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)  # (B, G, S + T, Dh)
        n_rep = q.shape[1] // k.shape[1]
        keys, values = tfm_ref.repeat_kv(k_cache, n_rep), tfm_ref.repeat_kv(v_cache, n_rep)  # (B, H, S + T, Dh)
        return tfm_ref.scaled_dot_product_attention(q, keys, values, is_causal=True), k_cache, v_cache

    with pytest.raises(CheckFailed, match="tfm_ref's `scaled_dot_product_attention`"):
        check("ch09_efficient.cached_attention", cached_attention)


def _exp_softmax(scores: torch.Tensor) -> torch.Tensor:
    """The first thing a student writes: exp and normalise, no maximum subtracted anywhere."""
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)


def _online_softmax_without_any_maximum(x, block_size, dim=-1):
    row = x.movedim(dim, -1)
    total = sum(torch.exp(row[..., s:s + block_size]).sum(dim=-1, keepdim=True)
                for s in range(0, row.shape[-1], block_size))
    return (torch.exp(row) / total).movedim(-1, dim)


def _tiled_attention_without_any_maximum(q, k, v, mask=None, *, q_tile=64, k_tile=64):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return _exp_softmax(scores if mask is None else scores.masked_fill(~mask, float("-inf"))) @ v


@pytest.mark.parametrize(("exercise", "student"), [(chapter.ONLINE_SOFTMAX, _online_softmax_without_any_maximum),
                                                   (chapter.TILED_ATTENTION, _tiled_attention_without_any_maximum)])
def test_exp_with_no_maximum_at_all_is_named_as_the_overflow_not_as_the_masked_rows(exercise, student):
    # Such code also gives NaN on all −inf rows, where the catalogue would blame the −inf handling.
    report = exercise.run(student, hidden=True, seed=0)
    assert report.mistake == "exp without subtracting the running maximum", report.message


@pytest.mark.parametrize("exercise", [chapter.TILED_ATTENTION, chapter.CACHED_ATTENTION], ids=lambda e: e.name)
def test_a_right_answer_computed_in_another_order_passes_the_huge_logits_case_on_every_seed(exercise):
    # The instructor's solutions reach the reference's values by another order of operations. In float32, huge
    # logits' rounding parted cached_attention's from the reference on seeds 66 and 616 of 600, and graded a
    # solved notebook 9/12; the case runs in float64 now.
    from instructor_notebooks import solution_namespace

    answer = solution_namespace("ch09_efficient")[exercise.name]
    for seed in (66, 616, *range(20)):
        report = exercise.run(answer, hidden=True, seed=seed)
        assert report.passed, report.message


def _online_softmax_cleaned_up_at_the_end(x, block_size, dim=-1):
    """No −inf guard in the loop, NaN turned into 0 at the end: a row whose first block is all −inf
    comes out all zeros, its later finite logits lost."""
    row = x.movedim(dim, -1)
    m = torch.full((*row.shape[:-1], 1), float("-inf"), dtype=x.dtype)
    total = torch.zeros_like(m)
    for start in range(0, row.shape[-1], block_size):
        block = row[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        total = total * torch.exp(m - m_new) + torch.exp(block - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return (torch.exp(row - m) / total).nan_to_num(0.0).movedim(-1, dim)


@pytest.mark.parametrize("seed", range(10))
def test_nan_turned_into_zeros_at_the_end_fails_on_a_row_whose_first_block_is_all_minus_inf(seed):
    assert not chapter.ONLINE_SOFTMAX.run(_online_softmax_cleaned_up_at_the_end, hidden=True,
                                          seed=seed).passed  # it passed on 6 seeds in 20


# --------------------------------------------------------------------------- mistakes a student audit found unnamed


def _tiled(q, k, v, mask=None, *, q_tile=64, k_tile=64, guard=True, divide_inside=False, final_guard=True):
    """A student's tiled attention: right with the defaults; ``guard=False`` shifts by a −inf running maximum
    (NaN while a row has seen only masked keys); ``divide_inside`` divides by the running sum at every tile,
    with no guard for ℓ = 0; ``final_guard=False`` divides by ℓ at the end even where it is 0."""
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = mask.expand(*q.shape[:-1], n_keys)
    outs = []
    for i in range(0, n_queries, q_tile):
        qb = q[..., i:i + q_tile, :]
        m = torch.full(qb.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
        total = torch.zeros_like(m)
        o = torch.zeros(*qb.shape[:-1], v.shape[-1], dtype=q.dtype)
        for j in range(0, n_keys, k_tile):
            s = qb @ k[..., j:j + k_tile, :].transpose(-2, -1) * scale
            if mask is not None:
                s = s.masked_fill(~mask[..., i:i + q_tile, j:j + k_tile], float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new)) if guard else m_new
            p, f = torch.exp(s - shift), torch.exp(m - shift)
            total = total * f + p.sum(-1, keepdim=True)
            o = o * f + (p @ v[..., j:j + k_tile, :] / total if divide_inside else p @ v[..., j:j + k_tile, :])
            m = m_new
        outs.append(o if divide_inside else o / torch.where(total == 0, torch.ones_like(total), total) if final_guard
                    else o / total)
    return torch.cat(outs, dim=-2)


def test_tiled_attention_dividing_by_the_running_sum_without_a_guard_is_named_on_every_seed():
    def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
        return _tiled(q, k, v, mask, q_tile=q_tile, k_tile=k_tile, divide_inside=True)

    assert_named(chapter.TILED_ATTENTION, tiled_attention,
                 "divided by the running sum at every tile, with no guard for ℓ = 0", range(5))


def test_tiled_attention_without_the_minus_inf_guard_is_caught_by_the_visible_check_on_every_seed():
    def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
        return _tiled(q, k, v, mask, q_tile=q_tile, k_tile=k_tile, guard=False)

    assert_named(chapter.TILED_ATTENTION, tiled_attention, "NaN for a row with no visible key yet", range(5))


def test_cached_attention_with_a_square_causal_mask_is_named():
    def cached_attention(q, k, v, k_cache, v_cache):
        k_cache, v_cache = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)  # (B, G, S + T, Dh)
        n_rep = q.shape[1] // k.shape[1]
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()  # (T, T): the cached keys left out
        return _tiled(q, tfm_ref.repeat_kv(k_cache, n_rep), tfm_ref.repeat_kv(v_cache, n_rep), mask), k_cache, v_cache

    assert_named(chapter.CACHED_ATTENTION, cached_attention, "square (T, T) causal mask instead of (T, S + T)",
                 range(5))


@pytest.mark.parametrize("mistake", ["blocks taken along the last axis (dim ignored)",
                                     "NaN for −inf entries (masked scores)"])
def test_online_softmax_ignoring_dim_or_without_the_minus_inf_guard_fails_the_visible_check_on_every_seed(mistake):
    """The notebook warns of both: a student learns of them before grading (they passed the one visible case)."""
    impl = next(m.impl for m in chapter.ONLINE_SOFTMAX.mistakes if m.name == mistake)
    for seed in range(5):
        report = chapter.ONLINE_SOFTMAX.run(impl, seed=seed)
        assert not report.passed and report.mistake == mistake, (seed, report.message)


def _cache_grown_along_the_heads(q, k, v, k_cache, v_cache):
    k_cache, v_cache = torch.cat([k_cache, k], dim=1), torch.cat([v_cache, v], dim=1)
    n_rep = q.shape[1] // k_cache.shape[1]
    keys, values = tfm_ref.repeat_kv(k_cache, n_rep), tfm_ref.repeat_kv(v_cache, n_rep)
    scores = q @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5
    return scores.softmax(-1) @ values, k_cache, v_cache


def _cache_of_repeated_heads(q, k, v, k_cache, v_cache):
    n_rep = q.shape[1] // k.shape[1]
    k, v = tfm_ref.repeat_kv(k, n_rep), tfm_ref.repeat_kv(v, n_rep)  # (B, H, T, Dh), against a (B, G, S, Dh) cache
    k_cache, v_cache = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
    scores = q @ k_cache.transpose(-2, -1) / q.shape[-1] ** 0.5
    return scores.softmax(-1) @ v_cache, k_cache, v_cache


@pytest.mark.parametrize("student, mistake", [
    (_cache_grown_along_the_heads, "cache grown along the heads (torch.cat on dim=1)"),
    (_cache_of_repeated_heads, "new keys and values repeated to H heads before joining the cache")],
    ids=["cat(dim=1)", "new k, v repeated to H"])
def test_a_cache_that_torch_cat_refuses_is_named_in_english_and_chinese(student, mistake):
    """Both raised a raw RuntimeError from torch.cat (a student audit): the check names the mistake behind it."""
    assert_named_in_both_languages(chapter.CACHED_ATTENTION, student, mistake, range(4), hidden=True)


def test_tiled_attention_without_a_guard_for_fully_masked_rows_is_named_by_the_visible_check_on_every_seed():
    """The notebook warns of fully masked rows: o / ℓ with ℓ = 0 passed the visible check, whose rows all saw a key."""
    def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
        return _tiled(q, k, v, mask, q_tile=q_tile, k_tile=k_tile, final_guard=False)

    assert_named_in_both_languages(chapter.TILED_ATTENTION, tiled_attention,
                                   "no guard for ℓ = 0 in the final division (fully masked rows)", range(5))


def _online_softmax(x, block_size, dim=-1, *, final_shift=True):
    """A student's online softmax: right by default; ``final_shift=False`` takes the output's exps against the
    first block's maximum, which it kept, instead of the final one."""
    row = x.movedim(dim, -1)  # (…, N)
    m = torch.full((*row.shape[:-1], 1), float("-inf"), dtype=x.dtype)
    total, first = torch.zeros_like(m), None
    for start in range(0, row.shape[-1], block_size):
        block = row[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        total = total * torch.exp(m - shift) + torch.exp(block - shift).sum(dim=-1, keepdim=True)
        m, first = m_new, shift if first is None else first
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m)) if final_shift else first
    return (torch.exp(row - shift) / torch.where(total == 0, torch.ones_like(total), total)).movedim(-1, dim)


def _tiled_tile_by_tile(q, k, v, mask=None, *, q_tile=64, k_tile=64):
    """Each key tile's own softmax, the tiles' outputs summed: nothing carried from one tile to the next."""
    if mask is not None:
        mask = mask.expand(*q.shape[:-1], k.shape[-2])
    out = 0
    for j in range(0, k.shape[-2], k_tile):
        s = q @ k[..., j:j + k_tile, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., j:j + k_tile], float("-inf"))
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
        total = p.sum(-1, keepdim=True)
        out = out + p / torch.where(total == 0, torch.ones_like(total), total) @ v[..., j:j + k_tile, :]
    return out


def test_a_stale_maximum_and_key_tiles_normalised_alone_are_named_in_english_and_chinese():
    """A student audit found these failing with only "the output differs"."""
    assert chapter.ONLINE_SOFTMAX.run(_online_softmax, hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.ONLINE_SOFTMAX, lambda x, block_size, dim=-1: _online_softmax(
        x, block_size, dim, final_shift=False), "output's exps taken against the first block's maximum", range(3))
    assert chapter.TILED_ATTENTION.run(_tiled, hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.TILED_ATTENTION, _tiled_tile_by_tile,
                                   "each key tile normalised on its own, and the tiles' outputs summed", range(3))
