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

__all__ = ["FunctionAdapter", "ModuleAdapter", "Dims", "AS_BUILT", "TRAINING"]

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

    def describe(self, name: str, dims: Dims) -> str:
        """How the module is built for ``dims``: ``MultiHeadAttention(d_model=8, n_heads=2)``."""
        return f"{name}({', '.join(f'{k}={v!r}' for k, v in self.kwargs(dims).items())})"

    def reference(self, reference: type, dims: Dims, dtype: torch.dtype) -> torch.nn.Module:
        return reference(**self.kwargs(dims)).to(dtype).train(bool(dims.get(TRAINING)))  # the case's dtype

    def weights(self, built: torch.nn.Module) -> dict[str, torch.Tensor]:
        return dict(built.state_dict())

    def candidate(self, candidate: type, dims: Dims, weights: dict[str, torch.Tensor] | None,
                  dtype: torch.dtype) -> torch.nn.Module:
        kwargs = self.kwargs(dims)
        module = candidate(**kwargs)
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"{candidate!r} should build an nn.Module, got {type(module).__name__}")
        state, buffers = dict(module.state_dict()), {name for name, _ in module.named_buffers()}
        plain = {name for name in weights or {} if name not in state and name not in buffers
                 and isinstance(_attribute(module, name), torch.Tensor)}
        problems = _parameter_problems(state, weights or {}, kwargs, buffers, plain) + _shared(module, weights or {})
        if problems:
            raise CheckFailed("your module's parameters do not match tfm_ref's, so the reference weights cannot "
                              "be loaded into it:\n" + "\n".join(f"  ✗ {p}" for p in problems))
        module.to(dtype)
        if not dims.get(AS_BUILT):
            module.load_state_dict(weights)
        return module.train(bool(dims.get(TRAINING)))

    def parameters(self, built: torch.nn.Module) -> list[torch.Tensor]:
        """The floating tensors of the state dict, sorted by name as messages name them: a tied matrix
        once under each of its names (untied copies then show, each getting only its share of the
        gradient), and a buffer where tfm_ref has a parameter in its place (it gets no gradient)."""
        state = built.state_dict(keep_vars=True)
        return [state[name] for name in sorted(state) if state[name].is_floating_point()]


def _shared(module: torch.nn.Module, expected: dict[str, torch.Tensor]) -> list[str]:
    """One submodule, or one tensor, used in places where tfm_ref has one each: the same object under
    several names whose reference weights differ (tied ones agree), said once, for the outermost."""
    modules = _places(module.named_modules(remove_duplicate=False))
    tensors = _places(module.state_dict(keep_vars=True).items())
    problems, reported = [], []
    for names, what in [*((names, "module") for names in modules), *((names, "tensor") for names in tensors)]:
        if len(names) < 2 or any(n == r or n.startswith(r + ".") for n in names for r in reported):
            continue
        first, *others = names
        suffixes = [""] if what == "tensor" else [k.removeprefix(first) for k in expected if k.startswith(first + ".")]
        if any(o + k in expected and first + k in expected and not _alike(expected[first + k], expected[o + k])
               for o in others for k in suffixes):
            listed = " and ".join(f"`{n}`" for n in names)
            repeated = all(n.rpartition(".")[2].isdigit() for n in names)  # a list of layers: [Block(...)] * n
            problems.append(f"your {listed} are one and the same {what}, where tfm_ref has one each: build each "
                            "of them" + (" (`[Block(...)] * n` repeats one object; `[Block(...) for _ in "
                                         "range(n)]` builds n)" if repeated else ""))
            reported += names
    return problems


def _places(named) -> list[list[str]]:
    """The names under which each object appears (parents before their children)."""
    places: dict[int, list[str]] = {}
    for name, item in named:
        if name:
            places.setdefault(id(item), []).append(name)
    return list(places.values())


def _alike(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a, b)


def _attribute(module: torch.nn.Module, dotted: str) -> object:
    for name in dotted.split("."):
        module = getattr(module, name, None)
    return module


def _parameter_problems(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], kwargs: dict,
                        buffers: set[str] = frozenset(), plain: set[str] = frozenset()) -> list[str]:
    """What is wrong with the student's parameters, in words: biases that should or should not
    be there, tensors kept as plain attributes (``plain``), saved buffers tfm_ref does not save
    (``buffers``: the student's buffer names), other names missing or unexpected, shapes that differ."""
    problems = []
    missing, unexpected = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    bias = f" (it is built with bias={kwargs['bias']})" if "bias" in kwargs else ""
    for name in list(unexpected):
        owner = name.removesuffix(".bias")
        if name.endswith(".bias") and f"{owner}.weight" in expected:
            problems.append(f"your `{owner}` has a bias, and tfm_ref's has none{bias}")
            unexpected.remove(name)
    for name in list(missing):
        owner = name.removesuffix(".bias")
        if name.endswith(".bias") and f"{owner}.weight" in got:
            problems.append(f"your `{owner}` has no bias, and tfm_ref's has one{bias}")
            missing.remove(name)
    for name in sorted(plain & set(missing)):
        problems.append(f"your `{name}` is a plain tensor attribute, so it is not registered: make it an "
                        f"nn.Parameter(...) so that it is trained, saved and loaded")
        missing.remove(name)
    for name in [n for n in unexpected if n in buffers]:
        problems.append(f"your buffer `{name}` is saved with the weights, and tfm_ref saves no such buffer: "
                        f"register it with persistent=False, or make it in forward")
        unexpected.remove(name)
    if missing:
        problems.append(f"missing from the module __init__ built (create them there, named as tfm_ref names "
                        f"them): {', '.join(missing)}")
    if unexpected:
        problems.append(f"not in tfm_ref: {', '.join(unexpected)}")
    differ = [name for name in sorted(set(got) & set(expected)) if got[name].shape != expected[name].shape]
    for name in differ:
        problems.append(f"your `{name}` has shape {tuple(got[name].shape)}, tfm_ref's {tuple(expected[name].shape)}")
    return problems + _kv_projections_for_every_query_head(got, expected, kwargs, differ)


def _kv_projections_for_every_query_head(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                                         kwargs: dict, differ: list[str]) -> list[str]:
    """The shapes above, named where they are a multi-head layer's key/value projections sized for all
    n_heads query heads (n_heads · head_dim outputs) where it has n_kv_heads < n_heads key/value heads."""
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
    return [f"k_proj/v_proj sized for all query heads: with n_kv_heads < n_heads they have n_kv_heads · head_dim "
            f"outputs (here n_kv_heads={n_kv_heads} · head_dim={head_dim} = {n_kv_heads * head_dim}, not "
            f"n_heads · head_dim = {n_heads * head_dim}): nn.Linear(d_model, n_kv_heads * head_dim), with "
            "n_kv_heads = n_heads where it is None"]
