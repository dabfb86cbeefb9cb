"""Building the object under test from a *plan*: plain data the grader sends (`autograde.adapters`), so the
sandbox needs no catalogue and holds no answer::

    {"kind": "function"}                                        the student's function itself
    {"kind": "module", "kwargs": {...}, "load": True, "training": False[, "init": {...}]}   built, weights loaded
    {"kind": "pair", "parts": [["post.", plan], ["pre.", plan]]} two modules on the same inputs: (out, out)
    {"kind": "raises", "error": "ValueError", "raised": "...", "returned": "..."}   what a call does, in words
    {"kind": "driver", "name": "train_steps"}                   the function run by a driver (`notebook_sandbox.drivers`)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .evaluation import CheckFailed
from .words import N_, _

__all__ = ["build", "module_parameters", "SideBySide"]


def build(plan: dict, impl: Callable, weights: dict[str, torch.Tensor] | None, dtype: torch.dtype) -> Any:
    """The object the check calls: ``impl`` (student's, mistake's or reference's) built as the plan says."""
    kind = plan["kind"]
    if kind == "function":
        return impl
    if kind == "module":
        return _module(impl, plan, weights, dtype)
    if kind == "pair":
        return SideBySide(*(_module(impl, part, {k.removeprefix(prefix): v for k, v in (weights or {}).items()
                                                  if k.startswith(prefix)}, dtype)
                             for prefix, part in plan["parts"]))
    if kind == "raises":
        return _outcome_in_words(impl, plan)
    if kind == "driver":
        from .drivers import DRIVERS

        return DRIVERS[plan["name"]](impl)
    raise ValueError(f"unknown plan kind {kind!r}")


def module_parameters(built: Any) -> list[torch.Tensor]:
    """The tensors whose gradients are compared: a module's floating state-dict entries by name (a tied matrix
    under each name); none for a function."""
    if not isinstance(built, nn.Module):
        return []
    state = built.state_dict(keep_vars=True)
    return [state[name] for name in sorted(state) if state[name].is_floating_point()]


class SideBySide(nn.Module):
    """A Post-Norm block and a Pre-Norm block called on the same inputs: (its output, its output)."""

    def __init__(self, post: nn.Module, pre: nn.Module) -> None:
        super().__init__()
        self.post, self.pre = post, pre

    def forward(self, *args, **kwargs):
        return self.post(*args, **kwargs), self.pre(*args, **kwargs)


def _outcome_in_words(fn: Callable, plan: dict) -> Callable:
    """``fn`` whose outcome is a word: ``plan["raised"]`` if it raises ``plan["error"]``, else ``plan["returned"]``."""
    def outcome(*args, **kwargs) -> str:
        try:
            fn(*args, **kwargs)
        except Exception as error:
            if type(error).__name__ != plan["error"]:
                raise
            return plan["raised"]
        return plan["returned"]
    return outcome


def _module(cls: Callable, plan: dict, weights: dict[str, torch.Tensor] | None, dtype: torch.dtype) -> nn.Module:
    kwargs = plan["kwargs"]
    if plan.get("init"):
        _check_init(cls, kwargs, plan["init"])
    module = cls(**kwargs)
    if not isinstance(module, nn.Module):
        raise TypeError(_("{cls!r} should build an nn.Module, got {type}").format(cls=cls, type=type(module).__name__))
    weights = weights or {}
    state, buffers = dict(module.state_dict()), {name for name, _ in module.named_buffers()}
    plain = {name for name in weights if name not in state and name not in buffers
             and isinstance(_attribute(module, name), torch.Tensor)}
    problems = _parameter_problems(state, weights, kwargs, buffers, plain) + _shared(module, weights)
    if problems:
        raise CheckFailed(_("your module's parameters do not match tfm_ref's, so the reference weights cannot be "
                            "loaded into it:") + "\n" + "\n".join(f"  ✗ {p}" for p in problems))
    module.to(dtype)
    if plan["load"]:
        module.load_state_dict(weights)
    return module.train(bool(plan["training"]))


def _check_init(cls: Callable, kwargs: dict, init: dict) -> None:
    """The standard deviation of ``init["tensor"]`` in the module as built with ``init["kwargs"]`` (a vocabulary
    large enough to estimate it) is within ``init["tolerance"]`` of ``init["std"]``; else ``init["message"]``."""
    state = cls(**{**kwargs, **init["kwargs"]}).state_dict()
    tensor = state.get(init["tensor"])
    if tensor is None:
        return
    std = float(tensor.float().std())
    if abs(std / init["std"] - 1) > init["tolerance"]:
        raise CheckFailed(init["message"].format(std=std))


def _shared(module: torch.nn.Module, expected: dict[str, torch.Tensor]) -> list[str]:
    """One submodule or tensor used where tfm_ref has one each (reference weights differ), said once, outermost."""
    modules = _places(module.named_modules(remove_duplicate=False))
    tensors = _places(module.state_dict(keep_vars=True).items())
    problems, reported = [], []
    for names, what in [*((names, N_("module")) for names in modules), *((names, N_("tensor")) for names in tensors)]:
        if len(names) < 2 or any(n == r or n.startswith(r + ".") for n in names for r in reported):
            continue
        first, *others = names
        suffixes = [""] if what == "tensor" else [k.removeprefix(first) for k in expected if k.startswith(first + ".")]
        if any(o + k in expected and first + k in expected and not torch.equal(expected[first + k], expected[o + k])
               for o in others for k in suffixes):
            listed = _(" and ").join(f"`{n}`" for n in names)
            repeated = all(n.rpartition(".")[2].isdigit() for n in names)  # a list of layers: [Block(...)] * n
            problems.append(_("your {listed} are one and the same {what}, where tfm_ref has one each: build each of "
                              "them").format(listed=listed, what=_(what))
                            + (_(" (`[Block(...)] * n` repeats one object; `[Block(...) for _ in range(n)]` builds n)")
                               if repeated else ""))
            reported += names
    return problems


def _places(named) -> list[list[str]]:
    """The names under which each object appears (parents before their children)."""
    places: dict[int, list[str]] = {}
    for name, item in named:
        if name:
            places.setdefault(id(item), []).append(name)
    return list(places.values())


def _attribute(module: torch.nn.Module, dotted: str) -> object:
    for name in dotted.split("."):
        module = getattr(module, name, None)
    return module


def _parameter_problems(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], kwargs: dict,
                        buffers: set[str], plain: set[str]) -> list[str]:
    """What is wrong with the student's parameters, in words: biases, unregistered tensors (``plain``), saved
    buffers (``buffers``), names missing or unexpected, shapes that differ."""
    problems = []
    missing, unexpected = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    bias = _(" (it is built with bias={bias})").format(bias=kwargs["bias"]) if "bias" in kwargs else ""
    for name in list(unexpected):
        owner = name.removesuffix(".bias")
        if name.endswith(".bias") and f"{owner}.weight" in expected:
            problems.append(_("your `{name}` has a bias, and tfm_ref's has none").format(name=owner) + bias)
            unexpected.remove(name)
    for name in list(missing):
        owner = name.removesuffix(".bias")
        if name.endswith(".bias") and f"{owner}.weight" in got:
            problems.append(_("your `{name}` has no bias, and tfm_ref's has one").format(name=owner) + bias)
            missing.remove(name)
    for name in sorted(plain & set(missing)):
        problems.append(_("your `{name}` is a plain tensor attribute, so it is not registered: make it an "
                          "nn.Parameter(...) so that it is trained, saved and loaded").format(name=name))
        missing.remove(name)
    for name in [n for n in unexpected if n in buffers]:
        problems.append(_("your buffer `{name}` is saved with the weights, and tfm_ref saves no such buffer: "
                          "register it with persistent=False, or make it in forward").format(name=name))
        unexpected.remove(name)
    if missing:
        problems.append(_("missing from the module __init__ built (create them there, named as tfm_ref names "
                          "them): {names}").format(names=", ".join(missing)))
    if unexpected:
        problems.append(_("not in tfm_ref: {names}").format(names=", ".join(unexpected)))
    differ = [name for name in sorted(set(got) & set(expected)) if got[name].shape != expected[name].shape]
    for name in differ:
        problems.append(_("your `{name}` has shape {got}, tfm_ref's {expected}").format(
            name=name, got=tuple(got[name].shape), expected=tuple(expected[name].shape)))
    return problems + _kv_projections_for_every_query_head(got, expected, kwargs, differ)


