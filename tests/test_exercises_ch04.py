"""Chapter 4 checks beyond tests/test_exercises.py: the given helpers may be used.
"""

import tfm_ref
from autograde.exercises import ch04_cross_attention as chapter


def test_the_given_chapter_1_attention_may_be_used():
    def cross_attention(x, memory, w_q, w_k, w_v, src_mask=None):
        mask = None if src_mask is None else src_mask[:, None, :]  # (B, 1, S)
        return tfm_ref.scaled_dot_product_attention(x @ w_q, memory @ w_k, memory @ w_v, mask, return_weights=True)

    report = chapter.CROSS_ATTENTION.run(cross_attention, hidden=True, seed=0)
    assert report.passed, report.message
