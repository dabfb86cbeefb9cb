"""The check framework: comparisons, shrinking, diagnosis and messages, on a toy exercise."""
import re

import pytest
import torch

from autograde.checking import CheckFailed, check
from autograde.spec import Call, Case, Exercise, Mistake, ModuleAdapter, get_exercise, randn, random_dims


def reference_scale(x, factor=2.0):
    return x * factor


def forgot_factor(x, factor=2.0):
    return x


def _inputs(gen, dims, dtype):
    return Call(randn(gen, dims["N"], dims["M"], dtype=dtype), factor=2.0)


TOY = Exercise(
    name="scale", reference=reference_scale, inputs=_inputs, arg_names=("x",),
    shapes=[dict(N=1, M=1), dict(N=2, M=3), dict(N=4, M=5)],
    visible=[Case("random")],
    hidden=[Case("random sizes", dims=random_dims(N=(1, 5), M=(1, 5))), Case("float64", dtype=torch.float64),
            Case("gradients", grad=True)],
    mistakes=[Mistake("factor ignored", forgot_factor, "multiply by `factor`.")],
)


def test_reference_passes_visible_and_hidden():
    assert TOY.run(reference_scale, hidden=True).passed


def test_catalogued_mistake_is_named_with_its_hint():
    report = TOY.run(forgot_factor)
    assert not report.passed and report.mistake == "factor ignored"
    assert "Likely mistake — factor ignored: multiply by `factor`." in report.message


def test_a_slow_failure_is_named_but_not_shrunk_once_its_time_is_spent(monkeypatch):
    """What only improves the message waits for nothing: past the budget the case's own input is shown, and the
    mistake is still named (a training check retrains for every smaller input)."""
    import autograde.diagnosis

    monkeypatch.setattr(autograde.diagnosis, "EXTRAS_SECONDS", 0.0)
    unexplained = TOY.run(lambda x, factor=2.0: x * factor + 1)
    assert "Smallest failing input (N=4, M=5" in unexplained.message
    assert "on a smaller input" not in unexplained.message
    assert TOY.run(forgot_factor).mistake == "factor ignored"


def test_failure_shows_the_smallest_failing_input():
    report = TOY.run(lambda x, factor=2.0: x * factor + 1)
    assert "Smallest failing input (N=1, M=1" in report.message
    assert "expected:" in report.message and "got:" in report.message
    # the case's label names its own (largest) input: the values quoted in the first line are the smaller one's
    assert report.message.startswith("✗ scale: check 'random' failed — on a smaller input (below), ")
    only_large = TOY.run(lambda x, factor=2.0: x * factor if x.numel() < 20 else x)
    assert "check 'random' failed — the output" in only_large.message, "not shrunk: its own input's values"


def test_a_tuple_outputs_items_are_shown_by_name_and_multi_line_values_stay_aligned():
    def scale_and_stack(x, factor=2.0):
        return x * factor, torch.stack([x, x])

    pair = Exercise(name="scale_and_stack", reference=scale_and_stack, inputs=_inputs, arg_names=("x",),
                    shapes=[dict(N=2, M=2)], visible=[Case("random")], output_names=("scaled", "stacked"))
    lines = pair.run(lambda x, factor=2.0: (x * factor, torch.stack([x, -x]))).message.splitlines()

    def second_line_under_the_first(start: str) -> bool:  # a value's later lines sit under its first, past the name
        first = next(i for i, line in enumerate(lines) if line.startswith(start))
        innermost = re.search(r"tensor\(\[+", lines[first]).end() - 1  # the last of the opening brackets
        return lines[first + 1].index("[") == innermost

    for name in ("x", "scaled", "stacked"):  # the input, and each output, expected then got
        assert second_line_under_the_first(f"    {name} = tensor([[")
    expected, got = lines.index("expected:"), lines.index("got:")
    assert lines[expected + 1].startswith("    scaled = ") and lines[got + 1].startswith("    scaled = ")


def test_a_mistake_that_gives_the_students_values_only_on_the_shrunk_input_is_not_named():
    # right factor but on the first element, which is all a 1×1 input has: there it looks like "factor ignored"
    def first_element_unscaled(x, factor=2.0):
        scale = torch.full(x.shape, factor + 1.0, dtype=x.dtype)
        scale.view(-1)[0] = 1.0
        return x * scale

    report = TOY.run(first_element_unscaled)
    assert "Smallest failing input (N=1, M=1" in report.message
    assert report.mistake is None and "Likely mistake" not in report.message


