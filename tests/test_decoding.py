import pytest
import torch

from tfm_ref import DecoderOnlyLM, Transformer, TransformerConfig, greedy_decode, lm_generate, padding_mask

SMALL = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=40)
VARIANTS = [{}, dict(norm="rmsnorm", norm_first=True, ffn="swiglu", positional="rope", n_kv_heads=2, bias=False),
            dict(positional="learned", n_kv_heads=1)]


def uncached_reference(model, src, src_mask, bos_id, max_len):
    """Recompute the whole prefix with a plain forward pass at every step."""
    out = torch.full((src.shape[0], 1), bos_id)
    for _ in range(max_len):
        out = torch.cat([out, model(src, out, src_mask)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return out[:, 1:]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_greedy_decoding_equals_uncached(variant):
    model = Transformer(TransformerConfig(vocab_size=30, **{**SMALL, **variant})).eval()
    src = torch.randint(3, 30, (3, 9))
    src_mask = padding_mask([9, 5, 2], 9)
    cached = greedy_decode(model, src, src_mask, bos_id=1, eos_id=99, max_len=12)  # eos never produced
    uncached = greedy_decode(model, src, src_mask, bos_id=1, eos_id=99, max_len=12, use_cache=False)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached, uncached_reference(model, src, src_mask, 1, 12))


def test_cached_step_logits_equal_full_forward_logits():
    model = Transformer(TransformerConfig(vocab_size=30, **VARIANTS[1], **{k: v for k, v in SMALL.items()})).eval()
    src, tgt = torch.randint(3, 30, (2, 6)), torch.randint(3, 30, (2, 7))
    memory = model.encode(src)
    cache = model.new_cache()
    steps = torch.cat([model.decode(tgt[:, t : t + 1], memory, cache=cache) for t in range(7)], dim=1)
    torch.testing.assert_close(steps, model(src, tgt), atol=1e-5, rtol=1e-5)


def test_greedy_decoding_stops_at_eos_and_pads_with_it():
    model = Transformer(TransformerConfig(vocab_size=30, **SMALL)).eval()
    src = torch.randint(3, 30, (4, 5))
    free = greedy_decode(model, src, bos_id=1, eos_id=99, max_len=6)
    eos = free[0, -1].item()  # pretend the last token row 0 emits is EOS
    out = greedy_decode(model, src, bos_id=1, eos_id=eos, max_len=6)
    ended = (out == eos).cumsum(1) > 0
    assert torch.equal(out[ended], torch.full_like(out[ended], eos))
    assert (out[0] == eos).any()
    if ended[:, -1].all():  # every row ended: decoding stopped at the last row's first EOS
        assert out.shape[1] == (~ended).sum(1).max().item() + 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_lm_generation_equals_uncached(variant):
    model = DecoderOnlyLM(TransformerConfig(vocab_size=30, **{**SMALL, **variant})).eval()
    prompt = torch.randint(0, 30, (2, 5))
    assert torch.equal(lm_generate(model, prompt, 10), lm_generate(model, prompt, 10, use_cache=False))


def test_decoding_past_max_len_raises_a_named_error():
    model = Transformer(TransformerConfig(vocab_size=30, **SMALL)).eval()
    with pytest.raises(ValueError, match="longer than max_len"):
        greedy_decode(model, torch.randint(3, 30, (1, 5)), bos_id=1, eos_id=99, max_len=50)
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        greedy_decode(model, torch.randint(3, 30, (1, 5)), bos_id=1, eos_id=99, max_len=0)
