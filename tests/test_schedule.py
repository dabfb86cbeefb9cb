"""tfm_ref.schedule: the 2017 learning-rate schedule and warmup-then-cosine, against their definitions."""
from __future__ import annotations

import pytest

from tfm_ref.schedule import noam_lr, warmup_cosine_lr


def test_noam_peaks_at_warmup_with_the_papers_value():
    # the base model: d_model 512, 4000 warmup steps; the peak is (512 · 4000)^−0.5 ≈ 7.0e-4
    assert noam_lr(4000, 512, 4000) == pytest.approx((512 * 4000) ** -0.5)
    assert max(noam_lr(s, 512, 4000) for s in range(1, 20000, 7)) <= noam_lr(4000, 512, 4000)


def test_noam_rises_linearly_then_decays_as_one_over_sqrt_step():
    assert noam_lr(1000, 512, 4000) / noam_lr(500, 512, 4000) == pytest.approx(2.0)
    assert noam_lr(16000, 512, 4000) / noam_lr(4000, 512, 4000) == pytest.approx(0.5)
    assert noam_lr(100, 2048, 4000) / noam_lr(100, 512, 4000) == pytest.approx(0.5)  # d_model^−0.5


def test_noam_counts_steps_from_one():
    with pytest.raises(ValueError, match="step counts from 1"):
        noam_lr(0, 512, 4000)


def test_warmup_cosine_rises_to_the_peak_then_falls_to_its_floor():
    lr = [warmup_cosine_lr(s, 1e-3, 10, 110, min_ratio=0.1) for s in range(120)]
    assert lr[0] == pytest.approx(1e-4) and lr[9] == pytest.approx(1e-3)
    assert lr[60] == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # halfway down the cosine
    assert lr[110] == pytest.approx(1e-4) and lr[119] == pytest.approx(1e-4)  # past the end: the floor
    assert all(a >= b for a, b in zip(lr[9:], lr[10:]))
