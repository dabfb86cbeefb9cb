"""The models the checks send into the sandbox: an untrained `tfm_ref.Transformer` for decoding and training
exercises (chapters 8 and 10), registered to travel as config and state dict (`notebook_sandbox.wire`). The runner
imports it only once the grader has sent tfm_ref's model code (`autograde.sandbox_tree`).
"""
from __future__ import annotations

import dataclasses

from tfm_ref.config import TransformerConfig
from tfm_ref.transformer import Transformer

from . import wire

__all__ = ["RandomTransformer", "CacheOnlyTransformer", "MODEL_SOURCES"]

MODEL_SOURCES = ("tfm_ref.blocks", "tfm_ref.transformer")
"""The tfm_ref modules that hold what these models are made of, in the order they are loaded."""


class RandomTransformer(Transformer):
    """The checks' untrained model; its repr is one line, so a failure message stays readable."""

    def __repr__(self) -> str:
        c = self.config
        return (f"<a random tfm_ref.Transformer: d_model={c.d_model}, {c.n_encoder_layers} encoder + "
                f"{c.n_decoder_layers} decoder layers, vocabulary {c.vocab_size}>")


class CacheOnlyTransformer(RandomTransformer):
    """A Transformer that refuses to decode without the KV cache, one token per step."""

    def decode(self, tgt, memory, src_mask=None, cache=None):
        if cache is None or tgt.shape[1] != 1:
            raise ValueError("this check's model decodes only with a KV cache, one new token per call: "
                             "cache = model.new_cache(), then model.decode(out[:, -1:], memory, src_mask, cache)")
        return super().decode(tgt, memory, src_mask, cache)


for _model_class in (RandomTransformer, CacheOnlyTransformer):
    wire.register_module(_model_class, lambda model: {"config": dataclasses.asdict(model.config)},
                         lambda config, cls=_model_class: cls(TransformerConfig(**config)))
