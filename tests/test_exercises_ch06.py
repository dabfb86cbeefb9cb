"""Chapter 6 checks beyond tests/test_exercises.py: dropout is checked in eval and in training mode, and the
constructor's defaults are the notebook's; mistakes written the way a student writes them (from scratch, not as
subclasses of tfm_ref's modules) are named, on every seed, including those whose catalogue entry names two causes."""
import math

import pytest
import torch
import torch.nn.functional as F
from exercise_proofs import assert_named, assert_named_in_both_languages
from torch import nn

import tfm_ref
from autograde.exercises import ch06_feedforward as chapter


class _DropsInEvalToo(tfm_ref.FeedForward):
    def forward(self, x):
        hidden = tfm_ref.feedforward.ACTIVATIONS[self.activation](self.up_proj(x))
        return self.down_proj(F.dropout(hidden, self.dropout.p))  # no training=self.training


class _HandWrittenDropout(tfm_ref.FeedForward):
    def forward(self, x):
        hidden = tfm_ref.feedforward.ACTIVATIONS[self.activation](self.up_proj(x))
        if self.training:
            hidden = hidden * (torch.rand_like(hidden) >= self.dropout.p) / (1 - self.dropout.p)
        return self.down_proj(hidden)


class _SwiGLUWithBiasByDefault(tfm_ref.SwiGLU):
    def __init__(self, d_model, d_hidden, bias=True, dropout=0.0):
        super().__init__(d_model, d_hidden, bias=bias, dropout=dropout)


def test_dropout_left_on_in_eval_mode_fails_and_is_told_something_random_is_on():
    message = chapter.FEED_FORWARD.run(_DropsInEvalToo, hidden=True, seed=0).message
    assert "'eval mode, built with dropout=0.3: nothing drops' failed" in message
    assert "something random is still on" in message and "training=self.training" in message


def test_dropout_written_by_hand_is_told_the_training_case_needs_the_same_random_numbers():
    message = chapter.FEED_FORWARD.run(_HandWrittenDropout, hidden=True, seed=0).message
    assert "training mode" in message and "both sides draw the same random numbers" in message


def test_the_defaults_of_the_constructor_are_checked():
    message = chapter.SWIGLU.run(_SwiGLUWithBiasByDefault, hidden=True, seed=0).message
    assert "'built with the default arguments: SwiGLU(d_model, d_hidden)' failed" in message


def _student_ffn(activations: dict, forward=None, default_activation: str = "relu") -> type:
    """A student's own FeedForward: ``activations`` maps the `activation` argument to a function."""
    class FeedForward(nn.Module):
        def __init__(self, d_model, d_ff, activation=default_activation, dropout=0.0, bias=True):
            super().__init__()
            self.act = activations[activation]
            self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
            self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            if forward is not None:
                return forward(self, x)
            return self.down_proj(self.dropout(self.act(self.up_proj(x))))
    return FeedForward


_RIGHT = {"relu": F.relu, "gelu": F.gelu}

STUDENT_FFNS = {
    "nn.GELU(approximate='tanh')": (_student_ffn({"relu": nn.ReLU(), "gelu": nn.GELU(approximate="tanh")}),
                                    "tanh approximation of GELU"),
    "relu and gelu swapped": (_student_ffn({"relu": F.gelu, "gelu": F.relu}),
                              'GELU for activation="relu" (always GELU, or the two swapped)'),
    "always GELU": (_student_ffn({"relu": F.gelu, "gelu": F.gelu}),
                    'GELU for activation="relu" (always GELU, or the two swapped)'),
    "GELU by default": (_student_ffn(_RIGHT, default_activation="gelu"),
                        'GELU for activation="relu" (always GELU, or the two swapped)'),
    "x·σ(1.702x)": (_student_ffn({**_RIGHT, "gelu": lambda h: h * torch.sigmoid(1.702 * h)}),
                    "sigmoid approximation of GELU, x·σ(1.702x)"),
    "dropout on x": (_student_ffn(_RIGHT, lambda m, x: m.down_proj(m.act(m.up_proj(m.dropout(x))))),
                     "dropout on the input instead of the hidden layer"),
    "dropout before the activation": (_student_ffn(_RIGHT, lambda m, x: m.down_proj(m.act(m.dropout(m.up_proj(x))))),
                                      "dropout before the activation"),
}


