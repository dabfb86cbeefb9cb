"""The wire format: plain data survives the trip exactly; anything else is refused with a message
that names it, and a malformed tree never becomes a value."""
import math

import pytest
import torch
from torch import nn

from notebook_sandbox import wire
from notebook_sandbox.wire import WireError, decode, encode


def _trip(value, modules=False):
    blobs = []
    return decode(encode(value, blobs, modules=modules), blobs, modules=modules)


@pytest.mark.parametrize("dtype", sorted(wire.DTYPES.values(), key=str))
def test_tensors_of_every_dtype_and_shape_come_back_bit_for_bit(dtype):
    gen = torch.Generator().manual_seed(0)
    for shape in [(), (0,), (3,), (2, 0, 4), (2, 3, 5)]:
        original = (torch.randn(shape, generator=gen) * 100).to(dtype)
        back = _trip(original)
        assert type(back) is torch.Tensor and back.dtype == dtype and back.shape == original.shape
        assert torch.equal(back.view(-1).view(torch.uint8) if back.numel() else back,
                           original.reshape(-1).view(torch.uint8) if original.numel() else original)


def test_views_transposes_and_parameters_travel_as_plain_tensors():
    x = torch.arange(12.0).reshape(3, 4)
    assert torch.equal(_trip(x.t()), x.t())
    assert torch.equal(_trip(x[:, ::2]), x[:, ::2])
    back = _trip(nn.Parameter(torch.ones(2)))
    assert type(back) is torch.Tensor and not back.requires_grad


def test_a_meta_tensor_travels_as_its_dtype_and_shape_without_bytes():
    blobs = []
    tree = encode(torch.empty(3, 5, dtype=torch.bool, device="meta"), blobs)
    assert tree == {"t": "meta", "dtype": "bool", "shape": [3, 5]} and blobs == []
    back = decode(tree, blobs)
    assert type(back) is torch.Tensor and back.is_meta and back.shape == (3, 5) and back.dtype == torch.bool


def test_python_values_keep_their_exact_types():
    value = (None, True, 3, -2**63, 2.5, float("inf"), "text", [1, (2.0,)], {"a": [None]})
    back = _trip(value)
    assert back[:5] == value[:5] and math.isinf(back[5]) and back[6:] == value[6:]
    assert [type(v) for v in back] == [type(v) for v in value]
    assert math.isnan(_trip(float("nan")))


class LyingTensor(torch.Tensor):
    def __eq__(self, other):
        return True


class LyingInt(int):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize(("value", "named"), [
    (torch.zeros(2).as_subclass(LyingTensor), "LyingTensor, a subclass of torch.Tensor"),
    (LyingInt(3), "LyingInt"),
    (object(), "builtins.object"),
    (lambda: 0, "function"),
    (nn.Linear(2, 2), "torch.nn.modules.linear.Linear"),
    ({1: 2}, "dict key of type int"),
    (2**64, "does not fit in 64 bits"),
    (torch.zeros(2, dtype=torch.complex64), "dtype torch.complex64"),
    (torch.zeros(2).to_sparse(), "torch.sparse_coo"),
])
def test_anything_but_plain_data_is_refused_by_name(value, named):
    with pytest.raises(WireError, match=named.replace("(", r"\(").replace(")", r"\)")):
        encode([value], [], path="your output")


def test_numpy_values_are_refused_with_the_fix():
    numpy = pytest.importorskip("numpy")
    with pytest.raises(WireError, match=r"int\(\.\.\.\) or float"):
        encode(numpy.float64(1.0), [])


def test_registered_modules_travel_to_the_sandbox_with_their_weights_and_dtype():
    sublayer = nn.Sequential(nn.Linear(3, 4), nn.Tanh()).double()
    norm = nn.LayerNorm(4, bias=False).eval()
    back = _trip((sublayer, norm), modules=True)
    x = torch.randn(2, 3, dtype=torch.float64)
    assert torch.equal(back[0](x), sublayer(x)) and back[0][0].weight.dtype == torch.float64
    assert back[1].bias is None and not back[1].training


def test_modules_never_come_back_from_the_sandbox():
    blobs = []
    tree = encode(nn.Tanh(), blobs, modules=True)
    with pytest.raises(WireError, match="unexpected node"):
        decode(tree, blobs)


@pytest.mark.parametrize("tree", [
    None, [], "x", {"t": "tensor"}, {"t": "int", "v": "3"}, {"t": "int", "v": True}, {"t": "bool", "v": 1},
    {"t": "float", "v": "0x1.8p+1; import os"}, {"t": "float", "v": 1.5}, {"t": "list", "items": {}},
    {"t": "dict", "items": [["a", {"t": "none"}], ["a", {"t": "none"}]]},
    {"t": "tensor", "dtype": "float32", "shape": [2], "blob": 0},  # 4 bytes for 2 floats
    {"t": "tensor", "dtype": "float32", "shape": [2**40, 2**40], "blob": 0},
    {"t": "tensor", "dtype": "float32", "shape": [-1], "blob": 0},
    {"t": "tensor", "dtype": "float32", "shape": [0, 2**62, 2**62], "blob": 1},  # no bytes, but no strides either
    {"t": "tensor", "dtype": "float32", "shape": [0, 2**64], "blob": 1},
    {"t": "tensor", "dtype": "object", "shape": [1], "blob": 0},
    {"t": "tensor", "dtype": "float32", "shape": [1], "blob": 7},
    {"t": "meta", "dtype": "float32", "shape": [2**40, 2**40]}, {"t": "meta", "dtype": "object", "shape": [1]},
    {"t": "meta", "dtype": "float32", "shape": [1], "blob": 0}, {"t": "meta", "dtype": "float32", "shape": "2"},
    {"t": "none", "extra": 1},
    {"t": "module", "class": "os.system", "init": {"t": "dict", "items": []}, "state": {"t": "dict", "items": []},
     "training": False},
])
def test_malformed_trees_are_refused(tree):
    with pytest.raises(WireError):
        decode(tree, [b"\0" * 4, b""], modules=True)


def test_deep_and_huge_trees_are_refused():
    deep = {"t": "none"}
    for _ in range(wire.MAX_DEPTH + 2):
        deep = {"t": "list", "items": [deep]}
    with pytest.raises(WireError, match="nested"):
        decode(deep, [])
    wide = {"t": "list", "items": [{"t": "none"}] * (wire.MAX_ITEMS + 1)}
    with pytest.raises(WireError, match="more than"):
        decode(wide, [])


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 3, bias=False)
        self.head = nn.Linear(3, 3, bias=False)
        self.head.weight = self.embed.weight  # one parameter, two names


wire.register_module(_Tied, lambda m: {})


def test_tied_weights_stay_tied_after_the_trip():
    back = _trip(_Tied().double(), modules=True)
    assert back.head.weight is back.embed.weight and back.embed.weight.dtype == torch.float64
