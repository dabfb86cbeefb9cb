"""Integrity in the student's own kernel (the checks run beside their code there): borrowed answers
earn nothing, patching the grader changes nothing, and the audit flags what a student's cells should
not do. When grading, the checks do not run beside student code at all: tests/test_grading_attacks.py."""
import math

import pytest
import torch
import torch.nn.functional as F

import tfm_ref
from autograde import check
from autograde.audit import audit
from autograde.checking import SNAPSHOT, CheckFailed
from autograde.integrity import Forbid, ForbiddenCall


def good_softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


def _library(x, dim=-1):
    return torch.softmax(x, dim)


def _method(x, dim=-1):
    return x.softmax(dim)


def _functional(x, dim=-1):
    return F.softmax(x, dim=dim)


def _reference(x, dim=-1):
    return tfm_ref.softmax(x, dim)


def _log_softmax(x, dim=-1):
    return torch.log_softmax(x, dim).exp()


def _switches_guard_off(x, dim=-1):
    import sys

    sys.setprofile(None)
    return torch.softmax(x, dim)


@pytest.mark.parametrize("borrowed", [_library, _method, _functional, _reference, _log_softmax, _switches_guard_off,
                                      tfm_ref.softmax])
def test_calling_the_reference_or_the_library_softmax_earns_nothing(borrowed):
    with pytest.raises(CheckFailed, match="ForbiddenCall"):
        check("ch01_attention.softmax", borrowed)


def test_attention_through_the_fused_kernel_earns_nothing():
    def sdpa(q, k, v, mask=None, *, return_weights=False):
        return F.scaled_dot_product_attention(q, k, v)

    with pytest.raises(CheckFailed, match="scaled_dot_product_attention, which is off limits"):
        check("ch01_attention.attention", sdpa)


def test_guard_allows_named_helpers_and_lifts_on_exit():
    with Forbid([torch.softmax], allowed=[tfm_ref.causal_mask]):
        assert tfm_ref.causal_mask(3).shape == (3, 3)
        with pytest.raises(ForbiddenCall):
            torch.softmax(torch.zeros(2), 0)
    assert torch.softmax(torch.zeros(2), 0).sum() == 1


def test_patched_allclose_does_not_make_a_wrong_answer_pass():
    original = torch.allclose
    torch.allclose = lambda *args, **kwargs: True
    try:
        with pytest.raises(CheckFailed):
            check("ch01_attention.softmax", lambda x, dim=-1: x)
        assert torch.allclose is original  # the check restored it
    finally:
        torch.allclose = original


def test_swapped_code_of_the_checker_is_restored():
    from autograde import checking

    saved = checking.Exercise.check.__code__
    checking.Exercise.check.__code__ = (lambda self, candidate, hidden=False: None).__code__
    try:
        with pytest.raises(CheckFailed):
            check("ch01_attention.softmax", lambda x, dim=-1: x)
    finally:
        checking.Exercise.check.__code__ = saved


def test_patched_torch_exp_does_not_change_the_expected_values():
    original = torch.exp
    torch.exp = lambda x: x  # would make reference and student agree on nonsense
    try:
        with pytest.raises(CheckFailed):
            check("ch01_attention.softmax", lambda x, dim=-1: x / x.sum(dim, keepdim=True))
    finally:
        torch.exp = original
        SNAPSHOT.restore()
    assert math.isclose(float(torch.exp(torch.tensor(0.0))), 1.0)


@pytest.mark.parametrize(("code", "flag"), [
    ("import tfm_ref\nsoftmax = tfm_ref.softmax", "imports-reference"),
    ("from autograde.checking import SNAPSHOT", "imports-grader"),
    ("import torch\ntorch.allclose = lambda *a, **k: True", "patches-modules"),
    ("import torch\nsetattr(torch, 'allclose', None)", "patches-modules"),
    ("def f(): pass\nf.__code__ = (lambda: 1).__code__", "patches-modules"),
    ("text = open('/work/solutions/ch01.md').read()", "reads-files"),
    ("import os\nos.listdir('..')", "reads-files"),
    ("import subprocess\nsubprocess.run(['ls'])", "runs-commands"),
    ("exec('x = 1')", "dynamic-code"),
    ("def broken(:", "syntax-error"),
])
def test_audit_flags_what_student_code_should_not_do(code, flag):
    assert flag in audit([code])


def test_audit_leaves_ordinary_solutions_and_widgets_clean():
    solution = ("import math\nimport torch\nfrom tfm_ref.widgets.attention import attention_explorer\n"
                "def softmax(x, dim=-1):\n    m = x.amax(dim=dim, keepdim=True)\n    e = torch.exp(x - m)\n"
                "    out = e / e.sum(dim=dim, keepdim=True)\n    out[0] = out[0]\n    return out\n")
    assert audit([solution]) == []
