"""Chapter 6 checks beyond tests/test_exercises.py: dropout is checked in eval and in training mode, and the
constructor's defaults are the notebook's."""
import torch
import torch.nn.functional as F

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
    message = chapter.FEED_FORWARD.run(_DropsInEvalToo, hidden=True, guarded=False, seed=0).message
    assert "'eval mode, built with dropout=0.3: nothing drops' failed" in message
    assert "something random is still on" in message and "training=self.training" in message


def test_dropout_written_by_hand_is_told_the_training_case_needs_the_same_random_numbers():
    message = chapter.FEED_FORWARD.run(_HandWrittenDropout, hidden=True, guarded=False, seed=0).message
    assert "training mode" in message and "both sides draw the same random numbers" in message


def test_the_defaults_of_the_constructor_are_checked():
    message = chapter.SWIGLU.run(_SwiGLUWithBiasByDefault, hidden=True, guarded=False, seed=0).message
    assert "'built with the default arguments: SwiGLU(d_model, d_hidden)' failed" in message
