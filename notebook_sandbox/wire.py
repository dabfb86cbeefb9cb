"""Plain data across the trust boundary: a JSON tree plus raw tensor bytes (``encode``, ``decode``).

Only ``None``, bools, ints, floats, strings, lists, tuples, string-keyed dicts and plain CPU (or ``meta``)
tensors of a few dtypes cross, each of its *exact* type, rebuilt fresh on the other side; registered modules
go into the sandbox only. `decode` trusts nothing: a malformed tree raises `WireError`, naming the problem.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .words import _

__all__ = ["WireError", "encode", "decode", "register_module", "DTYPES", "MAX_DEPTH", "MAX_ITEMS"]

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool,
)}
MAX_DEPTH = 16  # nesting of lists, tuples, dicts and modules
MAX_ITEMS = 100_000  # nodes in one tree
MAX_STRING = 200_000  # characters in one string
MAX_DIMS = 16
_INT_RANGE = 2**63


class WireError(ValueError):
    """A value that is not plain data, or a tree that does not describe one."""


@dataclass(frozen=True)
class _ModuleKind:
    cls: type
    describe: Callable[[nn.Module], dict]  # module → its constructor's keyword arguments (plain data or modules)
    build: Callable[..., nn.Module]


_MODULES: dict[str, _ModuleKind] = {}


def register_module(cls: type, describe: Callable[[nn.Module], dict], build: Callable[..., nn.Module] | None = None) -> type:
    """Let instances of exactly ``cls`` travel to the sandbox as check inputs: ``build(**describe(module))``
    (default ``cls``) rebuilds its structure, and its state dict carries the weights."""
    _MODULES[f"{cls.__module__}.{cls.__qualname__}"] = _ModuleKind(cls, describe, build or cls)
    return cls


register_module(nn.Linear, lambda m: dict(in_features=m.in_features, out_features=m.out_features, bias=m.bias is not None))
register_module(nn.LayerNorm, lambda m: dict(normalized_shape=list(m.normalized_shape), eps=m.eps,
                                             elementwise_affine=m.elementwise_affine, bias=m.bias is not None))
register_module(nn.Sequential, lambda m: dict(modules=list(m)), lambda modules: nn.Sequential(*modules))
for _activation in (nn.Tanh, nn.ReLU, nn.GELU, nn.SiLU, nn.Identity):
    register_module(_activation, lambda m: {})


def _visit(path: str, depth: int, count: Iterator[int]) -> None:
    """One more node of a tree, ``depth`` levels down: `WireError` past `MAX_ITEMS` nodes or `MAX_DEPTH` levels."""
    if next(count) > MAX_ITEMS:
        raise WireError(f"{path}: more than {MAX_ITEMS} values in one message")
    if depth > MAX_DEPTH:
        raise WireError(f"{path}: nested more than {MAX_DEPTH} levels deep")


# --------------------------------------------------------------------------- encoding

def encode(value: Any, blobs: list[bytes], *, path: str = "the value", modules: bool = False) -> dict:
    """``value`` as a JSON-able tree, its tensor bytes appended to ``blobs``; `WireError` if it is not plain data."""
    return _encode(value, blobs, path, modules, 0, itertools.count(1))


def _encode(value: Any, blobs: list[bytes], path: str, modules: bool, depth: int, count: Iterator[int]) -> dict:
    _visit(path, depth, count)
    kind = type(value)  # the real class: isinstance could be fooled by a __class__ property
    if value is None:
        return {"t": "none"}
    if kind is bool:
        return {"t": "bool", "v": value}
    if kind is int:
        if not -_INT_RANGE <= value < _INT_RANGE:
            raise WireError(f"{path}: the integer {value} does not fit in 64 bits")
        return {"t": "int", "v": value}
    if kind is float:
        return {"t": "float", "v": value.hex()}
    if kind is str:
        if len(value) > MAX_STRING:
            raise WireError(f"{path}: a string of {len(value)} characters (at most {MAX_STRING})")
        return {"t": "str", "v": value}
    if kind in (list, tuple):
        name = "list" if kind is list else "tuple"
        return {"t": name, "items": [_encode(v, blobs, f"{path}[{i}]", modules, depth + 1, count)
                                     for i, v in enumerate(value)]}
    if kind is dict:
        items = []
        for key, item in value.items():
            if type(key) is not str:
                raise WireError(f"{path}: a dict key of type {type(key).__name__} (keys must be strings)")
            items.append([key, _encode(item, blobs, f"{path}[{key!r}]", modules, depth + 1, count)])
        return {"t": "dict", "items": items}
    if kind is torch.Tensor or kind is nn.Parameter:
        return _encode_tensor(value, blobs, path)
    if modules and isinstance(value, nn.Module):
        return _encode_module(value, blobs, path, depth, count)
    if isinstance(value, torch.Tensor):
        raise WireError(_("{path} is a {kind}, a subclass of torch.Tensor: return a plain tensor (torch.Tensor), e.g. "
                          "computed with tensor operations, not a custom class").format(path=path, kind=kind.__qualname__))
    raise WireError(_("{path} is a {kind}; only tensors, numbers, bools, strings, None and lists/tuples/dicts of them "
                      "can be checked").format(path=path, kind=f"{kind.__module__}.{kind.__qualname__}")
                    + _numpy_advice(kind))


def _numpy_advice(kind: type) -> str:
    if kind.__module__ != "numpy":
        return ""
    if kind.__name__ == "ndarray":
        return _(" (compute it with torch operations, or turn the array into a tensor with torch.from_numpy(...))")
    return _(" (convert NumPy values with int(...) or float(...))")


def _encode_tensor(tensor: torch.Tensor, blobs: list[bytes], path: str) -> dict:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise WireError(_("{path} has dtype {dtype}, which the checks do not compare (use one of {dtypes})").format(
            path=path, dtype=tensor.dtype, dtypes=sorted(DTYPES)))
    if tensor.layout is not torch.strided or tensor.device.type not in ("cpu", "meta") or tensor.is_quantized \
            or tensor.is_nested:
        raise WireError(_("{path} is a {layout} tensor on {device}; return a dense tensor on the CPU").format(
            path=path, layout=tensor.layout, device=tensor.device))
    if tensor.device.type == "meta":
        return {"t": "meta", "dtype": name, "shape": list(tensor.shape)}
    plain = tensor.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    blobs.append(plain.view(torch.uint8).numpy().tobytes())
    return {"t": "tensor", "dtype": name, "shape": list(tensor.shape), "blob": len(blobs) - 1}


def _encode_module(module: nn.Module, blobs: list[bytes], path: str, depth: int, count: Iterator[int]) -> dict:
    kind = type(module)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if _MODULES.get(name, None) is None or _MODULES[name].cls is not kind:
        raise WireError(f"{path}: modules of class {name} are not registered to travel (notebook_sandbox.wire.register_module)")
    init = _encode(_MODULES[name].describe(module), blobs, f"{path}.init", True, depth + 1, count)
    state = _encode(dict(module.state_dict()), blobs, f"{path}.state", False, depth + 1, count)
    return {"t": "module", "class": name, "init": init, "state": state, "training": module.training}


# --------------------------------------------------------------------------- decoding

def decode(tree: Any, blobs: list[bytes], *, modules: bool = False) -> Any:
    """The value ``tree`` describes, checked at every step; `WireError` if malformed, over limits or a stray module."""
    return _decode(tree, blobs, "the value", modules, 0, itertools.count(1))


def _fields(node: Any, path: str, expected: set[str]) -> dict:
    if type(node) is not dict or set(node) != expected:
        raise WireError(f"{path}: malformed node {_brief(node)}")
    return node


def _decode(node: Any, blobs: list[bytes], path: str, modules: bool, depth: int, count: Iterator[int]) -> Any:
    _visit(path, depth, count)
    kind = node.get("t") if type(node) is dict else None
    if kind == "none":
        _fields(node, path, {"t"})
        return None
    if kind in ("bool", "int", "str"):
        value = _fields(node, path, {"t", "v"})["v"]
        expected = {"bool": bool, "int": int, "str": str}[kind]
        if type(value) is not expected:
            raise WireError(f"{path}: a {kind} node holding {_brief(value)}")
        if kind == "int" and not -_INT_RANGE <= value < _INT_RANGE or kind == "str" and len(value) > MAX_STRING:
            raise WireError(f"{path}: {kind} over the limits")
        return value
    if kind == "float":
        text = _fields(node, path, {"t", "v"})["v"]
        if type(text) is str and len(text) < 64:
            try:
                return float.fromhex(text)  # also "inf", "-inf" and "nan"
            except (ValueError, OverflowError):
                pass
        raise WireError(f"{path}: {_brief(text)} is not a float")
    if kind in ("list", "tuple"):
        items = _fields(node, path, {"t", "items"})["items"]
        if type(items) is not list:
            raise WireError(f"{path}: a {kind} node without a list of items")
        values = [_decode(v, blobs, f"{path}[{i}]", modules, depth + 1, count) for i, v in enumerate(items)]
        return values if kind == "list" else tuple(values)
    if kind == "dict":
        items = _fields(node, path, {"t", "items"})["items"]
        if type(items) is not list:
            raise WireError(f"{path}: a dict node without a list of items")
        result = {}
        for item in items:
            if type(item) is not list or len(item) != 2 or type(item[0]) is not str or item[0] in result:
                raise WireError(f"{path}: malformed dict item {_brief(item)}")
            result[item[0]] = _decode(item[1], blobs, f"{path}[{item[0]!r}]", modules, depth + 1, count)
        return result
    if kind == "tensor":
        return _decode_tensor(_fields(node, path, {"t", "dtype", "shape", "blob"}), blobs, path)
    if kind == "meta":
        dtype, shape = _dtype_and_shape(_fields(node, path, {"t", "dtype", "shape"}), path)
        return torch.empty(shape, dtype=dtype, device="meta")
    if kind == "module" and modules:
        return _decode_module(_fields(node, path, {"t", "class", "init", "state", "training"}), blobs, path, depth, count)
    raise WireError(f"{path}: unexpected node {_brief(node)}")


def _dtype_and_shape(node: dict, path: str) -> tuple[torch.dtype, list[int]]:
    dtype, shape = DTYPES.get(node["dtype"]) if type(node["dtype"]) is str else None, node["shape"]
    if dtype is None:
        raise WireError(f"{path}: unknown dtype {_brief(node['dtype'])}")
    if type(shape) is not list or len(shape) > MAX_DIMS or any(type(s) is not int or s < 0 for s in shape):
        raise WireError(f"{path}: malformed shape {_brief(shape)}")
    if math.prod(max(s, 1) for s in shape) >= _INT_RANGE:  # an empty tensor's other sizes still make its strides
        raise WireError(f"{path}: a shape too large for a tensor {_brief(shape)}")
    return dtype, shape


def _decode_tensor(node: dict, blobs: list[bytes], path: str) -> torch.Tensor:
    (dtype, shape), index = _dtype_and_shape(node, path), node["blob"]
    if type(index) is not int or not 0 <= index < len(blobs):
        raise WireError(f"{path}: no tensor bytes number {_brief(index)}")
    data = blobs[index]
    itemsize = torch.empty((), dtype=dtype).element_size()
    # Compare before multiplying out: a huge shape must not be allocated to find it is wrong.
    if len(data) % itemsize or math.prod(shape) != len(data) // itemsize:
        raise WireError(f"{path}: {len(data)} bytes do not hold a {node['dtype']} tensor of shape {tuple(shape)}")
    if not data:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)


def _decode_module(node: dict, blobs: list[bytes], path: str, depth: int, count: Iterator[int]) -> nn.Module:
    kind = _MODULES.get(node["class"]) if type(node["class"]) is str else None
    if kind is None or type(node["training"]) is not bool:
        raise WireError(f"{path}: unknown module class {_brief(node['class'])}")
    init = _decode(node["init"], blobs, f"{path}.init", True, depth + 1, count)
    state = _decode(node["state"], blobs, f"{path}.state", False, depth + 1, count)
    if type(init) is not dict or type(state) is not dict:
        raise WireError(f"{path}: a module needs a dict of arguments and a state dict")
    module = kind.build(**init)
    dtypes = {t.dtype for t in state.values() if isinstance(t, torch.Tensor) and t.is_floating_point()}
    if len(dtypes) == 1:
        module.to(dtypes.pop())  # the dtype the weights travelled in
    module.load_state_dict(state)  # copied into the module's own parameters: tied weights stay tied
    return module.train(node["training"])


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