@pytest.mark.parametrize("how", STUDENT_FFNS)
def test_a_students_own_feed_forward_is_named_on_every_seed(how):
    assert_named(chapter.FEED_FORWARD, *STUDENT_FFNS[how], range(3), hidden=True)


def _hidden_floored(d_ff, multiple_of=1):
    return (2 * d_ff // 3) // multiple_of * multiple_of


def _hidden_rounded_first(d_ff, multiple_of=1):
    return multiple_of * math.ceil(round(2 * d_ff / 3) / multiple_of)


def _hidden_nearest(d_ff, multiple_of=1):
    return multiple_of * round(2 * d_ff / 3 / multiple_of)


@pytest.mark.parametrize(("student", "mistake"), [
    (_hidden_floored, "rounded down to the multiple"),
    (_hidden_nearest, "rounded to the nearest multiple"),
    (_hidden_rounded_first, "rounded to a whole number (int or round) before rounding to the multiple"),
])
def test_rounding_down_and_rounding_to_the_nearest_multiple_are_told_apart_by_the_visible_checks(student, mistake):
    """At 2048 → 1536 both give 1280; the first visible case, 2000 → 2048, is right when rounded to the nearest."""
    report = chapter.HIDDEN_SIZE.run(student, seed=0)
    assert report.mistake == mistake, report.message


def _count_swiglu_like_llama(d_model, d_ff, kind="relu", bias=True):
    matrices = 3 if kind == "swiglu" else 2
    return matrices * d_model * d_ff + ((2 if kind == "swiglu" else 1) * d_ff + d_model if bias and kind != "swiglu"
                                        else 0)


def test_a_swiglu_counted_without_biases_is_not_told_it_forgot_every_bias():
    report = chapter.PARAMETER_COUNT.run(_count_swiglu_like_llama, hidden=True, seed=0)
    assert report.mistake == "SwiGLU counted without biases", report.message


def test_gelu_and_dropout_in_training_mode_are_visible():
    """A FeedForward with no dropout, with its dropout after down_proj, or with the tanh GELU passed the visible
    check (one ReLU case in eval mode) every time; and so did a SwiGLU's biases counted 3·d_ff."""
    no_dropout = _student_ffn(_RIGHT, lambda m, x: m.down_proj(m.act(m.up_proj(x))))
    dropout_after = _student_ffn(_RIGHT, lambda m, x: m.dropout(m.down_proj(m.act(m.up_proj(x)))))
    tanh_gelu = _student_ffn({**_RIGHT, "gelu": lambda h: F.gelu(h, approximate="tanh")})
    for student, mistake in ((no_dropout, "dropout argument ignored"),
                             (dropout_after, "dropout on the output instead of the hidden layer"),
                             (tanh_gelu, "tanh approximation of GELU")):
        assert_named(chapter.FEED_FORWARD, student, mistake, range(5))

    def count_biases_three_d_ff(d_model, d_ff, kind="relu", bias=True):
        if kind == "swiglu":
            return 3 * d_model * d_ff + (3 * d_ff if bias else 0)
        return 2 * d_model * d_ff + (d_ff + d_model if bias else 0)

    report = chapter.PARAMETER_COUNT.run(count_biases_three_d_ff, seed=0)
    assert report.mistake == "biases sized by the hidden width only", report.message


def _count(biases=lambda d_model, d_ff, up_maps: up_maps * d_ff + d_model):
    def ffn_parameter_count(d_model, d_ff, kind="relu", bias=True):
        up_maps = 2 if kind == "swiglu" else 1  # up_proj, and gate_proj for SwiGLU
        return (up_maps + 1) * d_model * d_ff + (biases(d_model, d_ff, up_maps) if bias else 0)
    return ffn_parameter_count


def test_a_count_with_down_proj_s_bias_only_is_named_in_english_and_chinese():
    """A student audit found this failing with only "the output is 14, expected 17"."""
    assert chapter.PARAMETER_COUNT.run(_count(), hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.PARAMETER_COUNT, _count(lambda d_model, d_ff, up_maps: d_model),
                                   "only down_proj's bias counted", range(3))
