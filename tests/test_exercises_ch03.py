"""Chapter 3 checks beyond tests/test_exercises.py: a mask built another way passes.
"""
import torch

from autograde.exercises import ch03_masking as chapter


def test_a_causal_mask_from_position_comparisons_passes_under_the_guard():
    def causal_mask(n_q, n_k=None, device=None):
        n_k = n_q if n_k is None else n_k
        return torch.arange(n_q)[:, None] + (n_k - n_q) >= torch.arange(n_k)[None, :]  # (n_q, n_k)

    report = chapter.CAUSAL_MASK.run(causal_mask, hidden=True, seed=0)
    assert report.passed, report.message
