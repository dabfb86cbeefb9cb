"""Chapter 1 checks beyond tests/test_exercises.py: a softmax whose normaliser comes from logsumexp is flagged."""
import re

import torch
from exercise_proofs import assert_named, assert_named_in_both_languages

from autograde.exercises import ch01_attention as chapter


def test_softmax_taking_its_normaliser_from_logsumexp_is_flagged_not_scored():
    def softmax(x, dim=-1):  # stable, and the library's own work; right but for the all −inf row
        m = torch.nan_to_num(x.logsumexp(dim=dim, keepdim=True), neginf=0.0)
        return torch.exp(x - m) * (x.isfinite().any(dim=dim, keepdim=True))

    report = chapter.SOFTMAX.run(softmax, hidden=True, seed=0)
    assert report.passed, report.message
    assert report.delegated == ("logsumexp",)


def _naive_softmax(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def _softmax_nan_on_masked_rows(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return e / e.sum(dim=dim, keepdim=True)


def test_the_visible_check_fails_overflow_and_nan_rows_on_every_seed():
    """The notebook asks for huge logits and an all −inf row: the visible check tries both, so a student learns
    of either mistake before grading (it used to pass both every time)."""
    for student, mistake in ((_naive_softmax, "exp without subtracting the maximum"),
                             (_softmax_nan_on_masked_rows, "NaN for an all −inf row")):
        assert_named(chapter.SOFTMAX, student, mistake, range(10))


def _mask_after_softmax(q, k, v, mask=None, *, return_weights=False):
    weights = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1)
    weights = weights if mask is None else weights * mask
    return (weights @ v, weights) if return_weights else weights @ v


def test_the_masked_attentions_failing_input_lists_its_heads():
    """q, k and v have a heads axis that the mask broadcasts over: the sizes above the printed tensors say how many."""
    report = chapter.MASKED_ATTENTION.run(_mask_after_softmax, reveal_fix=False)
    assert not report.passed and re.search(r"Smallest failing input \(B=\d+, H=2, T=\d+, S=\d+", report.message), \
        report.message


def _masked_attention_filled_with(fill: float):
    """A student's masked attention whose masked scores are ``fill`` and whose softmax has no guard for −inf rows."""
    def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (…, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, fill)
        e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
        weights = e / e.sum(dim=-1, keepdim=True)
        return (weights @ v, weights) if return_weights else weights @ v
    return scaled_dot_product_attention


def test_fully_masked_rows_are_named_by_the_visible_check_on_every_seed():
    """The notebook warns that a fully masked row must give zeros: NaN there, or -1e9's average of every value,
    passed the visible check and failed only when graded."""
    for fill, mistake in ((float("-inf"), "NaN for fully masked rows"),
                          (-1e9, "large negative instead of -inf (fully masked rows)")):
        assert_named_in_both_languages(chapter.MASKED_ATTENTION, _masked_attention_filled_with(fill), mistake, range(5))
