"""Chapter 3 checks beyond tests/test_exercises.py: a mask built another way passes; lengths given as a
list are checked without the causal mask too; a failing earlier function is shown with its diagnosis.
"""
import torch
from exercise_proofs import assert_named_in_both_languages

import tfm_ref

from autograde.exercises import ch03_masking as chapter


def test_a_causal_mask_from_position_comparisons_passes_unflagged():
    def causal_mask(n_q, n_k=None, device=None):
        n_k = n_q if n_k is None else n_k
        query, key = torch.arange(n_q, device=device), torch.arange(n_k, device=device)
        return query[:, None] + (n_k - n_q) >= key[None, :]  # (n_q, n_k)

    report = chapter.CAUSAL_MASK.run(causal_mask, hidden=True, seed=0)
    assert report.passed and not report.delegated, report.message


def test_lengths_as_a_list_are_checked_without_the_causal_mask_too():
    def attention_mask(lengths, max_len, causal=True):
        if causal:
            return tfm_ref.padding_mask(lengths, max_len)[:, None, None, :] & tfm_ref.causal_mask(max_len)
        keys = (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]  # a list has no [:, None]
        return keys.expand(-1, 1, max_len, max_len)

    assert chapter.ATTENTION_MASK.run(attention_mask, seed=0).passed
    report = chapter.ATTENTION_MASK.run(attention_mask, hidden=True, seed=0)
    assert "lengths as a Python list, causal=False" in report.message


def test_an_earlier_function_that_fails_is_shown_with_its_diagnosis():
    namespace = {"torch": torch, "causal_mask": tfm_ref.causal_mask}
    exec("def padding_mask(lengths, max_len):\n"
         "    return torch.arange(max_len)[None, :] <= torch.as_tensor(lengths)[:, None]\n"
         "def attention_mask(lengths, max_len, causal=True):\n"
         "    keys = padding_mask(lengths, max_len)[:, None, None, :]\n"
         "    return keys & causal_mask(max_len) if causal else keys.expand(-1, 1, max_len, max_len)\n", namespace)

    message = chapter.ATTENTION_MASK.run(namespace["attention_mask"], seed=0).message
    assert "Your `padding_mask` from an earlier exercise fails its own check" in message
    assert "    Likely mistake — off by one (<= instead of <)" in message


def test_the_visible_checks_try_a_list_of_lengths_and_int32_targets():
    """What the notebook promises (lengths as a list, the targets' dtype kept) is checked before grading too."""
    def padding_mask(lengths, max_len):
        return torch.arange(max_len)[None, :] < lengths[:, None]  # a list cannot be indexed with [:, None]

    def shift_right(targets, bos_id):
        bos = torch.full((targets.shape[0], 1), bos_id)  # int64, whatever the targets' dtype
        return torch.cat([bos, targets[:, :-1]], dim=1)

    def attention_mask(lengths, max_len, causal=True):
        keys = (torch.arange(max_len)[None, :] < lengths[:, None])[:, None, None, :]
        return keys & tfm_ref.causal_mask(max_len) if causal else keys.expand(-1, 1, max_len, max_len)

    for seed in range(5):
        report = chapter.PADDING_MASK.run(padding_mask, seed=seed)
        assert report.mistake == "lengths as a list not turned into a tensor", (seed, report.message)
        report = chapter.SHIFT_RIGHT.run(shift_right, seed=seed)
        assert report.mistake == "<bos> column of the wrong dtype", (seed, report.message)
        report = chapter.ATTENTION_MASK.run(attention_mask, seed=seed)
        assert "'lengths as a Python list' failed" in report.message, (seed, report.message)


def _causal_mask(offset_of=lambda n_q, n_k: n_k - n_q):
    def causal_mask(n_q, n_k=None, device=None):
        n_k = n_q if n_k is None else n_k
        return torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(diagonal=offset_of(n_q, n_k))
    return causal_mask


def _shift_right(bos_column=lambda targets, bos_id: targets.new_full((targets.shape[0], 1), bos_id)):
    def shift_right(targets, bos_id):
        return torch.cat([bos_column(targets, bos_id), targets[:, :-1]], dim=1)
    return shift_right


def test_a_triangle_shifted_the_wrong_way_and_a_float_bos_column_are_named_in_english_and_chinese():
    """A student audit found these failing with only "the output differs" or "the output has dtype …"."""
    assert chapter.CAUSAL_MASK.run(_causal_mask(), hidden=True, seed=0).passed
    assert_named_in_both_languages(chapter.CAUSAL_MASK, _causal_mask(lambda n_q, n_k: n_q - n_k),
                                   "triangle shifted the wrong way (n_q − n_k)", range(3))
    assert chapter.SHIFT_RIGHT.run(_shift_right(), hidden=True, seed=0).passed
    float_column = _shift_right(lambda targets, bos_id: torch.zeros(targets.shape[0], 1) + bos_id)  # float32
    assert_named_in_both_languages(chapter.SHIFT_RIGHT, float_column, "a float <bos> column: the ids become floats",
                                   range(3))
