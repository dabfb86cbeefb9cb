import pytest
import torch
from torch import nn

from tfm_ref import DecoderBlock, EncoderBlock, EncoderDecoderCore, causal_mask, from_torch, padding_mask

D, H, F = 16, 4, 32


def randomise_norms(module: nn.Module) -> nn.Module:
    # fresh LayerNorms are the identity map: give them weights so a mistake would show
    for m in module.modules():
        if isinstance(m, nn.LayerNorm):
            nn.init.normal_(m.weight), nn.init.normal_(m.bias)
    return module.eval()


LAYER_OPTIONS = [dict(norm_first=nf, activation=act) for nf in (False, True) for act in ("relu", "gelu")]


@pytest.mark.parametrize("options", LAYER_OPTIONS)
def test_encoder_block_equals_nn_transformer_encoder_layer(options):
    ref = randomise_norms(nn.TransformerEncoderLayer(D, H, F, batch_first=True, **options))
    ours = from_torch(ref)
    assert isinstance(ours, EncoderBlock)
    x = torch.randn(3, 6, D)
    keep = padding_mask([6, 4, 1], 6)
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(ours(x, mask=keep[:, None, None, :]), ref(x, src_key_padding_mask=~keep))


@pytest.mark.parametrize("options", LAYER_OPTIONS)
def test_decoder_block_equals_nn_transformer_decoder_layer(options):
    ref = randomise_norms(nn.TransformerDecoderLayer(D, H, F, batch_first=True, **options))
    ours = from_torch(ref)
    assert isinstance(ours, DecoderBlock)
    x, memory = torch.randn(2, 5, D), torch.randn(2, 7, D)
    causal = causal_mask(5)
    keep = padding_mask([7, 3], 7)
    expected = ref(x, memory, tgt_mask=~causal, memory_key_padding_mask=~keep)
    got = ours(x, memory, self_mask=causal, cross_mask=keep[:, None, None, :])
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_core_equals_nn_transformer(norm_first, activation):
    ref = randomise_norms(nn.Transformer(D, H, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=F,
                                         batch_first=True, norm_first=norm_first, activation=activation))
    core = from_torch(ref)
    assert isinstance(core, EncoderDecoderCore)
    src, tgt = torch.randn(2, 7, D), torch.randn(2, 5, D)
    causal = causal_mask(5)
    expected = ref(src, tgt, tgt_mask=~causal)
    torch.testing.assert_close(core(src, tgt, tgt_mask=causal), expected)


def test_from_torch_keeps_the_training_mode():
    ref = nn.TransformerEncoderLayer(D, H, F, batch_first=True)
    assert from_torch(ref).training
    assert not from_torch(ref.eval()).training


@pytest.mark.parametrize("module, words", [
    (nn.MultiheadAttention(D, H), "batch_first=True"),
    (nn.TransformerEncoderLayer(D, H, F), "batch_first=True"),
    (nn.Linear(3, 3), "from_torch converts"),
    (nn.MultiheadAttention(D, H, kdim=8, vdim=8, batch_first=True), "kdim"),
])
def test_unsupported_modules_raise_a_named_error(module, words):
    with pytest.raises(ValueError, match=words):
        from_torch(module)
