"""Helpers shared by the module (nn.Module) exercises of several chapters.

`functions_of` lists the functions of tfm_ref classes and modules an exercise allows as
building blocks (chapter 8's blocks use tfm_ref's attention, FFN and norms; its decoding
exercise drives a tfm_ref model).

`PerturbedModuleAdapter` is `ModuleAdapter` with random norm gains and biases: a freshly built
LayerNorm has γ = 1 and β = 0, so a student who applies γ and β in the wrong order, or uses
one block's norm in place of another's, would still match the reference. Perturbing them
(from the case's seeded RNG, before the weights are copied into the student's module) makes
such mistakes visible.

`built_without_dropout` makes the mistake of a module that ignores its ``dropout``, which the
cases in training mode (`autograde.adapters.TRAINING`) show; `dropout_rate` is the rate a case
builds with, also in eval mode (`WITH_DROPOUT`), where a dropout left on shows.
"""
from __future__ import annotations

import types
from collections.abc import Callable

import torch
from torch import nn

from ..adapters import AS_BUILT, TRAINING
from ..spec import ModuleAdapter

__all__ = ["PerturbedModuleAdapter", "built_without_dropout", "dropout_rate", "WITH_DROPOUT", "functions_of"]

WITH_DROPOUT = "with_dropout"
"""A case's flag: the module is built with dropout 0.3 and runs in eval mode, where nothing may drop
(``F.dropout(x, p)`` without ``training=self.training`` still does)."""


class PerturbedModuleAdapter(ModuleAdapter):
    """`ModuleAdapter` whose reference has every 1-D parameter (norm gains, biases) moved off its init,
    except in a case that checks the initial values (`AS_BUILT`)."""

    def reference(self, reference: type, dims, dtype: torch.dtype) -> nn.Module:
        module = super().reference(reference, dims, dtype)
        if dims.get(AS_BUILT):
            return module
        with torch.no_grad():
            for parameter in module.parameters():
                if parameter.dim() == 1:
                    parameter.add_(0.3 * torch.randn_like(parameter))  # the framework seeds the RNG per case
        return module


def dropout_rate(dims) -> float:
    """The dropout rate a case builds its modules with: 0.3 in training mode (`TRAINING`) and with
    `WITH_DROPOUT`, else 0."""
    return 0.3 if dims.get(TRAINING) or dims.get(WITH_DROPOUT) else 0.0


def built_without_dropout(build: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
    """``build`` with the dropout rate it is given not passed on: a module that ignores its ``dropout``
    (which only a case in training mode shows)."""
    return lambda *args, **kwargs: build(*args, **{**kwargs, "dropout": 0.0})


def functions_of(*owners: object) -> list[types.FunctionType]:
    """Every Python function of the given classes or modules (and of the classes a module
    defines): the tfm_ref building blocks an exercise lets the student call.

    A module's ``forward`` is reached through ``nn.Module.__call__``, from torch's frame, so the
    integrity guard needs it listed explicitly (as the ``allowed`` of an `Exercise`).
    """
    found: list[types.FunctionType] = []
    for owner in owners:
        for value in vars(owner).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property):
                found += [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
            elif isinstance(value, types.FunctionType):
                found.append(value)
            elif isinstance(owner, types.ModuleType) and isinstance(value, type) and value.__module__ == owner.__name__:
                found += functions_of(value)
    return found