def test_right_values_written_over_the_input_fail_and_name_the_input():
    report = TOY.run(lambda x, factor=2.0: x.mul_(factor))
    assert not report.passed
    assert "your code changed its input `x` in place" in report.message


def test_a_case_s_flag_stays_on_its_shrunk_input():
    def inputs(gen, dims, dtype):  # neg=1: a negative factor, a flag the size ladder does not have
        return Call(randn(gen, dims["N"], dims["M"], dtype=dtype), factor=-2.0 if dims.get("neg") else 2.0)

    flagged = Exercise(name="scale", reference=reference_scale, inputs=inputs, arg_names=("x",), shapes=TOY.shapes,
                       visible=[Case("negative factor", dims=dict(N=4, M=5, neg=1))])
    report = flagged.run(lambda x, factor=2.0: x * abs(factor))
    # the flag is the case's (its label says it), not a size: the shown input carries it, the sizes do not list it
    assert "Smallest failing input (N=1, M=1; torch.float32)" in report.message and "factor = -2.0" in report.message


def test_the_sizes_of_a_failing_input_list_a_size_the_ladder_lacks_but_no_flag():
    def inputs(gen, dims, dtype):  # H=3: a leading axis of heads, a size the ladder has not; neg=1: a flag
        x = randn(gen, dims.get("H", 1), dims["N"], dims["M"], dtype=dtype)
        return Call(x, factor=-2.0 if dims.get("neg") else 2.0)

    headed = Exercise(name="scale", reference=reference_scale, inputs=inputs, arg_names=("x",), shapes=TOY.shapes,
                      visible=[Case("three heads, negative factor", dims=dict(N=4, M=5, H=3, neg=1))])
    report = headed.run(lambda x, factor=2.0: x * abs(factor))
    assert "Smallest failing input (N=1, M=1, H=3; torch.float32)" in report.message, report.message


def test_an_output_that_changes_with_the_random_seed_is_told_something_random_is_on():
    noisy = TOY.run(lambda x, factor=2.0: torch.nn.functional.dropout(x * factor, 0.5))  # dropout left on
    assert "Your output changes from one call to the next on this same input" in noisy.message
    wrong = TOY.run(lambda x, factor=2.0: x * factor + 1)  # wrong, but the same every time
    assert "changes from one call to the next" not in wrong.message


def test_an_exception_that_two_mistakes_raise_alike_names_neither():
    def refuses(x, factor=2.0):
        raise ValueError("this check's input is 2-D")

    twins = Exercise(name="scale", reference=reference_scale, inputs=_inputs, arg_names=("x",), shapes=TOY.shapes,
                     visible=[Case("random")],
                     mistakes=[Mistake("one way to get here", refuses, "first."),
                               Mistake("another way to get here", refuses, "second.")])
    report = twins.run(refuses)
    assert "your code raised ValueError: this check's input is 2-D" in report.message
    assert report.mistake is None and "Likely mistake" not in report.message


def test_failure_only_on_large_inputs_is_shown_at_the_smallest_size_that_fails():
    report = TOY.run(lambda x, factor=2.0: x * factor if x.numel() < 20 else x)
    assert "(N=4, M=5" in report.message


def test_exception_is_reported_with_the_students_line():
    def crashes(x, factor=2.0):
        raise IndexError("oops")

    report = TOY.run(crashes)
    assert "your code raised IndexError: oops" in report.message and "raise IndexError" in report.message


def test_wrong_shape_and_dtype_are_named():
    assert "has shape (2,)" in TOY.run(lambda x, factor=2.0: torch.zeros(2)).message
    report = TOY.run(lambda x, factor=2.0: (x * factor).float(), hidden=True)
    assert "dtype torch.float32, expected torch.float64" in report.message


