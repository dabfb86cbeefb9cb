"""How values are shown in feedback: small tensors in full, large ones by shape and dtype."""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["show", "brief", "indent"]

PRINTED_ELEMENTS = 64
"""Tensors with at most this many elements are printed in full."""


def show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() > PRINTED_ELEMENTS:
            return f"tensor of shape {tuple(value.shape)}, dtype {value.dtype} (too large to print)"
        with torch._tensor_str.printoptions(precision=4, sci_mode=False, linewidth=100):
            return repr(value)
    if isinstance(value, (tuple, list)):
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
        if not any(isinstance(v, (torch.Tensor, tuple, list)) for v in value):
            return repr(value)  # numbers, strings: one line
        return opening + "\n" + ",\n".join(indent(show(v)) for v in value) + "\n" + closing
    return repr(value)


def brief(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
