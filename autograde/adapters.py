"""How the object under test is built: the function itself, or an ``nn.Module`` class built from the case's
sizes with the reference's weights loaded. The grader builds the `reference` and reads its `weights`; the
student's object follows a `plan`, plain data that `notebook_sandbox.building` follows in the sandbox (which holds no
adapter). Exercises may subclass one: to perturb the weights, compare two modules, or what a call raises.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from notebook_sandbox.building import build

__all__ = ["FunctionAdapter", "ModuleAdapter", "DriverAdapter", "Dims", "AS_BUILT", "TRAINING"]

Dims = Mapping[str, int]

AS_BUILT = "as_built"
"""A case's flag (``dims=dict(..., as_built=1)``): the modules compute with the values they are built
with, not the reference's weights loaded into the student's; for an initialisation the exercise
prescribes (LayerNorm's γ = 1 and β = 0)."""

TRAINING = "training"
"""A case's flag: both modules run in training mode, dropout on. The call draws the same random
numbers on both sides, so a module that drops where the reference drops gives the same output."""


class FunctionAdapter:
    """The student's object is the function itself."""

    def plan(self, dims: Dims) -> dict:
        return {"kind": "function"}

    def reference(self, reference: Callable, dims: Dims, dtype: torch.dtype) -> Callable:
        return build(self.plan(dims), reference, None, dtype)

    def weights(self, built: Any) -> dict[str, torch.Tensor] | None:
        return None


@dataclass(frozen=True)
class DriverAdapter(FunctionAdapter):
    """The checked function is the driver ``name`` (`notebook_sandbox.drivers`) around the reference, a mistake or the
    student's function: the same loop on both sides, whose results are compared."""

    name: str

    def plan(self, dims: Dims) -> dict:
        return {"kind": "driver", "name": self.name}


@dataclass(frozen=True)
class ModuleAdapter:
    """The student's object is an ``nn.Module`` class built with ``kwargs(dims)``, the seeded reference's weights
    loaded into it."""

    kwargs: Callable[[Dims], dict]

    def describe(self, name: str, dims: Dims) -> str:
        """How the module is built for ``dims``: ``MultiHeadAttention(d_model=8, n_heads=2)``."""
        return f"{name}({', '.join(f'{k}={v!r}' for k, v in self.kwargs(dims).items())})"

    def plan(self, dims: Dims) -> dict:
        return {"kind": "module", "kwargs": self.kwargs(dims), "load": not dims.get(AS_BUILT),
                "training": bool(dims.get(TRAINING))}

    def reference(self, reference: type, dims: Dims, dtype: torch.dtype) -> torch.nn.Module:
        return reference(**self.kwargs(dims)).to(dtype).train(bool(dims.get(TRAINING)))  # the case's dtype

    def weights(self, built: torch.nn.Module) -> dict[str, torch.Tensor]:
        return dict(built.state_dict())
