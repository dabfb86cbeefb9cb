"""Chapter 2 checks beyond tests/test_exercises.py: repeat_interleave is off limits in repeat_kv, and a layer written from scratch passes.
"""
import math

import pytest
import torch

from autograde.exercises import ch02_multihead as chapter
from student_layers import StudentAttentionLayer


def test_repeat_kv_may_not_call_repeat_interleave():
    report = chapter.REPEAT_KV.run(lambda x, n_rep: x.repeat_interleave(n_rep, dim=1), hidden=True, seed=0)
    assert not report.passed
    assert "ForbiddenCall" in report.message and "repeat_interleave" in report.message


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


def test_a_layer_written_from_scratch_passes_under_the_guard():
    report = chapter.MULTIHEAD.run(_LayerFromScratch, hidden=True, seed=0)
    assert report.passed, report.message
