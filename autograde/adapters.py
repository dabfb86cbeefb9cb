"""How the object under test is built: the function itself, or an ``nn.Module`` class built from
the case's sizes with the reference's weights loaded into it.

The grader builds the reference (`reference`) and reads its `weights`; the student's object is
built by `candidate` from those weights, in the sandbox when grading. Exercises may subclass
an adapter (e.g. to perturb the reference's weights, or to turn an expected exception into a
comparable outcome).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .evaluation import CheckFailed

__all__ = ["FunctionAdapter", "ModuleAdapter", "Dims"]

Dims = Mapping[str, int]


class FunctionAdapter:
    """The student's object is the function itself."""

    def reference(self, reference: Callable, dims: Dims, dtype: torch.dtype) -> Callable:
        return reference

    def weights(self, built: Any) -> dict[str, torch.Tensor] | None:
        return None

    def candidate(self, candidate: Callable, dims: Dims, weights: dict[str, torch.Tensor] | None,
                  dtype: torch.dtype) -> Callable:
        return candidate

    def parameters(self, built: Any) -> list[torch.Tensor]:
        return []


@dataclass(frozen=True)
class ModuleAdapter:
    """The student's object is an ``nn.Module`` class built with ``kwargs(dims)``.

    The reference is built from a seeded RNG; its weights are loaded into the candidate, so
    both compute with the same parameters.
    """

    kwargs: Callable[[Dims], dict]

    def reference(self, reference: type, dims: Dims, dtype: torch.dtype) -> torch.nn.Module:
        return reference(**self.kwargs(dims)).to(dtype).eval()  # parameters in the case's dtype

    def weights(self, built: torch.nn.Module) -> dict[str, torch.Tensor]:
        return dict(built.state_dict())

    def candidate(self, candidate: type, dims: Dims, weights: dict[str, torch.Tensor] | None,
                  dtype: torch.dtype) -> torch.nn.Module:
        module = candidate(**self.kwargs(dims))
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{candidate!r} should build an nn.Module, got {type(module).__name__}")
        expected, got = set(weights or {}), set(module.state_dict())
        if expected != got:
            raise CheckFailed(
                "your module's parameters are not named as in tfm_ref, so the reference weights "
                f"cannot be loaded into it.\n  missing: {sorted(expected - got)}\n  unexpected: {sorted(got - expected)}"
            )
        module.to(dtype).load_state_dict(weights)
        return module.eval()

    def parameters(self, built: torch.nn.Module) -> list[torch.Tensor]:
        return [p for _, p in sorted(built.named_parameters())]
