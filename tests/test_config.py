import dataclasses

import pytest

from tfm_ref import TransformerConfig


def test_defaults_are_the_2017_base_model():
    c = TransformerConfig(vocab_size=37000)
    assert (c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff, c.dropout) == (512, 8, 6, 6, 2048, 0.1)
    assert (c.norm, c.norm_first, c.ffn, c.positional, c.tie_embeddings) == ("layernorm", False, "relu", "sinusoidal", True)
    assert c.kv_heads == 8 and c.head_dim == 64


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TransformerConfig(vocab_size=10).d_model = 8


@pytest.mark.parametrize("kwargs, words", [
    (dict(d_model=100, n_heads=8), r"d_model \(100\) is not divisible by n_heads \(8\)"),
    (dict(n_kv_heads=3), r"n_heads \(8\) is not divisible by n_kv_heads \(3\)"),
    (dict(n_kv_heads=0), "n_kv_heads must be a positive integer"),
    (dict(norm="batchnorm"), "norm must be one of"),
    (dict(ffn="tanh"), "ffn must be one of"),
    (dict(positional="alibi"), "positional must be one of"),
    (dict(d_model=9, n_heads=3, positional="sinusoidal"), "even d_model"),
    (dict(d_model=12, n_heads=4, positional="rope"), "even head width"),
    (dict(dropout=1.0), "dropout"),
    (dict(vocab_size=0), "vocab_size must be a positive integer"),
    (dict(n_encoder_layers=-1), "n_encoder_layers"),
    (dict(attn_impl="flash"), "attn_impl"),
])
def test_invalid_configs_raise_a_named_error(kwargs, words):
    kwargs = {"vocab_size": 100, **kwargs}
    with pytest.raises(ValueError, match=words):
        TransformerConfig(**kwargs)
