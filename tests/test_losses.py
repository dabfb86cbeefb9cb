"""tfm_ref.losses: label-smoothed cross-entropy against its definition, written out."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tfm_ref.losses import label_smoothed_cross_entropy


def _by_definition(logits, target, smoothing, ignore_index):
    """−Σ target_v · log p_v against (1 − ε)·one-hot + ε/V, averaged over the positions not ignored."""
    n_classes = logits.shape[-1]
    smoothed = torch.full_like(logits, smoothing / n_classes)
    smoothed.scatter_(-1, target.clamp(min=0)[..., None], 1 - smoothing + smoothing / n_classes)
    per_position = -(smoothed * logits.log_softmax(-1)).sum(-1)  # (B, T)
    scored = target != ignore_index
    return per_position[scored].mean()


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_matches_the_definition_and_ignores_padding(smoothing):
    logits = torch.randn(3, 5, 7, dtype=torch.float64)
    target = torch.randint(1, 7, (3, 5))
    target[1, 3:] = 0  # padding
    expected = _by_definition(logits, target, smoothing, 0)
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, target, smoothing), expected)


def test_sum_is_the_mean_times_the_scored_positions():
    logits, target = torch.randn(2, 4, 5), torch.randint(0, 5, (2, 4))
    target[0, 0] = -100
    mean = label_smoothed_cross_entropy(logits, target, 0.1, -100)
    total = label_smoothed_cross_entropy(logits, target, 0.1, -100, reduction="sum")
    torch.testing.assert_close(total, mean * 7)


def test_without_smoothing_it_is_plain_cross_entropy():
    logits, target = torch.randn(2, 4, 5), torch.randint(0, 5, (2, 4))
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, target, 0.0, -100),
                               F.cross_entropy(logits.flatten(0, 1), target.flatten()))
