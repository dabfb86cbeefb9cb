"""tfm_widgets/attention.py: the attention calculator computes what chapter 1 says."""
from __future__ import annotations

import math

import pytest
import torch

from tfm_ref import scaled_dot_product_attention
from tfm_widgets.attention import (NOTES_EXAMPLE, attention_explorer, attention_steps, parse_matrix,
                                       saturation_curve)


def _notes_steps(**kwargs):
    return attention_steps(*(parse_matrix(NOTES_EXAMPLE[k]) for k in ("X", "W_Q", "W_K", "W_V")), **kwargs)


def test_parse_matrix_reads_rows_and_rejects_ragged_or_non_numbers():
    assert parse_matrix("1 2; 3,4").tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="same number"):
        parse_matrix("1 2; 3")
    with pytest.raises(ValueError, match="not a number"):
        parse_matrix("1 x")
    with pytest.raises(ValueError, match="empty"):
        parse_matrix(" ; ")


def test_steps_of_the_notes_example_match_a_direct_computation():
    steps = _notes_steps()
    x = parse_matrix(NOTES_EXAMPLE["X"])
    q = x @ parse_matrix(NOTES_EXAMPLE["W_Q"])
    k = x @ parse_matrix(NOTES_EXAMPLE["W_K"])
    assert torch.equal(steps["Q"], q) and torch.equal(steps["K"], k)
    weights = torch.softmax(q @ k.T / math.sqrt(2), dim=-1)
    assert torch.allclose(steps["weights"], weights)
    assert torch.allclose(steps["output"], weights @ steps["V"])
    assert torch.allclose(steps["weights"].sum(-1), torch.ones(2, dtype=torch.float64))


def test_a_lower_temperature_sharpens_the_weights():
    flat, sharp = _notes_steps(score_multiplier=0.1), _notes_steps(score_multiplier=3.0)
    assert sharp["weights"].max() > flat["weights"].max()


def test_a_student_function_is_the_one_called():
    calls = []

    def student(q, k, v, return_weights=False):
        calls.append(q.shape)
        return scaled_dot_product_attention(q, k, v, return_weights=return_weights)

    _notes_steps(fn=student)
    attention_explorer(fn=student)
    assert len(calls) >= 2


def test_shapes_that_do_not_chain_are_a_value_error():
    with pytest.raises(ValueError, match="rows"):
        attention_steps(torch.ones(2, 4), torch.ones(3, 2), torch.ones(4, 2), torch.ones(4, 2))


def test_without_scaling_the_softmax_saturates_as_d_k_grows():
    assert saturation_curve(1024, scaled=False).max() > 0.9
    assert saturation_curve(1024, scaled=True).max() < 0.9
