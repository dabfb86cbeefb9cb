"""Drivers: what a check compares where the exercise is a step of a loop (chapter 10's ``train_step`` and
``fit``): the same loop around the function under test on both sides, returning plain tensors and words.
The sandbox runs one by name (`notebook_sandbox.building`'s ``{"kind": "driver"}``); it holds no answer.
"""
from __future__ import annotations

import copy

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from .display import brief
from .evaluation import CheckFailed
from .words import _

__all__ = ["DRIVERS"]


def _batches(src: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor) -> list[dict]:
    """Stacked (K, B, …) tensors → K batches."""
    return [{"src": s, "src_mask": m, "tgt": t} for s, m, t in zip(src, src_mask, tgt)]


def train_steps(step_fn):
    """What the check compares: ``step_fn`` on consecutive batches of a copy of the model, with SGD at rate 1.0
    (the step sets its own) → (losses, learning rates, update sizes ‖Δθ‖) per step; dropout masks are seeded alike."""
    def steps(model, src, src_mask, tgt, *, first_step, d_model, warmup, factor, smoothing):
        model = copy.deepcopy(model)  # the check's model is an input: never train it in place
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        rows = []
        for i, batch in enumerate(_batches(src, src_mask, tgt)):
            before = torch.cat([p.detach().flatten() for p in model.parameters()])
            result = step_fn(model, optimizer, batch, first_step + i, d_model=d_model, warmup=warmup,
                             factor=factor, smoothing=smoothing)
            if not isinstance(result, tuple) or len(result) != 2:
                raise CheckFailed(_("train_step should return (loss, lr), got {type} {value}").format(
                    type=type(result).__name__, value=brief(result)))
            if type(result[0]) is not float:
                got = brief(result[0]) if torch.is_tensor(result[0]) else f"{type(result[0]).__name__} {result[0]!r}"
                raise CheckFailed(_("train_step should return the loss as a Python float (loss.item()), got {got}: "
                                    "fit keeps every step's loss, and a tensor there can hold on to its step's "
                                    "graph").format(got=got))
            after = torch.cat([p.detach().flatten() for p in model.parameters()])
            loss, lr = result[0], float(result[1])
            rows.append((loss, lr, float((after - before).norm())))
        losses, rates, updates = zip(*rows)
        return torch.tensor(losses), torch.tensor(rates), torch.tensor(updates)
    return steps


def _optimizer_settings(optimizer: torch.optim.Optimizer) -> str:
    """``Adam(betas=(0.9, 0.98), eps=1e-09, weight_decay=0)``: what the rate schedule leaves alone."""
    group = optimizer.param_groups[0]
    shown = ", ".join(f"{key}={group[key]!r}" for key in ("betas", "eps", "weight_decay") if key in group)
    return f"{type(optimizer).__name__}({shown})"


def fit_losses(fit_fn):
    """What the check compares: ``fit_fn``'s losses on a copy of the model, and its optimizer in words (ε or a
    weight decay rarely shows in a few dozen losses)."""
    def losses(model, src, src_mask, tgt, *, d_model, warmup, factor, smoothing):
        stepped, model = [], copy.deepcopy(model)
        forwards = []  # one entry per forward pass of the model: a train_step on a batch
        model.register_forward_pre_hook(lambda module, args: forwards.append(None))

        def one_at_a_time(batches):  # batch k is asked for after k batches were trained on, as the full run expects
            for k, batch in enumerate(batches):
                if len(forwards) < k:
                    raise CheckFailed(_("fit asked for batch {k} before it trained on batch {previous}: take the "
                                        "batches one at a time, each trained on before the next is asked for (for "
                                        "step, batch in enumerate(batches): …), not list(batches) first; the full run "
                                        "keeps its checkpoints as the batches are asked for").format(k=k, previous=k - 1))
                yield batch

        hook = register_optimizer_step_pre_hook(
            lambda optimizer, args, kwargs: stepped.append(_optimizer_settings(optimizer)))
        stream = one_at_a_time(_batches(src, src_mask, tgt))
        try:
            history = fit_fn(model, stream, d_model=d_model, warmup=warmup, factor=factor, smoothing=smoothing)
        finally:
            hook.remove()
        if not isinstance(history, (list, tuple)) or len(history) != len(src) \
                or not all(isinstance(loss, (int, float)) or torch.is_tensor(loss) and loss.numel() == 1
                           for loss in history):
            raise CheckFailed(_("fit should return a list of {n} losses, one number per step; got {type} {value}").format(
                n=len(src), type=type(history).__name__, value=brief(history)))
        per_step = torch.tensor([float(torch.as_tensor(loss).detach()) for loss in history])  # (K,)
        return per_step, " then ".join(dict.fromkeys(stepped)) or "none: no step was taken"
    return losses


DRIVERS = {"train_steps": train_steps, "fit_losses": fit_losses}