def test_a_tensor_on_another_device_is_named_and_a_meta_tensor_is_compared_without_values():
    from autograde.comparison import difference, same
    from notebook_sandbox.evaluation import Outcome
    meta = torch.empty(2, 3, dtype=torch.bool, device="meta")
    said = difference(meta, torch.ones(2, 3, dtype=torch.bool))
    assert said.startswith("the output is on the cpu device, expected on the meta device") and "device=device" in said
    assert difference(meta, torch.empty(2, 3, dtype=torch.bool, device="meta")) is None  # no values to differ
    assert "shape (3, 2)" in difference(meta, torch.empty(3, 2, dtype=torch.bool, device="meta"))
    assert "dtype torch.int64" in difference(meta, torch.empty(2, 3, dtype=torch.int64, device="meta"))
    assert same(Outcome(output=meta), Outcome(output=meta.clone()))
    assert not same(Outcome(output=meta), Outcome(output=torch.ones(2, 3, dtype=torch.bool)))


def test_nan_where_the_reference_is_finite_is_named():
    assert "NaN or inf" in TOY.run(lambda x, factor=2.0: x * factor / 0).message


def test_wrong_gradient_with_right_output_is_named():
    def detached_half(x, factor=2.0):
        return x.detach() * factor + (x - x.detach())  # right values, gradient 1 instead of 2

    report = TOY.run(detached_half, hidden=True)
    assert not report.passed and "gradient of `x` differs" in report.message
    assert "expected gradient of `x`:" in report.message and "your gradient of `x`:" in report.message


def test_check_raises_an_assertion_error_subclass_with_the_diagnosis():
    with pytest.raises(AssertionError, match="factor ignored"):
        TOY.check(forgot_factor)
    assert issubclass(CheckFailed, AssertionError)


def test_check_by_key_finds_the_chapter_exercise(capsys):
    def softmax(x, dim=-1):  # stable, and zeros for an all −inf row, as chapter 1 asks
        top = x.amax(dim, keepdim=True)
        e = torch.exp(x - torch.where(torch.isfinite(top), top, torch.zeros_like(top)))
        total = e.sum(dim, keepdim=True)
        return e / torch.where(total > 0, total, torch.ones_like(total))

    check("ch01_attention.softmax", softmax)
    assert "✓ softmax" in capsys.readouterr().out


def test_unknown_exercise_key_is_a_value_error():
    with pytest.raises(ValueError, match="has no exercise"):
        get_exercise("ch01_attention.nope")
    with pytest.raises(ValueError, match="chapter.name"):
        get_exercise("softmax")


