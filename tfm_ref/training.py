"""The reference training step and loop of the capstone (chapter 10): teacher forcing, label smoothing, the 2017
schedule, and Adam as the paper sets it (§5.3). Larger runs, with evaluation and checkpoints: `tfm_lab.train`.

Shapes: B batch · S source positions · T target positions · V vocabulary.
"""
from __future__ import annotations

import torch
from torch import nn

from .losses import label_smoothed_cross_entropy
from .schedule import noam_lr
from .tokens import PAD_ID

__all__ = ["train_step", "fit", "PAPER_ADAM"]

PAPER_ADAM = dict(betas=(0.9, 0.98), eps=1e-9)  # Vaswani et al. 2017, §5.3


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict, step: int, *, d_model: int,
               warmup: int, factor: float = 1.0, smoothing: float = 0.1) -> tuple[float, float]:
    """One step of teacher-forced training; ``step`` counts the steps before it (0 for the first).

    batch: ``src`` (B, S) ids, ``src_mask`` (B, S) bool, ``tgt`` (B, T + 1) = BOS, the answer, EOS, PAD….
    Returns the loss and the learning rate of this step.
    """
    model.train()
    inp, target = batch["tgt"][:, :-1], batch["tgt"][:, 1:]  # (B, T) each: BOS first, and one position ahead
    logits = model(batch["src"], inp, batch["src_mask"])  # (B, T, V)
    loss = label_smoothed_cross_entropy(logits, target, smoothing, PAD_ID)
    lr = factor * noam_lr(step + 1, d_model, warmup)  # the paper counts steps from 1
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), lr


def fit(model: nn.Module, batches, *, d_model: int, warmup: int, factor: float = 1.0,
        smoothing: float = 0.1) -> list[float]:
    """Train ``model`` with one `train_step` per batch (steps 0, 1, …) under Adam with the paper's
    β = (0.9, 0.98) and ε = 1e-9; returns the loss of every step."""
    optimizer = torch.optim.Adam(model.parameters(), **PAPER_ADAM)
    return [train_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor,
                       smoothing=smoothing)[0] for step, batch in enumerate(batches)]
