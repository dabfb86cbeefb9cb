import pytest
import torch

from tfm_ref import DecoderBlock, EncoderBlock, causal_mask, padding_mask


def gradient_norms_by_depth(norm_first: bool, depth: int = 12) -> torch.Tensor:
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(EncoderBlock(32, 4, 64, dropout=0.0, norm_first=norm_first) for _ in range(depth))
    x = torch.randn(8, 10, 32)
    for block in blocks:
        x = block(x)
    (x * torch.randn_like(x)).sum().backward()  # a loss that depends on every output direction
    return torch.stack([b.self_attn.q_proj.weight.grad.norm() for b in blocks])


def test_encoder_output_of_a_position_ignores_padded_positions():
    block = EncoderBlock(16, 4, 32, dropout=0.0).eval()
    x = torch.randn(1, 6, 16)
    mask = padding_mask([4], 6)[:, None, None, :]
    x2 = x.clone()
    x2[:, 4:] = torch.randn(1, 2, 16) * 50
    torch.testing.assert_close(block(x, mask)[:, :4], block(x2, mask)[:, :4])


def test_decoder_outputs_never_depend_on_future_tokens_checked_through_gradients():
    block = DecoderBlock(16, 4, 32, dropout=0.0, norm_first=True).eval()
    x = torch.randn(1, 6, 16, requires_grad=True)
    memory = torch.randn(1, 4, 16)
    block(x, memory, self_mask=causal_mask(6))[0, 3].sum().backward()
    assert torch.equal(x.grad[0, 4:], torch.zeros_like(x.grad[0, 4:]))
    assert x.grad[0, :4].abs().sum() > 0


def test_pre_norm_keeps_gradients_flowing_to_the_first_layers():
    # Post-Norm divides the gradient at every layer; Pre-Norm keeps an identity path
    post, pre = gradient_norms_by_depth(False), gradient_norms_by_depth(True)
    assert post[0] / post[-1] < pre[0] / pre[-1]


def test_decoder_only_block_rejects_memory_and_encoder_decoder_block_needs_it():
    with pytest.raises(ValueError, match="no cross-attention"):
        DecoderBlock(16, 4, 32, cross_attention=False)(torch.randn(1, 2, 16), torch.randn(1, 3, 16))
    with pytest.raises(ValueError, match="pass the encoder output as memory"):
        DecoderBlock(16, 4, 32)(torch.randn(1, 2, 16))


@pytest.mark.parametrize("kwargs, words", [
    (dict(norm="batchnorm"), "norm must be one of"),
    (dict(ffn="tanh"), "ffn must be one of"),
])
def test_bad_block_options_raise_a_named_error(kwargs, words):
    with pytest.raises(ValueError, match=words):
        EncoderBlock(16, 4, 32, **kwargs)
