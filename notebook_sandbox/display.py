"""How values are shown in feedback: small tensors in full, large ones by shape and dtype."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .words import _

__all__ = ["show", "show_named", "labelled", "brief", "indent"]

PRINTED_ELEMENTS = 64
"""Tensors with at most this many elements are printed in full."""


def show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            return _("tensor of shape {shape}, dtype {dtype}, on the meta device (no values)").format(
                shape=tuple(value.shape), dtype=value.dtype)
        if value.numel() > PRINTED_ELEMENTS:
            return _("tensor of shape {shape}, dtype {dtype} (too large to print)").format(
                shape=tuple(value.shape), dtype=value.dtype)
        with torch._tensor_str.printoptions(precision=4, sci_mode=False, linewidth=100):
            return repr(value)
    if isinstance(value, (tuple, list)):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        if not any(isinstance(v, (torch.Tensor, tuple, list)) for v in value):
            return repr(value)  # numbers, strings: one line
        return opening + "\n" + ",\n".join(indent(show(v)) for v in value) + "\n" + closing
    return repr(value)


def labelled(name: str, value: Any) -> str:
    """``name = value``, the later lines of a multi-line value aligned under its first."""
    prefix = f"{name} = "
    first, *rest = show(value).splitlines() or [""]
    return "\n".join([prefix + first, *(" " * len(prefix) + line if line else line for line in rest)])


def show_named(value: Any, names: Sequence[str]) -> str:
    """A tuple output as `labelled` lines, one per item (as inputs are shown), when ``names`` says
    what each item is; anything else as `show` gives it."""
    if isinstance(value, (tuple, list)) and names and len(value) == len(names):
        return "\n".join(labelled(name, item) for name, item in zip(names, value))
    return show(value)


def brief(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return _("tensor of shape {shape}").format(shape=tuple(value.shape))
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
