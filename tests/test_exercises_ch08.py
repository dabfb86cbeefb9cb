"""Chapter 8 checks beyond tests/test_exercises.py: a block may use the student's own chapter 2 layer, the loss
honours another padding id, and beam search stays in log space; beam steps and decoding loops written the way a
student writes them are named on every seed, where the catalogue's own versions could agree with a neighbour's."""
import dataclasses
import sys
import types

import pytest
import torch
from exercise_proofs import assert_named, assert_named_in_both_languages

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
    report = chapter.LABEL_SMOOTHING.run(_loss_ignoring_id_0, hidden=True, seed=0)
    assert "'ignore_index = V − 1, not 0' failed" in report.message


def _beam_in_probabilities(scores, log_probs):
    batch, k, vocab = log_probs.shape
    probs = (scores.exp()[:, :, None] * log_probs.exp()).reshape(batch, k * vocab)
    best, index = probs.topk(k, dim=-1)
    return best.log(), index // vocab, index % vocab


def test_a_beam_step_in_probability_space_fails_on_long_hypotheses():
    report = chapter.BEAM_STEP.run(_beam_in_probabilities, hidden=True, seed=0)
    assert not report.passed and "'long hypotheses: scores near −120" in report.message


def _beam(scores_of, parent_token, rank_by=None):
    """A student's beam step: candidates from ``scores_of(scores, log_probs)``, ranked by ``rank_by`` (default: the
    candidates), the flat index decoded by ``parent_token(index, K, V)``."""
    def beam_step(scores, log_probs):
        batch, k, vocab = log_probs.shape
        candidates = scores_of(scores, log_probs).reshape(batch, k * vocab)
        ranking = candidates if rank_by is None else rank_by(scores, log_probs).reshape(batch, k * vocab)
        _, index = ranking.topk(k, dim=-1)
        parent, token = parent_token(index, k, vocab)
        return candidates.gather(1, index), parent, token
    return beam_step


def _summed(scores, log_probs):
    return scores[:, :, None] + log_probs


def _by_v(index, k, vocab):
    return index // vocab, index % vocab