class _Proj(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        return self.proj(x)


class _Ref(_Proj):
    """The toy reference. The students' classes below build on `_Proj`, as a student's class cannot build on
    tfm_ref's (withheld while grading)."""


class _Renamed(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.linear = torch.nn.Linear(d, d)

    def forward(self, x):
        return self.linear(x)


MODULE_TOY = Exercise(
    name="Proj", reference=_Ref, adapter=ModuleAdapter(lambda dims: dict(d=dims["D"])),
    inputs=lambda gen, dims, dtype: Call(randn(gen, 2, dims["D"], dtype=dtype)),
    shapes=[dict(D=2), dict(D=4)], visible=[Case("random")], hidden=[Case("gradients", grad=True)],
)


def test_module_exercise_loads_reference_weights_into_the_students_module():
    class Same(_Proj):
        pass

    assert MODULE_TOY.run(Same, hidden=True).passed


def test_module_with_other_parameter_names_is_told_the_tfm_ref_names():
    report = MODULE_TOY.run(_Renamed)
    assert not report.passed and "check 'random' failed" in report.message
    assert "missing from the module __init__ built (create them there, named as tfm_ref names them): " \
           "proj.bias, proj.weight" in report.message
    assert "not in tfm_ref: linear.bias, linear.weight" in report.message
    assert "Smallest failing input (D=2;" in report.message and "built as Proj(d=2)" in report.message  # shrunk


class _NoBias(torch.nn.Module):
    def __init__(self, d, bias=True):
        super().__init__()
        self.proj = torch.nn.Linear(d, d, bias=True)  # ignores bias=False

    def forward(self, x):
        return self.proj(x)


class _Wide(_Proj):
    def __init__(self, d, bias=True):
        super().__init__(d)
        self.proj = torch.nn.Linear(d, 2 * d)


def test_a_bias_that_should_not_be_there_and_a_wrong_shape_are_said_in_words():
    no_bias = Exercise(name="Proj", reference=lambda d, bias: _RefBias(d, bias),
                       adapter=ModuleAdapter(lambda dims: dict(d=dims["D"], bias=False)),
                       inputs=lambda gen, dims, dtype: Call(randn(gen, 2, dims["D"], dtype=dtype)),
                       shapes=[dict(D=2)], visible=[Case("no biases")])
    report = no_bias.run(_NoBias)
    assert "✗ your `proj` has a bias, and tfm_ref's has none (it is built with bias=False)" in report.message
    wide = MODULE_TOY.run(_Wide)
    assert "your `proj.weight` has shape (4, 2), tfm_ref's (2, 2)" in wide.message  # at the smallest size


class _RefBias(torch.nn.Module):
    def __init__(self, d, bias):
        super().__init__()
        self.proj = torch.nn.Linear(d, d, bias=bias)

    def forward(self, x):
        return self.proj(x)


def _crashes_on_odd(x, factor=2.0):
    return x.view(-1, 2) * factor  # a shape error on an odd number of elements


def test_a_mistake_that_raises_is_recognised_by_its_exception():
    crashing = Exercise(name="scale", reference=reference_scale, inputs=_inputs, arg_names=("x",),
                        shapes=[dict(N=1, M=1), dict(N=3, M=3)], visible=[Case("random")],
                        mistakes=[Mistake("viewed in pairs", _crashes_on_odd, "do not reshape x.")])
    report = crashing.run(_crashes_on_odd)
    assert report.mistake == "viewed in pairs" and "Likely mistake — viewed in pairs" in report.message


def test_the_released_stub_is_told_to_write_its_code():
    def stub(x, factor=2.0):
        raise NotImplementedError()

    report = TOY.run(stub, hidden=True)
    assert report.message.startswith("✗ scale: not written yet") and "Smallest failing input" not in report.message


def test_the_fix_is_shown_only_when_the_same_mistake_fails_again():
    staged = Exercise(name="scale", key="staged_scale", reference=reference_scale, inputs=_inputs,
                      arg_names=("x",), shapes=[dict(N=1, M=1)], visible=[Case("random")],
                      mistakes=[Mistake("factor ignored", forgot_factor, "the output is x itself.",
                                        fix="return x * factor")])
    with pytest.raises(CheckFailed) as first:
        staged.check(forgot_factor)
    assert "the output is x itself." in str(first.value) and "return x * factor" not in str(first.value)
    assert "Try again in the notebook" in str(first.value)  # a run of nbgrader validate, a process each, shows none
    with pytest.raises(CheckFailed) as second:
        staged.check(forgot_factor)
    assert "How to fix it: return x * factor" in str(second.value)
    assert "How to fix it: return x * factor" in staged.run(forgot_factor).message  # grading shows it (folded)


def test_a_failing_earlier_exercise_that_this_one_uses_is_named():
    double = Exercise(name="double", reference=lambda x: x * 2, arg_names=("x",),
                      inputs=lambda gen, dims, dtype: Call(randn(gen, dims["N"], dtype=dtype)),
                      shapes=[dict(N=3)], visible=[Case("random")])
    quadruple = Exercise(name="quadruple", reference=lambda x: x * 4, arg_names=("x",), uses=(double,),
                         inputs=lambda gen, dims, dtype: Call(randn(gen, dims["N"], dtype=dtype)),
                         shapes=[dict(N=3)], visible=[Case("random")])
    namespace = {}
    exec("def double(x):\n    return x * 3\n\ndef quadruple(x):\n    return double(double(x))\n", namespace)
    report = quadruple.run(namespace["quadruple"])
    assert "Your `double` from an earlier exercise fails its own check, and this exercise calls it: fix it first." \
        in report.message
    assert "✗ double: check 'random' failed" in report.message
    exec("def double(x):\n    return x * 2\n", namespace)
    assert quadruple.run(namespace["quadruple"]).passed
    # one that never names it is not told it calls it
    exec("def double(x):\n    return x * 3\n\ndef quadruple(x):\n    return x * 5\n", namespace)
    message = quadruple.run(namespace["quadruple"]).message
    assert "calls it: fix it first" not in message
    assert "Your `double` from an earlier exercise fails its own check; if this exercise calls it, fix that first." \
        in message


def test_integer_inputs_show_no_float_dtype_and_lists_keep_their_brackets():
    lengths = Exercise(name="count", reference=lambda lengths: sum(lengths), arg_names=("lengths",),
                       inputs=lambda gen, dims, dtype: Call([1, 2, dims["N"]]), shapes=[dict(N=3)],
                       visible=[Case("a list")])
    message = lengths.run(lambda lengths: 0).message
    assert "Smallest failing input (N=3):" in message and "lengths = [1, 2, 3]" in message


def test_items_of_a_tuple_output_are_named_and_a_deliberate_dtype_is_not_blamed_on_float32():
    pair = Exercise(name="pair", reference=lambda x: (x, x.sum()), arg_names=("x",), output_names=("copy", "total"),
                    inputs=lambda gen, dims, dtype: Call(randn(gen, dims["N"], dtype=dtype)), shapes=[dict(N=3)],
                    visible=[Case("random")])
    assert "the total is " in pair.run(lambda x: (x, x.sum() + 1)).message  # one number: both values said
    as_double = Exercise(name="table", reference=lambda n: torch.zeros(n, dtype=torch.float32), arg_names=("n",),
                         inputs=lambda gen, dims, dtype: Call(dims["N"]), shapes=[dict(N=3)], visible=[Case("three")])
    message = as_double.run(lambda n: torch.zeros(n, dtype=torch.float64)).message
    assert "dtype torch.float64, expected torch.float32." in message and "hard-code" not in message
    assert "do not hard-code float32" in TOY.run(lambda x, factor=2.0: (x * factor).float(), hidden=True).message


def test_a_named_output_s_verb_agrees_with_its_name_and_a_single_number_is_said_with_both_values():
    from autograde.comparison import difference

    three, other = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 4.0])
    assert difference(three, other, what="scores").startswith("the scores differ: largest difference 1 at index (2,)")
    assert difference(three, other, what="loss of each step").startswith("the loss of each step differs:")
    assert difference(three, other[:2], what="parents") == "the parents have shape (2,), expected (3,)"
    assert difference(torch.tensor(0.6281), torch.tensor(0.5043)) == "the output is 0.5043, expected 0.6281"


