"""The private PyTorch names the course's packages use, pinned.

PyTorch may move or change a name that starts with an underscore in any release. Each one used
here is listed with what needs it, and tested for what that code needs from it: after an
upgrade that breaks one, a test below fails and says where to look, instead of an import error
deep in the grader or a widget. A new private name in the code fails the first test until it is
listed (and tested) here.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import torch
from course_packages import course_packages

ROOT = Path(__file__).resolve().parents[1]

# private name → the code that needs it, and what for
PRIVATE_USES = {
    "torch.utils._python_dispatch.TorchDispatchMode": "tfm_widgets/efficiency.py: PeakMemory sees every operator; "
                                                       "notebook_sandbox/delegation.py: the delegation flag sees the "
                                                       "operators a student's code runs",
    "torch.utils._pytree.tree_flatten": "tfm_widgets/efficiency.py: PeakMemory finds the tensors among arguments",
    "torch._tensor_str.printoptions": "notebook_sandbox/display.py: feedback prints tensors with 4 decimals",
    "torch._softmax": "autograde/exercises/ch01_attention.py: a softmax the student may not call",
    "torch.nn.modules.transformer._generate_square_subsequent_mask":
        "autograde/exercises/ch03_masking.py: a causal mask the student may not call",
    "torch._log_softmax": "autograde/exercises/ch01_attention.py: a softmax the student may not call",
    "torch._fused_rms_norm": "autograde/exercises/ch07_norms.py: a norm the student may not call",
    "torch._C._nn.cross_entropy_loss": "autograde/exercises/ch08_encoder_decoder.py: a loss the student may not call",
    "torch._C._nn.nll_loss": "autograde/exercises/ch08_encoder_decoder.py: a loss the student may not call",
    "torch._C._nn.nll_loss_nd": "autograde/exercises/ch08_encoder_decoder.py: a loss the student may not call",
    "torch._C._nn.nll_loss2d": "autograde/exercises/ch08_encoder_decoder.py: a loss the student may not call",
    "torch._safe_softmax": "autograde/exercises/ch09_efficient.py: a softmax the student may not call",
    "torch._masked_softmax": "autograde/exercises/ch09_efficient.py: a softmax the student may not call",
    "torch._scaled_dot_product_attention_math": "autograde/exercises/ch09_efficient.py: an attention kernel",
    "torch._scaled_dot_product_flash_attention": "autograde/exercises/ch09_efficient.py: an attention kernel",
    "torch._scaled_dot_product_flash_attention_for_cpu": "autograde/exercises/ch09_efficient.py: an attention kernel",
    "torch._scaled_dot_product_efficient_attention": "autograde/exercises/ch09_efficient.py: an attention kernel",
    "torch._inductor.async_compile.shutdown_compile_workers":
        "tfm_lab/train.py: compiling is over, its workers must not take the CPU from training "
        "(tests/test_train.py starts a pool and sees it ended)",
}
# `torch.a._b.c` as an expression, and `from torch.a._b import c`
_ATTRIBUTE = re.compile(r"\btorch(?:\.\w+)*\._(?!_)\w+(?:\.\w+)*")
_IMPORT = re.compile(r"^\s*from (torch(?:\.\w+)*\._(?!_)\w+(?:\.\w+)*) import (\w+)", re.MULTILINE)


def _resolve(name: str) -> object:
    """The object called ``name`` (a dotted path: modules, then attributes), or None."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute, None)
        return obj
    return None


def _private_names_in(source: str) -> set[str]:
    imported = {f"{module}.{name}" for module, name in _IMPORT.findall(source)}
    without_imports = _IMPORT.sub("", source)
    return imported | set(_ATTRIBUTE.findall(without_imports))


def test_every_private_name_in_the_code_is_pinned_here_and_no_other():
    found = {}
    for path in (path for package in course_packages() for path in ROOT.glob(f"{package}/**/*.py")):
        for name in _private_names_in(path.read_text(encoding="utf-8")):
            found.setdefault(name, path.relative_to(ROOT).as_posix())
    unpinned = {name: where for name, where in found.items() if name not in PRIVATE_USES}
    assert not unpinned, f"private PyTorch names used but not pinned in {Path(__file__).name}: {unpinned}"
    assert not set(PRIVATE_USES) - set(found), f"pinned but no longer used, unpin: {set(PRIVATE_USES) - set(found)}"


@pytest.mark.parametrize("name", sorted(PRIVATE_USES))
def test_each_pinned_name_still_exists(name):
    assert callable(_resolve(name)), (f"PyTorch {torch.__version__} has no callable {name}, which "
                                      f"{PRIVATE_USES[name]}: find where it went, or a public replacement")


def test_dispatch_mode_sees_operators_and_tree_flatten_finds_tensors():
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((str(func), [type(t) for t in tree_flatten((args, kwargs))[0]]))
            return func(*args, **(kwargs or {}))

    with Record():
        torch.ones(3) + torch.ones(3)
    add = [leaves for func, leaves in seen if func.startswith("aten.add")]
    assert add and add[0][:2] == [torch.Tensor, torch.Tensor], f"{PRIVATE_USES['torch.utils._pytree.tree_flatten']}"


def test_printoptions_is_a_context_manager_that_restores_the_defaults():
    from torch._tensor_str import printoptions

    from notebook_sandbox.display import show

    value = torch.tensor([1 / 3, 1e-5])
    with printoptions(precision=2, sci_mode=False):
        assert repr(value) == "tensor([0.33, 0.00])"
    assert "3.3333e-01" in repr(value)  # the default (scientific, 4 decimals) is back
    assert show(value) == "tensor([0.3333, 0.0000])"


def test_the_forbidden_kernels_still_compute_what_they_stand_for():
    x = torch.randn(2, 5)
    torch.testing.assert_close(torch._softmax(x, -1, False), torch.softmax(x, -1))
    torch.testing.assert_close(torch._safe_softmax(x, -1), torch.softmax(x, -1))
    from torch.nn.modules.transformer import _generate_square_subsequent_mask

    torch.testing.assert_close(_generate_square_subsequent_mask(4), torch.nn.Transformer.generate_square_subsequent_mask(4))