STUDENT_BEAM_STEPS = {
    "index // K, index % K": (_beam(_summed, lambda i, k, v: (i // k, i % k)), "flat index decoded with K instead of V"),
    "index % V, index // V": (_beam(_summed, lambda i, k, v: (i % v, i // v)), "parent and token swapped"),
    "softmax of log_probs added": (_beam(lambda s, lp: s[:, :, None] + lp.softmax(dim=-1), _by_v),
                                   "probabilities added to the log-probability score"),
    "ranked by log_probs, the sums returned": (_beam(_summed, _by_v, rank_by=lambda s, lp: lp),
                                               "ranked by the new token alone, the running score added afterwards"),
}



@pytest.mark.usefixtures("checks_on_one_thread")
@pytest.mark.parametrize("how", STUDENT_BEAM_STEPS)
def test_a_students_beam_step_is_named_on_every_seed(how):
    assert_named(chapter.BEAM_STEP, *STUDENT_BEAM_STEPS[how], range(5), hidden=True)


def _greedy(*, mask_in_encoder=True, mask_in_decoder=True, accumulate=True, steps=0, freeze=True, train=False,
            eos=True):
    """A student's greedy loop with the cache; ``steps``: how many more than max_len it runs; ``freeze``: a finished
    sequence's later tokens set to eos_id; ``train``: model.train() first, as a training loop does; ``eos=False``:
    eos_id never looked at (no `finished` flag, no early stop)."""
    @torch.no_grad()
    def greedy_decode(model, src, src_mask=None, *, bos_id, eos_id, max_len):
        if train:
            model.train()
        memory = model.encode(src, src_mask if mask_in_encoder else None)
        out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        cache = model.new_cache()
        for _ in range(max_len + steps):
            logits = model.decode(out[:, -1:], memory, src_mask if mask_in_decoder else None, cache)
            next_token = logits[:, -1].argmax(dim=-1)
            if not accumulate:
                finished = next_token == eos_id
            if freeze and eos:
                next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
            out = torch.cat([out, next_token[:, None]], dim=1)
            if accumulate:
                finished |= next_token == eos_id
            if eos and finished.all():
                break
        return out[:, 1:]
    return greedy_decode


STUDENT_GREEDY_LOOPS = {
    "src_mask in the encoder only": (_greedy(mask_in_decoder=False), "src_mask given to the encoder only"),
    "src_mask in the decoder only": (_greedy(mask_in_encoder=False), "src_mask given to the decoder only"),
    "finished = next_token == eos_id": (_greedy(accumulate=False),
                                        "`finished` overwritten each step instead of accumulated"),
    "range(max_len + 1)": (_greedy(steps=1), "one token too many (max_len + 1 steps)"),
}


@pytest.mark.usefixtures("checks_on_one_thread")
@pytest.mark.parametrize("how", STUDENT_GREEDY_LOOPS)
def test_a_students_greedy_loop_is_named_on_every_seed(how):
    """The checks' random models are drawn so that each use of src_mask changes the tokens, and an end token so that
    a `finished` flag that forgets shows; a case where no sequence ends shows one step too many."""
    assert_named(chapter.GREEDY, *STUDENT_GREEDY_LOOPS[how], range(5), hidden=True)


# ----------------------------------------------------------------------------- what the visible checks show

class _StudentResidual(torch.nn.Module):
    """``pre_norm_when``: the test that picks Pre-Norm, ``norm_first`` itself, or a wrong one (``not norm_first``:
    the two swapped; ``True``: norm_first ignored)."""

    def __init__(self, norm, dropout, norm_first, branch_dropout=True, pre_norm_when=lambda norm_first: norm_first):
        super().__init__()
        self.norm, self.dropout, self.norm_first = norm, torch.nn.Dropout(dropout), norm_first
        self.branch_dropout, self.pre_norm_when = branch_dropout, pre_norm_when

    def forward(self, x, sublayer):
        drop = self.dropout if self.branch_dropout else (lambda h: h)
        if self.pre_norm_when(self.norm_first):
            return x + drop(sublayer(self.norm(x)))
        return self.norm(x + drop(sublayer(x)))


def _student_encoder(*, branch_dropout=True, use_mask=True, pre_norm_when=lambda norm_first: norm_first):
    class EncoderBlock(torch.nn.Module):
        def __init__(self, d_model, n_heads, d_ff, dropout=0.1, *, norm_first=False):
            super().__init__()
            self.self_attn = tfm_ref.MultiHeadAttention(d_model, n_heads, dropout=dropout)
            self.ffn = tfm_ref.FeedForward(d_model, d_ff, dropout=dropout)
            self.attn_residual, self.ffn_residual = (
                _StudentResidual(tfm_ref.LayerNorm(d_model), dropout, norm_first, branch_dropout, pre_norm_when)
                for _ in range(2))

        def forward(self, x, mask=None):
            x = self.attn_residual(x, lambda h: self.self_attn(h, mask=mask if use_mask else None))
            return self.ffn_residual(x, self.ffn)
    return EncoderBlock


def _student_decoder(*, branch_dropout=True, pre_norm_when=lambda norm_first: norm_first, queries_from_memory=False,
                     memory_through_norm=False, cross_first=False):
    """``queries_from_memory``: self.cross_attn(memory, h), the arguments the wrong way round;
    ``memory_through_norm``: memory passed through the cross-attention's norm; ``cross_first``: the
    cross-attention sublayer before the self-attention one."""
    class DecoderBlock(torch.nn.Module):
        def __init__(self, d_model, n_heads, d_ff, dropout=0.1, *, norm_first=False):
            super().__init__()
            self.self_attn = tfm_ref.MultiHeadAttention(d_model, n_heads, dropout=dropout)
            self.cross_attn = tfm_ref.MultiHeadAttention(d_model, n_heads, dropout=dropout)
            self.ffn = tfm_ref.FeedForward(d_model, d_ff, dropout=dropout)
            self.self_residual, self.cross_residual, self.ffn_residual = (
                _StudentResidual(tfm_ref.LayerNorm(d_model), dropout, norm_first, branch_dropout, pre_norm_when)
                for _ in range(3))

        def forward(self, x, memory, self_mask=None, cross_mask=None):
            def attend_to_itself(x):
                return self.self_residual(x, lambda h: self.self_attn(h, mask=self_mask))

            def attend_to_source(x):
                context = self.cross_residual.norm(memory) if memory_through_norm else memory
                if queries_from_memory:
                    return self.cross_residual(x, lambda h: self.cross_attn(context, h, mask=cross_mask))
                return self.cross_residual(x, lambda h: self.cross_attn(h, context, mask=cross_mask))

            x = attend_to_itself(attend_to_source(x)) if cross_first else attend_to_source(attend_to_itself(x))
            return self.ffn_residual(x, self.ffn)
    return DecoderBlock


@pytest.mark.usefixtures("checks_on_one_thread")
def test_the_blocks_visible_checks_show_a_residual_branch_without_dropout_and_an_ignored_padding_mask():
    """Training mode is visible, and every visible batch has padding: a Residual without its dropout passed the
    visible checks every time, an encoder that ignores its mask on 6 % of draws (seeds 7, 60 and 67)."""
    assert chapter.ENCODER_BLOCK.run(_student_encoder(), hidden=True, seed=0).passed
    assert chapter.DECODER_BLOCK.run(_student_decoder(), hidden=True, seed=0).passed
    for seed in range(3):
        for exercise, student in ((chapter.ENCODER_BLOCK, _student_encoder(branch_dropout=False)),
                                  (chapter.DECODER_BLOCK, _student_decoder(branch_dropout=False))):
            report = exercise.run(student, seed=seed)
            assert report.mistake == "no dropout on the residual branch", (seed, report.message)
    assert_named(chapter.ENCODER_BLOCK, _student_encoder(use_mask=False), "padding mask ignored",
                 (*range(10), 7, 60, 67))


def _loss_by_hand(*, off=None, mean_over_all=False, log_probs_of=None):
    """A student's label-smoothed loss: ``off``: what the other classes get (default ε/V, the correct one
    1 − ε + ε/V), ``mean_over_all``: padding counted, ``log_probs_of``: how the log-probabilities are computed."""
    def label_smoothed_cross_entropy(logits, target, smoothing=0.1, ignore_index=0):
        n_classes = logits.shape[-1]
        log_probs = logits.log_softmax(dim=-1) if log_probs_of is None else log_probs_of(logits)
        if off is None:
            nll = -log_probs.gather(-1, target[..., None])[..., 0]
            loss = (1 - smoothing) * nll + smoothing * -log_probs.mean(dim=-1)
        else:
            q = torch.full_like(log_probs, off(smoothing, n_classes)).scatter(-1, target[..., None], 1 - smoothing)
            loss = -(q * log_probs).sum(-1)
        if mean_over_all:
            return loss.mean()
        real = target != ignore_index
        return (loss * real).sum() / real.sum()
    return label_smoothed_cross_entropy


def _log_of_exp_over_sum(logits):
    return torch.log(torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True))


def test_the_losss_visible_check_fails_another_smoothing_padding_counted_and_log_of_softmax_on_every_seed():
    """On random logits ε/(V − 1) and ε/V gave losses within the tolerance on 10 % of draws (seeds 21 and 72), a
    batch without padding hid the padding on 4 % (16, 74, 99), and log(exp/sum) passed every time."""
    assert chapter.LABEL_SMOOTHING.run(_loss_by_hand(), hidden=True, seed=0).passed
    students = ((_loss_by_hand(off=lambda eps, v: eps / (v - 1)), "ε/(V−1) on the other classes", (21, 72)),
                (_loss_by_hand(mean_over_all=True), "padding positions counted", (16, 74, 99)),
                (_loss_by_hand(log_probs_of=_log_of_exp_over_sum),
                 "log of exp(logits) / sum, without subtracting the maximum", ()))
    for student, mistake, seeds in students:
        assert_named(chapter.LABEL_SMOOTHING, student, mistake, (*range(10), *seeds))


def _beam_each_own_best(scores, log_probs):
    best, token = log_probs.max(dim=-1)  # the best token of each hypothesis
    new_scores, parent = (scores + best).sort(dim=-1, descending=True)
    return new_scores, parent, token.gather(1, parent)


@pytest.mark.usefixtures("checks_on_one_thread")
def test_a_beam_step_that_extends_each_hypothesis_by_its_own_best_token_fails_the_visible_check_on_every_seed():
    """On close scores the K best often come one per hypothesis: it passed on 24 % of draws (seeds 7, 12, 17 …)."""
    assert_named(chapter.BEAM_STEP, _beam_each_own_best, "each hypothesis extended by its own best token only",
                 (*range(20), 7, 12, 17, 23, 35, 38, 39, 55, 74, 76, 78, 80, 88, 90, 94, 97))


@pytest.mark.usefixtures("checks_on_one_thread")
def test_a_greedy_loop_that_does_not_freeze_finished_rows_fails_the_visible_check_on_every_seed():
    """The checks' models are drawn so that a row that has ended would go on: it passed on 4 % of draws (seeds 5,
    17, 36, 64, 96), where every row ended at the same step."""
    assert_named(chapter.GREEDY, _greedy(freeze=False), "finished sequences not padded with EOS",
                 (0, 1, 2, 5, 17, 36, 64, 96))


@pytest.mark.usefixtures("checks_on_one_thread")
def test_pre_and_post_norm_swapped_is_named_a_swap_and_norm_first_ignored_is_named_apart_from_it():
    """On one block a swapped `if not self.norm_first:` gives what norm_first ignored gives (a Post-Norm block
    normalising its inputs): it was named "norm_first ignored (always Pre-Norm)". The first visible case runs a
    Post-Norm and a Pre-Norm block side by side."""
    students = ((lambda norm_first: not norm_first, "Pre- and Post-Norm swapped"),
                (lambda norm_first: True, "norm_first ignored (always Pre-Norm)"),
                (lambda norm_first: False, "norm_first ignored (always Post-Norm)"))
    for pre_norm_when, mistake in students:
        assert_named(chapter.ENCODER_BLOCK, _student_encoder(pre_norm_when=pre_norm_when), mistake, range(3))
        assert_named(chapter.DECODER_BLOCK, _student_decoder(pre_norm_when=pre_norm_when), mistake, range(3))


@pytest.mark.usefixtures("checks_on_one_thread")
def test_cross_attention_with_memory_as_the_queries_is_named_on_a_case_with_t_not_equal_to_s():
    """Where T ≠ S, cross_attn(memory, h) fails at the cross mask; the failure names the mistake, on a small input
    with T ≠ S (the ladder had T = S only: the input was too large to print), whatever the Residual does."""
    t_not_s = next(case for case in chapter.DECODER_BLOCK.visible if "T ≠ S" in case.label)
    on_that_case = dataclasses.replace(chapter.DECODER_BLOCK, visible=[t_not_s])
    for pre_norm_when in (lambda norm_first: norm_first, lambda norm_first: not norm_first):
        student = _student_decoder(queries_from_memory=True, pre_norm_when=pre_norm_when)
        assert_named(on_that_case, student, "cross-attention's arguments swapped: queries from memory", range(3))
        message = on_that_case.run(student, seed=0).message
        assert "Smallest failing input (B=1, T=2, S=3, " in message and "too large to print" not in message, message
    assert_named(chapter.DECODER_BLOCK, _student_decoder(queries_from_memory=True),
                 "cross-attention's arguments swapped: queries from memory", range(3))


@pytest.mark.usefixtures("checks_on_one_thread")
def test_a_decoder_block_on_a_broken_residual_points_at_the_failing_encoder_block():
    """The notebook's DecoderBlock reuses the Residual written with the EncoderBlock; a broken one fails both."""
    notebook = types.ModuleType("a_students_notebook")
    notebook.__dict__.update(torch=torch, nn=torch.nn, MultiHeadAttention=tfm_ref.MultiHeadAttention,
                             FeedForward=tfm_ref.FeedForward, LayerNorm=tfm_ref.LayerNorm)
    exec(compile(STUDENT_BLOCKS.replace("if self.norm_first:", "if not self.norm_first:"), "<notebook>", "exec"),
         notebook.__dict__)
    sys.modules[notebook.__name__] = notebook
    try:
        message = chapter.DECODER_BLOCK.run(notebook.DecoderBlock, seed=0).message
    finally:
        del sys.modules[notebook.__name__]
    assert "Your `EncoderBlock` from an earlier exercise fails its own check" in message, message
    assert "    Likely mistake — Pre- and Post-Norm swapped" in message


STUDENT_BLOCKS = """
class Residual(nn.Module):
    def __init__(self, norm, dropout, norm_first):
        super().__init__()
        self.norm, self.dropout, self.norm_first = norm, nn.Dropout(dropout), norm_first

    def forward(self, x, sublayer):
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, *, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout=dropout)
        self.attn_residual = Residual(LayerNorm(d_model), dropout, norm_first)
        self.ffn_residual = Residual(LayerNorm(d_model), dropout, norm_first)

    def forward(self, x, mask=None):
        x = self.attn_residual(x, lambda h: self.self_attn(h, mask=mask))
        return self.ffn_residual(x, self.ffn)


class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, *, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout=dropout)
        self.self_residual = Residual(LayerNorm(d_model), dropout, norm_first)
        self.cross_residual = Residual(LayerNorm(d_model), dropout, norm_first)
        self.ffn_residual = Residual(LayerNorm(d_model), dropout, norm_first)

    def forward(self, x, memory, self_mask=None, cross_mask=None):
        x = self.self_residual(x, lambda h: self.self_attn(h, mask=self_mask))
        x = self.cross_residual(x, lambda h: self.cross_attn(h, memory, mask=cross_mask))
        return self.ffn_residual(x, self.ffn)
"""


@pytest.mark.usefixtures("checks_on_one_thread")
def test_a_greedy_loop_with_src_mask_in_the_decoder_only_or_dropout_on_fails_the_visible_check_on_every_seed():
    """src_mask left out of the encoder passed the visible checks on 7 % of draws (seed 40: the case where no row
    ends took the first model whose tokens varied, whatever the mask did there); model.train() was shown by a hidden
    case only, the visible models being built without dropout."""
    assert_named(chapter.GREEDY, _greedy(mask_in_encoder=False), "src_mask given to the decoder only",
                 (*range(5), 40))
    assert_named(chapter.GREEDY, _greedy(train=True), "dropout switched on while decoding", range(5))


@pytest.mark.usefixtures("checks_on_one_thread")
def test_a_greedy_loop_that_never_looks_at_eos_is_named_in_english_and_chinese_on_every_seed():
    """It was named "`finished` overwritten" (whose output it gives wherever no step ends every row at once), or only
    by its shape: the first visible case decodes one row, which ends before max_len and would go on after its end."""
    assert_named_in_both_languages(chapter.GREEDY, _greedy(eos=False), "eos_id ignored: no early stop and no padding",
                                   range(8))


def _loss_with_epsilon_fixed(logits, target, smoothing=0.1, ignore_index=0):
    """A student's loss that smooths with the paper's ε = 0.1 whatever it is given."""
    return tfm_ref.label_smoothed_cross_entropy(logits, target, 0.1, ignore_index)


def test_a_loss_that_ignores_its_smoothing_argument_is_named_by_the_visible_check_on_every_seed():
    """Every visible case had ε = 0.1, the default: a loss with ε = 0.1 written in passed until graded."""
    assert_named_in_both_languages(chapter.LABEL_SMOOTHING, _loss_with_epsilon_fixed,
                                   "ε fixed at 0.1 instead of the `smoothing` given", range(5))


@pytest.mark.usefixtures("checks_on_one_thread")
@pytest.mark.parametrize("how, mistake", [
    ({"memory_through_norm": True}, "memory normalised by the cross-attention's norm, Post-Norm too"),
    ({"cross_first": True}, "cross-attention before self-attention"),
], ids=["memory normalised", "cross first"])
def test_a_decoder_block_wired_in_the_wrong_order_or_normalising_memory_is_named_in_english_and_chinese(how, mistake):
    """A student audit found these failing with only "the output differs"."""
    assert_named_in_both_languages(chapter.DECODER_BLOCK, _student_decoder(**how), mistake, range(3))


def _student_loss(*, smoothing_of=lambda log_probs: -log_probs.mean(dim=-1)):
    def label_smoothed_cross_entropy(logits, target, smoothing=0.1, ignore_index=0):
        log_probs = logits.log_softmax(dim=-1)  # (B, T, V)
        nll = -log_probs.gather(-1, target[..., None])[..., 0]  # (B, T)
        loss = (1 - smoothing) * nll + smoothing * smoothing_of(log_probs)
        real = target != ignore_index
        return (loss * real).sum() / real.sum()
    return label_smoothed_cross_entropy


def _student_beam_step(*, parent_by=lambda k, vocab: vocab):
    def beam_step(scores, log_probs):
        batch, k, vocab = log_probs.shape
        best, index = (scores[:, :, None] + log_probs).reshape(batch, k * vocab).topk(k, dim=-1)
        return best, index // parent_by(k, vocab), index % vocab
    return beam_step


def test_a_smoothing_term_summed_over_the_classes_and_a_parent_decoded_with_k_are_named_in_english_and_chinese():
    """A student audit found these failing with only "the output is …, expected …" or "the parents differ"."""
    assert chapter.LABEL_SMOOTHING.run(_student_loss(), hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.LABEL_SMOOTHING, _student_loss(smoothing_of=lambda lp: -lp.sum(dim=-1)),
                                   "smoothing term summed over the classes, not averaged", range(3))
    assert chapter.BEAM_STEP.run(_student_beam_step(), hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.BEAM_STEP, _student_beam_step(parent_by=lambda k, vocab: k),
                                   "parent decoded with K instead of V (the token right)", range(3))