def test_a_tuple_with_the_right_items_in_another_order_is_told_the_order():
    from autograde.comparison import difference

    out, weights = torch.ones(2, 1), torch.zeros(2, 3)
    assert difference((out, weights), (weights, out), names=("output", "weights")) == \
        "the output's items are right but in the wrong order: the output and the weights are in each other's " \
        "places; return (output, weights)"
    assert difference((out, weights), (weights, weights), names=("output", "weights")) == \
        "the output has shape (2, 3), expected (2, 1)"  # not a reordering: the first difference, as before
    # Only the two items that moved are named: the third is the check's own (train_step's update sizes).
    loss, lr, update = torch.zeros(2), torch.ones(2), torch.full((2,), 3.0)
    assert difference((loss, lr, update), (lr, loss, update), names=("loss", "rate", "update")) == \
        "the output's items are right but in the wrong order: the loss and the rate are in each other's places"


def test_every_item_of_a_tuple_that_differs_is_named_not_only_the_first():
    from autograde.comparison import difference

    loss, lr, update = torch.zeros(2), torch.ones(2), torch.full((2,), 3.0)
    names = ("loss of each step", "learning rate of each step", "update")
    assert difference((loss, lr, update), (loss + 1, lr + 1, update), names=names).endswith(
        "; the learning rate of each step differs too")
    assert difference((loss, lr, update), (loss + 1, lr + 1, update + 1), names=names).endswith(
        "; the learning rate of each step and the update differ too")


