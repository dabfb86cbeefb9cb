"""The delegation flag (notebook_sandbox.delegation): the exercise's forbidden PyTorch functions are seen under any name
and by the operator underneath; an allowed helper that uses one is not blamed; a flag never fails a check."""
import functools

import pytest
import torch
import torch.nn.functional as F

import tfm_ref
from notebook_sandbox.delegation import Watch, forbidden_ops
from autograde.exercises import ch01_attention, ch02_multihead, ch07_norms, ch08_encoder_decoder


def _seen(names, fn, *args, allowed=()):
    with Watch(names, allowed) as watch:
        out = fn(*args)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.sum().backward()
    return watch.seen


X = torch.randn(2, 3, 5, requires_grad=True)
SOFTMAX = ch01_attention.SOFTMAX.forbidden_ops


@pytest.mark.parametrize("borrowed", [
    lambda x: torch.softmax(x, -1),
    lambda x: x.softmax(-1),
    lambda x: functools.partial(F.softmax, dim=-1)(x),
    lambda x: torch.nn.Softmax(-1)(x),
    lambda x: torch.ops.aten._softmax(x, -1, False),
    lambda x: torch._softmax(x, -1, False),
    lambda x: torch.exp(x - x.logsumexp(-1, keepdim=True)),
    lambda x: torch.special.softmax(x, -1),
], ids=["torch", "method", "partial", "module", "aten", "private", "logsumexp", "special"])
def test_a_forbidden_softmax_is_seen_under_any_name(borrowed):
    assert _seen(SOFTMAX, borrowed, X)


def test_written_out_code_is_not_flagged():
    def softmax(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    assert _seen(SOFTMAX, softmax, X) == []


def test_the_private_flash_kernel_is_seen_for_attention():
    q = torch.randn(1, 2, 4, 8)
    names = ch01_attention.ATTENTION.forbidden_ops
    assert _seen(names, lambda: torch._scaled_dot_product_flash_attention_for_cpu(q, q, q)[0])
    assert _seen(names, lambda: F.scaled_dot_product_attention(q, q, q))


def test_an_allowed_helper_using_a_forbidden_kernel_is_not_blamed():
    """ch02's layer may call tfm_ref's attention, which runs PyTorch's fused kernel."""
    exercise = ch02_multihead.MULTIHEAD
    q = torch.randn(1, 2, 4, 8)
    assert _seen(exercise.forbidden_ops, lambda: tfm_ref.scaled_dot_product_attention(q, q, q),
                 allowed=exercise.allowed_names) == []
    assert _seen(exercise.forbidden_ops, lambda: F.scaled_dot_product_attention(q, q, q),
                 allowed=exercise.allowed_names)


@pytest.mark.parametrize(("exercise", "borrowed"), [
    (ch07_norms.LAYER_NORM, lambda x: F.layer_norm(x, (5,))),
    (ch07_norms.RMS_NORM, lambda x: F.rms_norm(x, (5,))),
    (ch08_encoder_decoder.LABEL_SMOOTHING, lambda x: F.cross_entropy(x.reshape(-1, 5), torch.zeros(6, dtype=torch.long))),
])
def test_each_chapters_library_function_is_seen(exercise, borrowed):
    assert _seen(exercise.forbidden_ops, borrowed, X)


def test_only_pytorch_callables_are_watched():
    assert forbidden_ops([tfm_ref.softmax, ch01_attention.attention_variant]) == ()
    assert "softmax" in forbidden_ops([torch.softmax])


def test_a_check_that_delegates_passes_and_names_what_ran():
    """A flag asks a human to read: the check's verdict is the values', the report names the operator."""
    def softmax(x, dim=-1):
        return torch.softmax(x, dim).nan_to_num(0.0)

    report = ch01_attention.SOFTMAX.run(softmax, hidden=True, seed=0)
    assert report.passed and report.delegated[:2] == ("softmax", "_softmax")
