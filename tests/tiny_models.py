"""Small models the tests build in milliseconds: their shapes and wiring are under test, not what they learnt."""
from __future__ import annotations

import torch

from tfm_lab.tasks import DateTask
from tfm_ref import Transformer, TransformerConfig

__all__ = ["tiny_date_model"]


def tiny_date_model() -> tuple[Transformer, DateTask]:
    """An untrained date model, small, in eval mode, and its task."""
    torch.manual_seed(0)
    task = DateTask()
    config = TransformerConfig(vocab_size=len(task.vocab), d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                               n_decoder_layers=2, dropout=0.0)
    return Transformer(config).eval(), task
