"""Chapter 8 checks beyond tests/test_exercises.py: a block may use the student's own chapter 2 layer, the loss
honours another padding id, and beam search stays in log space."""
import torch

import tfm_ref
from autograde.exercises import ch08_encoder_decoder as chapter
from student_layers import StudentAttentionLayer


class _OwnMultiHeadAttention(StudentAttentionLayer):
    """A student's chapter 2 layer: its own projections, the head helpers and the attention chapter 2 gave."""

    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        q = tfm_ref.split_heads(self.q_proj(x), self.n_heads)
        k, v = (tfm_ref.repeat_kv(tfm_ref.split_heads(p(source), self.n_kv_heads), self.n_heads // self.n_kv_heads)
                for p in (self.k_proj, self.v_proj))
        out = tfm_ref.scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(tfm_ref.merge_heads(out))


class _Residual(torch.nn.Module):
    def __init__(self, norm, dropout, norm_first):
        super().__init__()
        self.norm, self.dropout, self.norm_first = norm, torch.nn.Dropout(dropout), norm_first

    def forward(self, x, sublayer):
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class _EncoderWithOwnAttention(torch.nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, *, norm_first=False):
        super().__init__()
        self.self_attn = _OwnMultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = tfm_ref.FeedForward(d_model, d_ff, dropout=dropout)
        self.attn_residual = _Residual(tfm_ref.LayerNorm(d_model), dropout, norm_first)
        self.ffn_residual = _Residual(tfm_ref.LayerNorm(d_model), dropout, norm_first)

    def forward(self, x, mask=None):
        x = self.attn_residual(x, lambda h: self.self_attn(h, mask=mask))
        return self.ffn_residual(x, self.ffn)


def test_an_encoder_block_on_the_students_own_chapter_2_layer_passes():
    report = chapter.ENCODER_BLOCK.run(_EncoderWithOwnAttention, hidden=True, seed=0)
    assert report.passed, report.message


def _loss_ignoring_id_0(logits, target, smoothing=0.1, ignore_index=0):
    return chapter.label_smoothed_cross_entropy(logits, target, smoothing, 0)


def test_a_loss_that_always_ignores_id_0_fails_on_another_padding_id():
    report = chapter.LABEL_SMOOTHING.run(_loss_ignoring_id_0, hidden=True, guarded=False, seed=0)
    assert "'ignore_index = V − 1, not 0' failed" in report.message


def _beam_in_probabilities(scores, log_probs):
    batch, k, vocab = log_probs.shape
    probs = (scores.exp()[:, :, None] * log_probs.exp()).reshape(batch, k * vocab)
    best, index = probs.topk(k, dim=-1)
    return best.log(), index // vocab, index % vocab


def test_a_beam_step_in_probability_space_fails_on_long_hypotheses():
    report = chapter.BEAM_STEP.run(_beam_in_probabilities, hidden=True, guarded=False, seed=0)
    assert not report.passed and "'long hypotheses: scores near −120" in report.message
