"""What the chapters' catalogues share: one module they all import, so that no catalogue reaches into another's.

Inputs: `random_qkv` draws the queries, keys and values of the attention exercises (chapters 1 and 9).

Mistakes made in several chapters: `repeat_tiled`, K/V heads tiled instead of repeated in place (chapters 2
and 9); the `residual_*` wirings of a residual sublayer (chapter 7's exercise, chapter 8's blocks), each
``(x, sublayer, norm, norm_first) -> output``.

Module exercises (chapters 6, 7, 8 and 10): `functions_of` lists the functions of tfm_ref classes and modules an
exercise allows as building blocks; `PerturbedModuleAdapter` is `ModuleAdapter` with random norm gains and
biases (a freshly built LayerNorm has γ = 1 and β = 0, where γ and β applied in the wrong order, or one block's
norm used for another's, would still match the reference); `built_without_dropout` makes the mistake of a module
that ignores its ``dropout``, which cases in training mode (`autograde.adapters.TRAINING`) show; `dropout_rate`
is the rate a case builds with, also in eval mode (`WITH_DROPOUT`), where a dropout left on shows.
"""
from __future__ import annotations

import types
from collections.abc import Callable

import torch
from torch import nn

from notebook_sandbox.inputs import randn

from ..adapters import AS_BUILT, TRAINING
from ..spec import ModuleAdapter

__all__ = ["PerturbedModuleAdapter", "built_without_dropout", "dropout_rate", "WITH_DROPOUT", "functions_of",
           "random_qkv", "repeat_tiled", "residual_always_post", "residual_always_pre", "residual_from_normalised",
           "residual_norm_sublayer_only", "residual_no_residual"]

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



# --------------------------------------------------------------------------- inputs and mistakes of several chapters

def random_qkv(gen: torch.Generator, dims, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (B, [H,] T, Dk), k (B, [H,] S, Dk), v (B, [H,] S, Dv), with a head axis where ``dims`` has H."""
    batch = (dims["B"], dims["H"]) if "H" in dims else (dims["B"],)
    q = randn(gen, *batch, dims["T"], dims["Dk"], dtype=dtype)
    k = randn(gen, *batch, dims["S"], dims["Dk"], dtype=dtype)
    v = randn(gen, *batch, dims["S"], dims["Dv"], dtype=dtype)
    return q, k, v


def repeat_tiled(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, G, S, Dh) → (B, G·n_rep, S, Dh) tiled: query head i gets KV head i % G (the mistake; i // n_rep is right)."""
    return x.repeat(1, n_rep, 1, 1)


def residual_always_post(x, sublayer, norm, norm_first=False):
    """norm_first ignored: Post-Norm always."""
    return norm(x + sublayer(x))


def residual_always_pre(x, sublayer, norm, norm_first=False):
    """norm_first ignored: Pre-Norm always."""
    return x + sublayer(norm(x))


def residual_from_normalised(x, sublayer, norm, norm_first=False):
    """Pre-Norm whose residual path carries norm(x) instead of x."""
    if norm_first:
        h = norm(x)
        return h + sublayer(h)
    return norm(x + sublayer(x))


def residual_norm_sublayer_only(x, sublayer, norm, norm_first=False):
    """Post-Norm that normalises the sublayer's output instead of the sum."""
    return x + sublayer(norm(x)) if norm_first else x + norm(sublayer(x))


def residual_no_residual(x, sublayer, norm, norm_first=False):
    """The sublayer's input never added back."""
    return sublayer(norm(x)) if norm_first else norm(sublayer(x))
