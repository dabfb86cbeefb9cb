"""The best-effort delegation flag: which of an exercise's forbidden PyTorch functions ran while the student's
code was checked, under any name and by the operator underneath (a private kernel, ``torch.ops.aten``).

`forbidden_ops` turns an exercise's ``forbidden`` list into those names; `Watch` (a TorchFunctionMode and a
TorchDispatchMode) records which ran, unless a helper the exercise allows is running it. A reason for a human
to read, never a score: a determined student can hide from it (autograde/README.md).
"""
from __future__ import annotations

import sys
from collections.abc import Iterable

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["forbidden_ops", "named", "Watch"]

_ATTENTION = ("_safe_softmax", "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention",
              "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_cudnn_attention", "_native_multi_head_attention")
# (what a forbidden callable's name contains, lower case without underscores; the operators it runs), first match
_OPERATORS = (
    ("logsoftmax", ("_log_softmax",)),
    ("softmax", ("_softmax", "_safe_softmax", "_masked_softmax")),
    ("logcumsumexp", ("logcumsumexp", "_logcumsumexp")),
    ("logsumexp", ("logsumexp",)),
    ("attention", _ATTENTION),
    ("transformer", ("_transformer_encoder_layer_fwd", *_ATTENTION)),
    ("layernorm", ("native_layer_norm",)),
    ("groupnorm", ("native_group_norm",)),
    ("instancenorm", ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training")),
    ("rmsnorm", ("_fused_rms_norm",)),
    ("repeatinterleave", ("repeat_interleave",)),
    ("binarycrossentropy", ("binary_cross_entropy",)),
    ("crossentropy", ("nll_loss_forward", "nll_loss2d_forward")),
    ("nllloss", ("nll_loss_forward", "nll_loss2d_forward")),
)


def forbidden_ops(forbidden: Iterable[object]) -> tuple[str, ...]:
    """The names to watch for the PyTorch callables in ``forbidden``: each one's own (as PyTorch's function API
    calls it) and the ATen operators (by name, without overload) it runs."""
    found: dict[str, None] = {}
    for item in forbidden:
        module = getattr(item, "__module__", None)
        if module is not None and not str(module).startswith("torch"):  # the grader's and tfm_ref's own: withheld
            continue
        found[str(item.__name__)] = None
        name = str(item.__name__).lower().replace("_", "")
        for part, ops in _OPERATORS:
            if part in name:
                found.update(dict.fromkeys(ops))
                break
    return tuple(found)


def named(functions: Iterable[object]) -> tuple[tuple[str, str], ...]:
    """(module, qualified name) of each function: how `Watch` knows the allowed helpers' frames."""
    return tuple((str(f.__module__), str(f.__qualname__)) for f in functions
                 if hasattr(f, "__module__") and hasattr(f, "__qualname__"))


class Watch:
    """``with Watch(names, allowed) as watch:`` … ``watch.seen``: those of ``names`` (functions or operators) that ran
    outside the ``allowed`` functions (`named`), in the order they first did."""

    def __init__(self, names: Iterable[str], allowed: Iterable[tuple[str, str]] = ()) -> None:
        self.names, self.allowed, self.seen = frozenset(names), frozenset(map(tuple, allowed)), []
        self._modes = (_Functions(self), _Operators(self))

    def __enter__(self) -> Watch:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)

    def saw(self, name: str) -> None:
        if name in self.names and name not in self.seen and not self._in_allowed():
            self.seen.append(name)

    def _in_allowed(self) -> bool:
        frame = sys._getframe(3)
        while frame is not None:
            if (frame.f_globals.get("__name__"), frame.f_code.co_qualname) in self.allowed:
                return True
            frame = frame.f_back
        return False


class _Functions(TorchFunctionMode):
    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.watch.saw(getattr(func, "__name__", ""))
        return func(*args, **(kwargs or {}))


class _Operators(TorchDispatchMode):
    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.watch.saw(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))