def _kv_projections_for_every_query_head(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                                         kwargs: dict, differ: list[str]) -> list[str]:
    """The shapes above, named where k_proj/v_proj are sized for n_heads query heads while n_kv_heads < n_heads."""
    n_heads, n_kv_heads = kwargs.get("n_heads"), kwargs.get("n_kv_heads")
    if not (isinstance(n_heads, int) and isinstance(n_kv_heads, int) and 0 < n_kv_heads < n_heads):
        return []
    sized_for_queries = [name for name in differ if name.rsplit(".", 2)[-2:-1] in (["k_proj"], ["v_proj"])
                         and expected[name].dim() >= 1 and got[name].dim() == expected[name].dim()
                         and expected[name].shape[0] % n_kv_heads == 0
                         and got[name].shape[0] == expected[name].shape[0] // n_kv_heads * n_heads
                         and got[name].shape[1:] == expected[name].shape[1:]]
    if not sized_for_queries:
        return []
    head_dim = expected[sized_for_queries[0]].shape[0] // n_kv_heads
    return [_("k_proj/v_proj sized for all query heads: with n_kv_heads < n_heads they have n_kv_heads · head_dim "
              "outputs (here n_kv_heads={groups} · head_dim={head_dim} = {kv_width}, not n_heads · head_dim = "
              "{q_width}): nn.Linear(d_model, n_kv_heads * head_dim), with n_kv_heads = n_heads where it is None").format(
        groups=n_kv_heads, head_dim=head_dim, kv_width=n_kv_heads * head_dim, q_width=n_heads * head_dim)]
