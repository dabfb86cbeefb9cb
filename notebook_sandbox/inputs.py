"""The inputs of a check: a `Call` (the arguments of one call) and the random values in it."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy as _deepcopy
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .display import labelled

__all__ = ["Call", "randn", "random_dims"]


@dataclass(frozen=True)
class Call:
    """The arguments of one call: ``Call(x, dim=-1)`` means ``fn(x, dim=-1)``."""

    args: tuple
    kwargs: dict

    def __init__(self, *args: Any, **kwargs: Any):
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "kwargs", kwargs)

    def scaled(self, factor: float) -> Call:
        """Every floating-point tensor argument times ``factor`` (e.g. huge logits)."""
        def scale(value: Any) -> Any:
            return value * factor if isinstance(value, torch.Tensor) and value.is_floating_point() else value
        return Call(*map(scale, self.args), **{k: scale(v) for k, v in self.kwargs.items()})

    def clone(self, requires_grad: bool = False) -> Call:
        """Fresh copies, so that in-place changes by one implementation do not reach another (a module's
        weights, or its mode: a decoding loop that calls model.train())."""
        def copy(value: Any) -> Any:
            if isinstance(value, nn.Module):
                return _deepcopy(value)
            if isinstance(value, torch.Tensor):
                value = value.detach().clone()
                if requires_grad and value.is_floating_point():
                    value.requires_grad_(True)
            return value
        return Call(*map(copy, self.args), **{k: copy(v) for k, v in self.kwargs.items()})

    def tensors(self) -> list[torch.Tensor]:
        return [v for v in (*self.args, *self.kwargs.values()) if isinstance(v, torch.Tensor)]

    def changed_from(self, original: Call) -> list[int]:
        """The positions (in `named` order) of the tensor arguments that differ from ``original``'s,
        of which this call is a `clone`: what a call changed in place."""
        def changed(now: Any, before: Any) -> bool:
            if not isinstance(now, torch.Tensor):
                return False
            if now.shape != before.shape or now.dtype != before.dtype:
                return True
            now, before = now.detach(), before.detach()
            same = now == before
            if now.is_floating_point() or now.is_complex():
                same |= now.isnan() & before.isnan()
            return not bool(same.all())
        pairs = zip((*self.args, *self.kwargs.values()), (*original.args, *original.kwargs.values()))
        return [i for i, (now, before) in enumerate(pairs) if changed(now, before)]

    def named(self, names: Sequence[str] = ()) -> list[tuple[str, Any]]:
        """(name, value) of every argument: positional ones by ``names`` (``arg0``… past them)."""
        positional = [(names[i] if i < len(names) else f"arg{i}", v) for i, v in enumerate(self.args)]
        return positional + list(self.kwargs.items())

    def describe(self, names: Sequence[str] = ()) -> str:
        return "\n".join(labelled(name, value) for name, value in self.named(names))


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal tensor drawn from ``gen`` (float32 draws, cast, so dtypes agree in value)."""
    return torch.randn(*shape, generator=gen).to(dtype)


def random_dims(**ranges: tuple[int, int]) -> Callable[[torch.Generator], dict[str, int]]:
    """Random sizes for a hidden case: ``random_dims(B=(1, 4), T=(1, 9))``, bounds inclusive."""
    def draw(gen: torch.Generator) -> dict[str, int]:
        return {k: int(torch.randint(lo, hi + 1, (1,), generator=gen)) for k, (lo, hi) in ranges.items()}
    return draw
