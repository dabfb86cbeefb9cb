"""Comparing what a student's code gave with what the reference gave, in words.

Floating tensors are compared with ``allclose`` at a tolerance set by dtype (or the exercise's
own), booleans and integers exactly; a device, shape, dtype, type or NaN problem gets its own message.
A tensor on the ``meta`` device has no values: its device, shape and dtype are all that is compared.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from itertools import permutations
from typing import Any

import torch

from notebook_sandbox.display import brief
from notebook_sandbox.evaluation import Outcome, flatten

from .messages import ENGLISH, N_, _, speaking

__all__ = ["Tolerance", "tolerance", "difference", "compare", "error_hint", "same"]

_TOLERANCE = {  # (rtol, atol) by dtype; tfm_ref computes softmax in float32 even for float64 inputs
    torch.float64: (1e-5, 1e-6),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}

# What a common exception most often means in a student's code: said after the exception itself.
_ERROR_HINTS = (
    (re.compile(r"Boolean value of Tensor with more than one (value|element) is ambiguous"),
     N_("`if tensor:` asks whether a whole tensor is true; to ask whether an optional argument was given, write "
        "`if mask is not None:`")),
    (re.compile(r"must match the size of tensor b \(\d+\) at non-singleton dimension"),
     N_("the shapes of an elementwise operation do not line up. Often a reduction (sum, amax, mean) without "
        "keepdim=True, which drops the axis it reduced, or a tensor that needs an axis added with [:, None]")),
    (re.compile(r"must be tuple of ints, (not float|but found element of type float)|tuple of ints,\s*but got float"
                r"|'float' object cannot be interpreted as an integer"),
     N_("a size must be a whole number: `/` gives a float, `//` an int")),
    (re.compile(r"context must have last dimension"),
     N_("a MultiHeadAttention is called as attn(x, context=None, mask=None): a mask passed second is read as the "
        "context; write attn(x, mask=mask)")),
    (re.compile(r"The shape of the mask \[[^\]]*\] at index \d+ does not match the shape of the indexed tensor"),
     N_("indexing with a boolean mask needs the mask's own shape, without broadcasting: `x.masked_fill(mask, value)` "
        "broadcasts")),
    (re.compile(r"Sizes of tensors must match except in dimension"),
     N_("torch.cat joins tensors along one axis, and every other axis must agree: check the axis that grows (a "
        "key/value cache of shape (B, G, S, Dh) grows along the positions, dim=-2) and that both hold as many heads")),
    (re.compile(r"cannot be multiplied|Expected size for first two dimensions of batch2 tensor"),
     N_("a matrix product needs the inner sizes to agree, (… × n) @ (n × …): a transpose missing "
        "(`k.transpose(-2, -1)`), or a weight applied from the wrong side")),
    (re.compile(r"view size is not compatible with input tensor's size and stride"),
     N_("after transpose or permute a tensor is no longer laid out in order, so view refuses it: use reshape, or "
        ".contiguous().view(…)")),
)

Tolerance = tuple[float | None, float | None]
"""An exercise's (rtol, atol) overrides; None keeps the dtype's default."""


def tolerance(dtype: torch.dtype, override: Tolerance = (None, None)) -> tuple[float, float]:
    rtol, atol = _TOLERANCE.get(dtype, (1e-4, 1e-5))
    return (rtol if override[0] is None else override[0], atol if override[1] is None else override[1])


def _verb(what: str, singular: str, plural: str) -> str:
    """The verb that agrees with ``what``: "the scores differ", "the loss of each step differs"."""
    head = what.split(" of ")[0].split()[-1]
    return plural if head.endswith("s") and not head.endswith("ss") else singular


def _listed(items: Sequence[str]) -> str:
    """ "a", "a and the b", "a, the b and the c" (to follow a "the"), in the language in use."""
    return items[0] if len(items) == 1 else _("{items} and the {last}").format(
        items=_(", the ").join(items[:-1]), last=items[-1])


def _said(what: str, singular: str, plural: str) -> str:
    """The template (``singular`` or ``plural``, by `_verb` on the English ``what``) in the language in use."""
    return _(_verb(what, singular, plural))


def _layout(got: tuple[int, ...], expected: tuple[int, ...]) -> str:
    """What a wrong shape made of the right sizes usually means: axes swapped or reordered, or the right values
    split or merged along the wrong axes (``view`` where a ``transpose`` was needed)."""
    got, expected = tuple(got), tuple(expected)
    if len(got) == len(expected) and sorted(got) == sorted(expected):
        differ = [i for i in range(len(got)) if got[i] != expected[i]]
        if len(differ) == 2:
            return _("; the same sizes with axes {i} and {j} swapped: a transpose missing, or one too many").format(
                i=differ[0], j=differ[1])
        return _("; the same sizes in another order: a permute or transpose of the wrong axes")
    if math.prod(got) == math.prod(expected):
        return _("; the right number of values in another shape: a view or reshape that splits or merges the wrong "
                 "axes (moving an axis needs a transpose first)")
    return ""


def difference(expected: Any, got: Any, override: Tolerance = (None, None), what: str = "output",
               names: Sequence[str] = (), shown: str | None = None) -> str | None:
    """None when ``got`` matches ``expected``; otherwise what differs, in words. ``names`` name the
    items of a tuple output ("output", "weights"). ``what`` is English (the verbs agree with it); ``shown``
    is what the message calls it in the language in use (by default ``what`` translated)."""
    shown = _(what) if shown is None else shown
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return _("the {what} should be a tensor, got {type}").format(what=shown, type=type(got).__name__)
        if got.device != expected.device:
            return _said(what,
                         N_("the {what} is on the {got} device, expected on the {expected} device: make new tensors "
                            "on the device the call gives (`device=device`) or on the inputs' (`x.device`)"),
                         N_("the {what} are on the {got} device, expected on the {expected} device: make new tensors "
                            "on the device the call gives (`device=device`) or on the inputs' (`x.device`)")).format(
                what=shown, got=got.device.type, expected=expected.device.type)
        if tuple(got.shape) != tuple(expected.shape):
            return _said(what, N_("the {what} has shape {got}, expected {expected}"),
                         N_("the {what} have shape {got}, expected {expected}")).format(
                what=shown, got=tuple(got.shape), expected=tuple(expected.shape)) + _layout(got.shape, expected.shape)
        if got.dtype != expected.dtype:
            hard_coded = got.dtype == torch.float32 and expected.is_floating_point()
            return (_said(what, N_("the {what} has dtype {got}, expected {expected}"),
                          N_("the {what} have dtype {got}, expected {expected}")).format(
                what=shown, got=got.dtype, expected=expected.dtype)
                    + (_(" (keep the dtype of the inputs; do not hard-code float32)") if hard_coded else ""))
        if expected.is_meta:  # shapes without values: where, what shape and what dtype is all there is
            return None
        if expected.dtype == torch.bool or not expected.is_floating_point():
            return None if torch.equal(got, expected) else _said(
                what, N_("the {what} differs (exact comparison)"), N_("the {what} differ (exact comparison)")).format(
                what=shown)
        rtol, atol = tolerance(expected.dtype, override)
        if torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=False):
            return None
        if not bool(torch.isfinite(got).all()) and bool(torch.isfinite(expected).all()):
            return _said(what, N_("the {what} contains NaN or inf where the reference is finite"),
                         N_("the {what} contain NaN or inf where the reference is finite")).format(what=shown)
        if not expected.dim():  # one number: say both, as for a plain float
            return _said(what, N_("the {what} is {got:.6g}, expected {expected:.6g}"),
                         N_("the {what} are {got:.6g}, expected {expected:.6g}")).format(
                what=shown, got=float(got), expected=float(expected))
        diff = (got.double() - expected.double()).abs().nan_to_num(math.inf)
        where = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
        return _said(what, N_("the {what} differs: largest difference {largest:.3g} at index {index}"),
                     N_("the {what} differ: largest difference {largest:.3g} at index {index}")).format(
            what=shown, largest=float(diff.max()), index=where)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return _("the {what} should be a {type} of {n} items, got {got}").format(
                what=shown, type=type(expected).__name__, n=len(expected), got=brief(got))
        labels = [names[i] if i < len(names) else f"{what}[{i}]" for i in range(len(expected))]
        labels_shown = [_(names[i]) if i < len(names) else f"{shown}[{i}]" for i in range(len(expected))]
        problems = [(i, p) for i, (e, g, label, label_shown) in enumerate(zip(expected, got, labels, labels_shown))
                    if (p := difference(e, g, override, label, shown=label_shown)) is not None]
        if not problems:
            return None
        if len(expected) <= 4:
            for order in permutations(range(len(got))):
                if all(difference(e, got[j], override) is None for e, j in zip(expected, order)):
                    moved = [labels_shown[i] for i in range(len(labels)) if order[i] != i]
                    swapped = _("the {what}'s items are right but in the wrong order: the {items} are in each "
                                "other's places").format(what=shown, items=_listed(moved))
                    every = len(moved) == len(labels)
                    return swapped + (_("; return ({names})").format(names=", ".join(labels)) if every else "")
        first, others = problems[0][1], [labels_shown[i] for i, _p in problems[1:]]
        if not others:
            return first
        # Whether the problems are alike is read from their English words, whatever the language shown.
        with speaking(ENGLISH):
            english = [(labels[i], difference(expected[i], got[i], override, labels[i])) for i, _p in problems]
        first_label, first_english = english[0]
        alike = all(p.replace(f"the {label} ", f"the {first_label} ", 1) == first_english for label, p in english[1:])
        if alike and "differ" not in first_english:  # the same dtype, shape or type problem in each: said once
            return _("{first}; the {others} likewise").format(first=first, others=_listed(others))
        plural = len(others) > 1 or _verb(labels[problems[1][0]], "differs", "differ") == "differ"
        return (_("{first}; the {others} differ too") if plural else _("{first}; the {others} differs too")).format(
            first=first, others=_listed(others))
    if isinstance(got, torch.Tensor):  # `==` on a tensor is a tensor, not a verdict
        if got.numel() == 1:
            return _("the {what} should be a plain {type}, got a tensor of shape {shape}: take the number out with "
                     ".item()").format(what=shown, type=type(expected).__name__, shape=tuple(got.shape))
        return _("the {what} should be a plain {type}, got a tensor of shape {shape}").format(
            what=shown, type=type(expected).__name__, shape=tuple(got.shape))
    if type(expected) is int and isinstance(got, float):  # a count is an int; a float there comes from 2.0 * … or / for //
        return _("the {what} should be a whole number (an int), got the float {got!r}; expected {expected}").format(
            what=shown, got=got, expected=expected)
    if isinstance(expected, float) and isinstance(got, (int, float)):
        return None if math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9) else _(
            "the {what} is {got}, expected {expected}").format(what=shown, got=got, expected=expected)
    return None if got == expected else _("the {what} is {got}, expected {expected}").format(
        what=shown, got=brief(got), expected=brief(expected))


def error_hint(error: str) -> str:
    """What a common exception (``"TypeName: message"``) most often means in a student's code, or ""."""
    return "".join(f" — {_(hint)}" for pattern, hint in _ERROR_HINTS if pattern.search(error))


