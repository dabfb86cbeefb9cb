"""tfm_ref.beam_search: beam 1 is greedy; the cache changes nothing; a wider beam never scores lower."""
from __future__ import annotations

import pytest
import torch

from tfm_ref.beam_search import beam_search, sequence_log_prob
from tfm_ref.config import TransformerConfig
from tfm_ref.decoding import greedy_decode
from tfm_ref.masks import padding_mask
from tfm_ref.transformer import Transformer

BOS, EOS, VOCAB = 1, 2, 12


@pytest.fixture(scope="module")
def setup():
    """A random model with flat next-token distributions, where greedy's local choices are often not the best."""
    torch.manual_seed(0)
    config = TransformerConfig(VOCAB, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=2, d_ff=64,
                               dropout=0.0, max_len=32)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(0.5)  # flatter (tied) logits
    src = torch.randint(3, VOCAB, (24, 7))
    src_mask = padding_mask(torch.randint(3, 8, (24,)), 7)
    return model, src, src_mask


def test_beam_of_one_is_greedy_decoding(setup):
    model, src, src_mask = setup
    beam, _ = beam_search(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=1)
    greedy = greedy_decode(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10)
    assert torch.equal(beam, greedy)


def test_cached_beam_search_equals_uncached(setup):
    model, src, src_mask = setup
    cached = beam_search(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=3)
    uncached = beam_search(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=3, use_cache=False)
    assert torch.equal(cached[0], uncached[0])
    torch.testing.assert_close(cached[1], uncached[1], rtol=1e-4, atol=1e-4)


def test_returned_scores_are_the_sequences_log_probabilities(setup):
    model, src, src_mask = setup
    ids, scores = beam_search(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=4)
    recomputed = sequence_log_prob(model, src, src_mask, ids, bos_id=BOS, eos_id=EOS)
    torch.testing.assert_close(scores, recomputed, rtol=1e-4, atol=1e-4)


def test_wider_beam_never_scores_below_greedy_and_sometimes_above(setup):
    model, src, src_mask = setup
    greedy = greedy_decode(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10)
    greedy_score = sequence_log_prob(model, src, src_mask, greedy, bos_id=BOS, eos_id=EOS)
    _, beam_score = beam_search(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=5)
    assert (beam_score >= greedy_score - 1e-4).all()
    assert (beam_score > greedy_score + 1e-3).any(), "on some source the beam finds a likelier sequence"


def test_bad_beam_arguments_raise_value_errors(setup):
    model, src, src_mask = setup
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, src_mask, bos_id=BOS, eos_id=EOS, max_len=10, beam_size=0)