def test_a_number_returned_as_a_tensor_is_told_to_take_it_out_with_item():
    def as_tensor(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
        return torch.tensor(2 * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes_per_elem)

    report = get_exercise("ch02_multihead.kv_cache_bytes").run(as_tensor)
    assert not report.passed
    assert "should be a plain int, got a tensor of shape (): take the number out with .item()" in report.message


def test_a_meta_tensor_for_a_cpu_one_fails_its_check_with_the_device_named():
    """A tensor of shapes without values (device='meta') where a CPU one is expected: the check names the device;
    the diagnosis, which compares values, must not crash the grader on it."""
    exercise = get_exercise("ch01_attention.softmax")
    report = exercise.run(lambda x, dim=-1: torch.empty(x.shape, dtype=x.dtype, device="meta"), hidden=True, seed=0)
    assert not report.passed and "meta device" in report.message


def test_a_count_returned_as_a_float_is_told_to_return_an_int():
    def as_float(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
        return 2.0 * n_layers * n_kv_heads * head_dim * seq_len * batch * bytes_per_elem

    report = get_exercise("ch02_multihead.kv_cache_bytes").run(as_float)
    assert not report.passed
    assert "should be a whole number (an int), got the float" in report.message


class _SavesPositions(_Proj):
    """Right values, with a position table saved beside the weights (a Hugging Face habit)."""

    def __init__(self, d):
        super().__init__(d)
        self.register_buffer("position_ids", torch.arange(d))


def test_a_saved_buffer_the_reference_lacks_is_named_a_buffer_with_the_fix():
    report = MODULE_TOY.run(_SavesPositions)
    assert not report.passed
    assert "your buffer `position_ids` is saved with the weights, and tfm_ref saves no such buffer: " \
           "register it with persistent=False" in report.message
    assert "not in tfm_ref" not in report.message

    class NotSaved(_Proj):
        def __init__(self, d):
            super().__init__(d)
            self.register_buffer("position_ids", torch.arange(d), persistent=False)

    assert MODULE_TOY.run(NotSaved).passed


def _offset_inputs(gen, dims, dtype):
    return Call(randn(gen, dims["N"], dtype=dtype), dims["O"])


def _add_offset(x, offset):
    return x + offset


def test_a_failure_at_offset_zero_is_still_shrunk_when_the_offset_places_the_input():
    def wrong_everywhere(x, offset):
        return x + offset + 1

    def exercise(**extra):
        return Exercise(name="shift", reference=_add_offset, inputs=_offset_inputs, arg_names=("x", "offset"),
                        shapes=[dict(N=1, O=1), dict(N=3, O=2)], visible=[Case("offset 0", dims=dict(N=5, O=0))],
                        **extra)

    assert "Smallest failing input (N=5, O=0" in exercise().run(wrong_everywhere).message
    assert "Smallest failing input (N=1, O=1" in exercise(offsets=("O",)).run(wrong_everywhere).message


class _ProjFrozen(torch.nn.Module):
    """proj.weight and proj.bias kept as buffers: right values, nothing to train."""

    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Module()
        self.proj.register_buffer("weight", torch.zeros(d, d))
        self.proj.register_buffer("bias", torch.zeros(d))

    def forward(self, x):
        return x @ self.proj.weight.T + self.proj.bias


class _ProjPlain(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Module()
        self.proj.weight, self.proj.bias = torch.zeros(d, d), torch.zeros(d)  # not registered

    def forward(self, x):
        return x @ self.proj.weight.T + self.proj.bias


def test_parameters_kept_as_buffers_are_told_they_get_no_gradient():
    report = MODULE_TOY.run(_ProjFrozen, hidden=True)
    assert not report.passed and "hidden check 'gradients' failed" in report.message
    assert "there is no gradient for the parameter `proj.bias`: it is not trainable (a buffer, or " \
           "requires_grad=False)" in report.message

    class Frozen(_Proj):
        def __init__(self, d):
            super().__init__(d)
            self.proj.weight.requires_grad_(False)

    report = MODULE_TOY.run(Frozen, hidden=True)
    assert "there is no gradient for the parameter `proj.weight`: it is not trainable" in report.message


def test_tensors_kept_as_plain_attributes_are_told_to_be_parameters():
    report = MODULE_TOY.run(_ProjPlain)
    assert "your `proj.weight` is a plain tensor attribute, so it is not registered: make it an nn.Parameter" \
           in report.message
    assert "missing" not in report.message


def test_a_failure_that_raises_is_shown_where_it_raises_not_where_a_smaller_input_gives_wrong_values():
    def raises_on_large(x, factor=2.0):
        if x.numel() > 6:
            raise ValueError("mask of shape (5,) does not broadcast")
        return x * factor + 1

    report = TOY.run(raises_on_large)
    assert "your code raised ValueError: mask of shape (5,) does not broadcast" in report.message
    assert "Smallest failing input (N=4, M=5" in report.message  # not shrunk to N=2, M=3, where it is wrong values


def _plus_one(x, k, factor=2.0):
    return x * factor + 1


def _plus_one_or_two(x, k, factor=2.0):
    return x * factor + 1 + k  # the same as _plus_one where k = 0


def test_mistakes_that_give_the_same_values_on_the_failing_input_are_told_apart_on_other_inputs():
    def k_of(gen):
        return int(torch.randint(0, 2, (1,), generator=gen))

    def inputs(gen, dims, dtype):
        k = k_of(gen)
        return Call(randn(gen, dims["N"], dtype=dtype), k)

    tied = Exercise(name="scale", reference=lambda x, k, factor=2.0: x * factor, inputs=inputs, arg_names=("x", "k"),
                    shapes=[dict(N=3)], visible=[Case("random")],
                    mistakes=[Mistake("plus one", _plus_one, "one added."),
                              Mistake("plus one or two", _plus_one_or_two, "k added too.")])
    # seeds whose input has k = 0, where the two mistakes agree, and the next seed's k = 1, where they do not
    seeds = [s for s in range(50) if k_of(torch.Generator().manual_seed(s)) == 0
             and k_of(torch.Generator().manual_seed(s + 1)) == 1][:4]
    assert seeds
    for seed in seeds:
        assert tied.run(_plus_one_or_two, seed=seed).mistake == "plus one or two"
        assert tied.run(_plus_one, seed=seed).mistake == "plus one"


def _plus_one_everywhere(x, k, factor=2.0):
    return x * factor + 1


def _plus_one_where_k_is_0(x, k, factor=2.0):
    return x * factor + (1 if k == 0 else 0)


def test_mistakes_that_agree_on_every_input_of_a_case_are_told_apart_where_the_student_passes():
    """On the case where k is always 0 the two mistakes give the same values on every seed; on the other, one of
    them is right. A student whose code passes there did not make the one that fails there, and the other way round."""
    def inputs(k):
        return lambda gen, dims, dtype: Call(randn(gen, dims["N"], dtype=dtype), k)

    tied = Exercise(name="scale", reference=lambda x, k, factor=2.0: x * factor, arg_names=("x", "k"),
                    inputs=inputs(0), shapes=[dict(N=3)], visible=[Case("k = 0"), Case("k = 1", inputs=inputs(1))],
                    mistakes=[Mistake("plus one everywhere", _plus_one_everywhere, "one added."),
                              Mistake("plus one where k = 0", _plus_one_where_k_is_0, "one added where k = 0.")])
    for seed in range(3):
        assert tied.run(_plus_one_where_k_is_0, seed=seed).mistake == "plus one where k = 0"
        assert tied.run(_plus_one_everywhere, seed=seed).mistake == "plus one everywhere"


def test_an_output_a_graded_run_could_not_send_back_fails_in_the_notebook_too():
    import numpy

    def numpy_count(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
        return numpy.prod([2, n_layers, n_kv_heads, head_dim, seq_len, batch, bytes_per_elem])

    report = get_exercise("ch02_multihead.kv_cache_bytes").run(numpy_count)
    assert not report.passed
    assert "your output is a numpy.int64" in report.message and "convert NumPy values with int(...)" in report.message


def test_a_numpy_array_for_a_tensor_is_told_to_become_a_tensor_not_a_number():
    import numpy

    def padding_mask(lengths, max_len):
        return numpy.arange(max_len)[None, :] < numpy.asarray(lengths)[:, None]

    report = get_exercise("ch03_masking.padding_mask").run(padding_mask)
    assert "your output is a numpy.ndarray" in report.message and "torch.from_numpy(...)" in report.message
    assert "int(...)" not in report.message


class _TwoProjections(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.first, self.second = torch.nn.Linear(d, d), torch.nn.Linear(d, d)

    def forward(self, x):
        return self.second(self.first(x))


class _OneProjectionTwice(_TwoProjections):
    def __init__(self, d):
        super().__init__(d)
        self.second = self.first  # the same module in both places


class _OneWeightTwice(_TwoProjections):
    def __init__(self, d):
        super().__init__(d)
        self.second.weight = self.first.weight  # tied by hand: two modules, one weight


def test_one_module_used_in_two_places_is_named():
    two = Exercise(name="Two", reference=_TwoProjections, adapter=ModuleAdapter(lambda dims: dict(d=dims["D"])),
                   inputs=lambda gen, dims, dtype: Call(randn(gen, 2, dims["D"], dtype=dtype)),
                   shapes=[dict(D=2), dict(D=4)], visible=[Case("random")])
    assert two.run(_TwoProjections).passed
    report = two.run(_OneProjectionTwice)
    assert "your `first` and `second` are one and the same module, where tfm_ref has one each" in report.message
    report = two.run(_OneWeightTwice)
    assert "your `first.weight` and `second.weight` are one and the same tensor, where tfm_ref has one each" \
           in report.message


def test_the_same_problem_in_several_items_is_said_once():
    from autograde.comparison import difference

    parents, tokens = torch.zeros(2, dtype=torch.long), torch.ones(2, dtype=torch.long)
    assert difference((parents, tokens), (parents.int(), tokens.int()), names=("parents", "tokens")) == \
        "the parents have dtype torch.int32, expected torch.int64; the tokens likewise"


def _softmax_without_keepdim(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim)


def _attention_testing_the_mask_for_truth(q, k, v, mask=None, *, return_weights=False):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v, weights) if return_weights else weights @ v


def _attention_indexing_with_the_mask(q, k, v, mask=None, *, return_weights=False):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores[~mask] = float("-inf")
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v, weights) if return_weights else weights @ v


def _bytes_with_a_float_size(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):
    return torch.zeros(2 * n_layers * n_kv_heads * head_dim * seq_len * batch / 2).numel() * bytes_per_elem


@pytest.mark.parametrize(("key", "implementation", "pointer"), [
    ("ch01_attention.softmax", _softmax_without_keepdim, "without keepdim=True"),
    ("ch01_attention.masked_attention", _attention_testing_the_mask_for_truth, "`if mask is not None:`"),
    ("ch01_attention.masked_attention", _attention_indexing_with_the_mask, "`x.masked_fill(mask, value)` broadcasts"),
    ("ch02_multihead.kv_cache_bytes", _bytes_with_a_float_size, "`//` an int"),
])
def test_a_common_exception_is_followed_by_what_it_most_often_means(key, implementation, pointer):
    report = get_exercise(key).run(implementation, seed=0)
    assert not report.passed and pointer in report.message.splitlines()[0]


def test_a_mask_passed_where_the_context_goes_is_told_to_pass_it_by_name():
    """attn(h, mask) in a block: tfm_ref's layer reads the mask as the context, and its error says only that."""
    from autograde.comparison import error_hint
    from notebook_sandbox.evaluation import describe_error
    from tfm_ref import MultiHeadAttention

    x, mask = torch.randn(1, 3, 4), torch.ones(1, 1, 1, 3, dtype=torch.bool)
    with pytest.raises(ValueError) as raised:
        MultiHeadAttention(4, 2)(x, mask)
    assert "write attn(x, mask=mask)" in error_hint(describe_error(raised.value))


def test_a_common_exceptions_general_meaning_gives_way_to_a_named_mistake():
    """K/V heads not repeated raise a broadcast error: the catalogue's name says why, not 'often keepdim'."""
    from autograde.exercises.ch02_multihead import _MHAKVNotRepeated

    report = get_exercise("ch02_multihead.multihead").run(_MHAKVNotRepeated, seed=0)
    assert "K/V heads not repeated to H" in report.message and "keepdim" not in report.message


def test_a_notebook_cells_line_is_named_as_jupyter_names_it_not_by_the_kernels_temporary_file():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("def crashes(x, factor=2.0):\n    raise IndexError('oops')", store_history=True)
        count = shell.execution_count - 1
        report = TOY.run(shell.user_ns["crashes"])
    finally:
        InteractiveShell.clear_instance()
    assert f'File "Cell In[{count}]", line 2, in crashes' in report.message
    assert "raise IndexError('oops')" in report.message


def test_a_check_runs_on_one_thread_and_gives_the_kernel_its_threads_back():
    """Beside other work, a pool of threads waits at every tiny operation for the one the system put aside."""
    seen, before = [], torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        def softmax(x, dim=-1):
            seen.append(torch.get_num_threads())
            return torch.zeros_like(x)

        get_exercise("ch01_attention.softmax").run(softmax, seed=0)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
