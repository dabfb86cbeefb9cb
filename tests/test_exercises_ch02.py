"""Chapter 2 checks beyond tests/test_exercises.py: repeat_interleave is off limits in repeat_kv, a layer written from
scratch passes, and mistakes a student audit found unnamed are named (a context ignored, K/V projections sized for every
query head, split_heads without its transpose).
"""
import math

import pytest
import torch

from autograde.exercises import ch02_multihead as chapter
from exercise_proofs import assert_named, assert_named_in_both_languages
from student_layers import StudentAttentionLayer


def test_repeat_kv_through_repeat_interleave_is_flagged_not_scored():
    report = chapter.REPEAT_KV.run(lambda x, n_rep: x.repeat_interleave(n_rep, dim=1), hidden=True, seed=0)
    assert report.passed and report.delegated == ("repeat_interleave",)


class _LayerFromScratch(StudentAttentionLayer):
    """A student's layer that shares no code with tfm_ref: inline heads, torch.softmax."""

    def forward(self, x, context=None, mask=None):
        batch, length, width = x.shape
        source = x if context is None else context
        group = self.n_heads // self.n_kv_heads
        q = self.q_proj(x).view(batch, length, self.n_heads, -1).transpose(1, 2)  # (B, H, T, Dh)
        k = self.k_proj(source).view(batch, source.shape[1], self.n_kv_heads, -1).transpose(1, 2)  # (B, G, S, Dh)
        v = self.v_proj(source).view(batch, source.shape[1], self.n_kv_heads, -1).transpose(1, 2)  # (B, G, S, Dh)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, S, Dh)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v  # (B, H, T, Dh); no visible key: zeros
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, width))  # (B, T, D)


def test_a_layer_written_from_scratch_passes_unflagged():
    report = chapter.MULTIHEAD.run(_LayerFromScratch, hidden=True, seed=0)
    assert report.passed and not report.delegated, report.message


# --------------------------------------------------------------------------- mistakes a student audit found unnamed


class _LayerIgnoringTheContext(_LayerFromScratch):
    """Keys and values always projected from x: passed every check while no case gave a context."""

    def forward(self, x, context=None, mask=None):
        return super().forward(x, None, mask)


def test_a_layer_that_ignores_the_context_is_named_by_the_visible_check():
    assert_named(chapter.MULTIHEAD, _LayerIgnoringTheContext, "context ignored: keys and values taken from x",
                 range(5))


class _KVProjectionsSizedDModel(_LayerFromScratch):
    """k_proj and v_proj with d_model outputs, as if there were n_heads key/value heads."""

    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True, dropout=0.0):
        super().__init__(d_model, n_heads, n_kv_heads, bias, dropout)
        self.k_proj = torch.nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = torch.nn.Linear(d_model, d_model, bias=bias)


def test_kv_projections_sized_for_every_query_head_are_named_where_the_parameters_are_compared():
    # The layer cannot be built with the reference's weights, so no catalogued Mistake can run: the adapter's
    # parameter message names it.
    for seed in range(5):
        report = chapter.MULTIHEAD.run(_KVProjectionsSizedDModel, seed=seed)
        assert not report.passed
        assert ("k_proj/v_proj sized for all query heads: with n_kv_heads < n_heads they have n_kv_heads · head_dim "
                "outputs") in report.message, (seed, report.message)


def test_split_heads_without_the_transpose_is_named():
    def split_heads(x, n_heads):
        batch, length, width = x.shape
        return x.view(batch, length, n_heads, width // n_heads)  # (B, T, H, Dh)

    assert_named(chapter.SPLIT_HEADS, split_heads, "forgot the transpose: returns (B, T, H, Dh)", range(5))


def test_split_heads_with_the_wrong_transpose_is_told_which_axes_are_swapped():
    """A wrong shape made of the right sizes says what it usually means (a student audit got only the shapes)."""
    def split_heads(x, n_heads):
        b, t, d = x.shape
        return x.view(b, t, n_heads, d // n_heads).transpose(1, 2).transpose(2, 3)  # (B, H, Dh, T)

    report = chapter.SPLIT_HEADS.run(split_heads, seed=0)
    assert not report.passed and "swapped: a transpose missing, or one too many" in report.message, report.message


def _split_view_then(order: str):
    """A student's split_heads: ``"H, Dh" + transpose(2, 3)`` or ``"Dh, H" + transpose(1, 2)``."""
    def split_heads(x, n_heads):
        b, t, d = x.shape
        if order == "transpose(2, 3)":
            return x.view(b, t, n_heads, d // n_heads).transpose(2, 3)  # (B, T, Dh, H)
        return x.view(b, t, d // n_heads, n_heads).transpose(1, 2)  # (B, Dh, T, H)
    return split_heads


def _merge_with_transpose_2_3(x):
    b, h, t, dh = x.shape
    return x.transpose(2, 3).contiguous().view(b, t, h * dh)


STUDENT_HEAD_SHUFFLES = {
    "split_heads with transpose(2, 3)": (chapter.SPLIT_HEADS, _split_view_then("transpose(2, 3)"),
                                         "transposed axes 2 and 3 instead of 1 and 2"),
    "split_heads with view(B, T, Dh, H)": (chapter.SPLIT_HEADS, _split_view_then("view(B, T, Dh, H)"),
                                           "last axis split as (Dh, H) instead of (H, Dh)"),
    "merge_heads with transpose(2, 3)": (chapter.MERGE_HEADS, _merge_with_transpose_2_3,
                                         "transposed axes 2 and 3 instead of 1 and 2"),
}


@pytest.mark.parametrize("how", STUDENT_HEAD_SHUFFLES)
def test_heads_split_or_merged_along_the_wrong_axes_are_named_in_english_and_chinese(how):
    """A student audit got only "output has shape …" or "the output differs" for these."""
    exercise, student, mistake = STUDENT_HEAD_SHUFFLES[how]
    assert_named_in_both_languages(exercise, student, mistake, range(4), hidden=True)