def compare(expected: Outcome, got: Outcome, override: Tolerance = (None, None),
            names: Sequence[str] = (), output_names: Sequence[str] = ()) -> tuple[str | None, int | None]:
    """What differs between the student's outcome and the reference's (None when nothing does),
    and which gradient, when the output matches but a gradient does not. ``names`` say what
    each gradient is with respect to, ``output_names`` what each item of a tuple output is."""
    if got.error is not None:  # a forbidden call's message already says "your code called …"
        return _("your code raised {error}").format(error=got.error), None
    problem = difference(expected.output, got.output, override, names=output_names)
    if problem is not None or not expected.grads:
        return problem, None
    for i, e in enumerate(expected.grads):
        g = got.grads[i] if i < len(got.grads) else None
        name = names[i] if i < len(names) else _("input {i}").format(i=i)
        if e is None and g is None:
            continue
        if g is None:
            return _("there is no gradient for {name}: it is not trainable (a buffer, or requires_grad=False), "
                     "or the output does not depend on it through autograd").format(name=name), i
        problem = difference(torch.zeros_like(g) if e is None else e, g, override, f"gradient of {name}",
                             shown=_("gradient of {name}").format(name=name))
        if problem:
            cut = isinstance(g, torch.Tensor) and not bool(g.any())  # all zeros: the path from the output is cut
            return problem + (_(" (the forward output matches: look for a non-differentiable step or a detach)") if cut
                              else _(" (the forward output matches)")), i
    return None, None


def same(a: Outcome, b: Outcome, override: Tolerance = (None, None)) -> bool:
    """Do two outcomes agree (NaN equal to NaN; an exception equal to the same exception with the
    same message)? Used to recognise a catalogued mistake."""
    if a.error is not None or b.error is not None:
        return a.error == b.error
    outputs = [(a.output, b.output)] + list(zip(a.grads, b.grads))
    for x, y in outputs:
        xs, ys = flatten(x), flatten(y)
        if len(xs) != len(ys):
            return False
        for u, v in zip(xs, ys):
            if isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor):
                if u.shape != v.shape or u.dtype != v.dtype or u.device != v.device:
                    return False
                if u.is_meta:
                    continue
                if u.is_floating_point():
                    rtol, atol = tolerance(u.dtype, override)
                    if not torch.allclose(u.double(), v.double(), rtol=rtol, atol=atol, equal_nan=True):
                        return False
                elif not torch.equal(u, v):
                    return False
            elif type(u) is not type(v) or u != v:
                return False
    return True
