"""Integrity in the student's own kernel (the checks run beside their code there): borrowed answers
earn nothing, patching the grader changes nothing, and the audit flags what a student's cells should
not do. When grading, the checks do not run beside student code at all: tests/test_grading_attacks.py."""
import functools
import gc
import math
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import tfm_ref
from autograde import check
from autograde.audit import audit
from autograde.checking import SNAPSHOT, CheckFailed, protect
from autograde.exercises import ch01_attention as chapter01
from autograde.exercises import ch09_efficient as chapter09
from autograde.integrity import Forbid, ForbiddenCall


@pytest.fixture(autouse=True)
def _checks_loaded():
    """The checks' snapshot of torch and the rest taken before a test patches them, as in a notebook after
    its first check; a test that ran first in its worker would else record its own patch as torch's, and the
    snapshot would put it back into every later test."""
    protect()


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


@pytest.mark.parametrize(("borrowed", "named", "why"), [
    (_library, "torch.softmax", "a library function that does this exercise's work"),
    (_functional, "torch.nn.functional.softmax", "a library function"),
    (_method, "Tensor.softmax", "a library function"),
    (_reference, "tfm_ref.attention.softmax", "the course's reference"),
    (_switches_guard_off, "sys.setprofile", "it would switch off the grader's guard"),
])
def test_a_forbidden_call_is_named_as_the_student_wrote_it_and_shown_where_it_was_made(borrowed, named, why):
    report = chapter01.SOFTMAX.run(borrowed, seed=0)
    assert f"ForbiddenCall: your code called {named}, which is off limits while a check runs: {why}" in report.message
    assert "Your code called it here:" in report.message and borrowed.__name__ in report.message
    # every input fails alike: no input to show, and the reason is said once
    assert "Smallest failing input" not in report.message and "tensor(" not in report.message
    assert report.message.count("off limits") == 1


# Notebooks' answers to ch09's exercises 2 and 3: a check finds the earlier one by its name in the notebook.
NOTEBOOK_BORROWING_IN_ITS_EARLIER_ANSWER = """
def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores if mask is None else scores.masked_fill(~mask, -math.inf), dim=-1) @ v

def cached_attention(q, k, v, k_cache, v_cache):
    k_cache, v_cache = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)
    n_new, n_all, n_rep = q.shape[-2], k_cache.shape[-2], q.shape[1] // k.shape[1]
    mask = torch.ones(n_new, n_all, dtype=torch.bool).tril(diagonal=n_all - n_new)
    keys, values = tfm_ref.repeat_kv(k_cache, n_rep), tfm_ref.repeat_kv(v_cache, n_rep)
    return tiled_attention(q, keys, values, mask), k_cache, v_cache
"""


def test_a_forbidden_call_made_in_the_students_earlier_function_sends_them_to_fix_that_one():
    notebook = _notebook(NOTEBOOK_BORROWING_IN_ITS_EARLIER_ANSWER)
    message = chapter09.CACHED_ATTENTION.run(notebook["cached_attention"], seed=0).message
    assert "Your `tiled_attention` from an earlier exercise fails its own check" in message
    assert "may be called here" not in message
    assert "in tiled_attention" in message  # the trace goes down to the call


NOTEBOOK_BORROWING_BESIDE_AN_UNFINISHED_EARLIER_ANSWER = """
def tiled_attention(q, k, v, mask=None, *, q_tile=64, k_tile=64):
    raise NotImplementedError()

def cached_attention(q, k, v, k_cache, v_cache):
    k_cache, v_cache = torch.cat([k_cache, k], dim=-2), torch.cat([v_cache, v], dim=-2)
    n_rep = q.shape[1] // k.shape[1]
    keys, values = tfm_ref.repeat_kv(k_cache, n_rep), tfm_ref.repeat_kv(v_cache, n_rep)
    weights = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # no causal mask either
    return weights @ values, k_cache, v_cache
"""


def _notebook(source: str) -> dict:
    """The namespace a notebook with these cells leaves behind."""
    namespace = {"math": math, "torch": torch, "tfm_ref": tfm_ref}
    exec(source, namespace)
    return namespace


def test_a_forbidden_call_does_not_blame_an_unfinished_earlier_function_it_never_called():
    notebook = _notebook(NOTEBOOK_BORROWING_BESIDE_AN_UNFINISHED_EARLIER_ANSWER)
    message = chapter09.CACHED_ATTENTION.run(notebook["cached_attention"], seed=0).message
    assert "your code called torch.softmax" in message and "fails its own check" not in message
    assert "Your own `tiled_attention` from an earlier exercise may be called here." in message


def test_torch_private_names_of_forbidden_functions_are_not_shown_to_students():
    from autograde.exercises import load_all

    shown = set()
    for module in load_all():
        for exercise in module.EXERCISES:
            guard = Forbid(exercise.forbidden, allowed=exercise.allowed)
            shown |= {*guard._codes.values(), *guard._builtins.values()} - guard._guard_switches  # named as called
    assert {"torch.softmax", "torch.nn.functional.scaled_dot_product_attention", "torch.special.logsumexp",
            "torch.nn.MultiheadAttention", "torch.nn.Transformer.generate_square_subsequent_mask"} <= shown
    # private ones have no other name: the modules' private helpers, and the loss kernels under F.cross_entropy
    internal = [name for name in shown if ("._C." in name and not name.startswith("torch._C._nn."))
                or "_VariableFunctions" in name or (".modules." in name and not name.rpartition(".")[2].startswith("_"))]
    assert internal == []


def test_guard_allows_named_helpers_and_lifts_on_exit():
    with Forbid([torch.softmax], allowed=[tfm_ref.causal_mask]):
        assert tfm_ref.causal_mask(3).shape == (3, 3)
    with pytest.raises(ForbiddenCall):
        with Forbid([torch.softmax]):
            torch.softmax(torch.zeros(2), 0)
    assert torch.softmax(torch.zeros(2), 0).sum() == 1


def test_a_refusal_the_code_catches_still_fails_when_the_guard_is_left():
    with pytest.raises(ForbiddenCall, match="torch.softmax"):
        with Forbid([torch.softmax]):
            try:
                torch.softmax(torch.zeros(2), 0)
            except RuntimeError:
                pass  # CPython has dropped the profile hook that raised: the next call would go unseen
            tfm_ref.softmax(torch.zeros(2), 0)
    assert torch._C._len_torch_function_stack() == 0  # the guard's mode is gone too


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
    ("import sys\nref = sys.modules['tfm_ref']", "dynamic-code"),
    ("import asyncio\ny = asyncio.run(asyncio.to_thread(f, x))", "introspection"),
    ("object.__setattr__(exercise, 'forbidden', ())", "introspection"),
    ("import sys\nguard = sys.getprofile()", "introspection"),
    ("import torch\ny = torch.ops.aten._softmax(x, -1, False)", "torch-internals"),
    ("from torch import jit\nscripted = jit.script(f)", "torch-internals"),
    ("scripted = torch.jit.script(f)  # torch from the setup cell", "torch-internals"),
    ("from torch.overrides import handle_torch_function", "torch-internals"),
    ("from tfm_ref.widgets.attention import softmax  # the reference, re-exported", "imports-reference"),
    ("import tfm_ref.widgets.alignment\nsoftmax = tfm_ref.softmax", "imports-reference"),
    ("import tfm_ref.widgets.attention as w\nsoftmax = w.softmax", "imports-reference"),
    ("from tfm_ref.widgets import attention as w\nsoftmax = w.softmax", "imports-reference"),
    ("import inspect\nframe = inspect.currentframe()", "introspection"),
    ("import inspect\nsig = inspect.signature(f)\nstack = inspect.stack()", "introspection"),
    ("frame = inspect.currentframe()  # inspect imported in another cell", "introspection"),
    ("import inspect as i\ntools = i", "introspection"),
    ("from inspect import currentframe", "introspection"),
    ("from inspect import *", "introspection"),
    ("sig = inspect.signature(f, eval_str=True)", "dynamic-code"),
    ("from typing import get_type_hints\nhints = get_type_hints(f)", "dynamic-code"),
    ("class H:\n    __annotations__ = {'x': 'exec(payload)'}", "dynamic-code"),
    ("hop = g().gi_code.replace(co_filename=name)", "introspection"),
    ("defaults = f.__kwdefaults__", "introspection"),
    ("from tfm_ref.widgets.alignment import attention  # the reference's module, imported by a widget",
     "imports-reference"),
    ("import operator, sys\nloaded = operator.attrgetter('modules')(sys)", "dynamic-code"),
    ("import pickle\nfork = pickle.loads(b'cposix\\nfork\\n)R.')", "dynamic-code"),
    ("from marshal import loads", "dynamic-code"),
    ("imp = __import__\nref = imp('tfm_ref')", "dynamic-code"),
    ("g = getattr\nswitch = g(sys, 'setprofile')", "dynamic-code"),
    ("g = getattr\nswitch = g(sys, 'setprofile')", "introspection"),
    ("frames = getattr(error, '__traceback__')", "introspection"),
    ("setattr(obj, name, 1)", "patches-modules"),
    ("x.__class__ = Plain", "patches-modules"),
    ("names = vars()", "dynamic-code"),
    ("import tfm_ref\nsoftmax = vars(tfm_ref)['softmax']", "dynamic-code"),
    ("import queue\nthreads = queue.threading", "introspection"),
    ("class Sly(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
     "        return func(*args, **(kwargs or {}))", "torch-internals"),
    ("y = x.as_subclass(Plain).softmax(-1)", "torch-internals"),
    # round 8: what reaches PyTorch's dispatcher, where a mode or a kernel sees the grader's own operations
    ("lib = torch.library.Library('aten', 'IMPL')", "torch-internals"),
    ("from torch.library import Library", "torch-internals"),
    ("from torch.utils._python_dispatch import TorchDispatchMode", "torch-internals"),
    ("import torch.utils._python_dispatch as d", "torch-internals"),
    ("Mode = type('Mode', (base,), {'__torch_dispatch__': handler})", "torch-internals"),
    ("Mode = getattr(getattr(torch, 'overrides'), 'TorchFunctionMode')", "torch-internals"),
    ("class Late:\n    def __del__(self):\n        pass", "introspection"),
    ("Late = type('Late', (), {'__del__': finish})", "introspection"),
    ("from tfm_ref.widgets import attention as w\nsoftmax = getattr(w, 'softmax')", "imports-reference"),
    # round 9: getattr and import by other names, and names spelled in pieces
    ("import string\nframe = string.Formatter().get_field('0.f_back', [f], {})[0]", "dynamic-code"),
    ("loaded = '{0.modules}'.format(sys)", "dynamic-code"),
    ("import pkgutil\nref = pkgutil.resolve_name('tfm_ref.attention:softmax')", "dynamic-code"),
    ("up = getattr(frame, 'f_' + 'back')", "introspection"),
    ("Late = type('Late', (), {'__d' + 'el__': finish})", "introspection"),
    ("with torch._C.DisableTorchFunction():\n    y = f(x)", "torch-internals"),
    ("off = getattr(torch._C, 'Disable' + 'TorchFunction')", "torch-internals"),
    ("import json\njson.dumps = forged", "patches-modules"),
    # round 10: a module under another name, read with vars()
    ("import sys\n_s = sys\nnames = vars(_s)", "dynamic-code"),
    ("total = " + "+".join(["1"] * 100_000), "unaudited-code"),
    ("x = " + "-" * 200_000 + "1", "unaudited-code"),
    ("x = " + "-" * 50_000 + "1", "unaudited-code"),  # short enough to parse, too deep for the parser
])
def test_audit_flags_what_student_code_should_not_do(code, flag):
    assert flag in audit([code])


@pytest.mark.parametrize("cells, flag", [
    (["import inspect as ins", "frame = ins.currentframe()"], "introspection"),
    (["import inspect as ins\ndef unused():\n    import math as ins", "frame = ins.stack()"], "introspection"),
    (["import torch as T", "ops = T._C"], "torch-internals"),
    (["import tfm_ref.widgets.attention as w", "softmax = w.softmax"], "imports-reference"),
], ids=["inspect-alias", "alias-bound-twice", "torch-alias", "widget-alias"])
def test_audit_reads_a_name_imported_in_one_cell_as_that_module_in_every_cell(cells, flag):
    """The cells share one namespace; a name bound to two modules is read as either."""
    assert flag in audit(cells)


@pytest.mark.parametrize("code", [
    "activation = getattr(F, 'relu')",
    "settings = vars(config)",
    "for i in range(3):\n    setattr(self, f'layer{i}', nn.Linear(4, 4))",
    "import matplotlib.pyplot as plt\nplt.rcParams['figure.dpi'] = 100",
    "from types import SimpleNamespace\nbatch = SimpleNamespace(src=src)",
    "name = self.__class__.__name__",
    "super().__setattr__('weight', weight)",
    "if hasattr(model, 'encode'):\n    memory = model.encode(src)",
    "import inspect\nif 'mask' in inspect.signature(attention).parameters:\n    y = attention(q, k, v, mask=m)",
    "from inspect import signature\nnames = list(signature(f).parameters)",
    "print('loss {:.3f} after {} steps'.format(loss, step))",
    "label = 'step ' + str(step)",
    "name = 'layer' + '_norm'",
])
def test_audit_leaves_ordinary_code_clean(code):
    """What an honest notebook writes: an attribute named in full, a plotting setting, a record."""
    assert audit([code]) == []


def test_audit_leaves_ordinary_solutions_and_widgets_clean():
    solution = ("import math\nimport torch\nfrom tfm_ref.widgets.attention import attention_explorer\n"
                "def softmax(x, dim=-1):\n    m = x.amax(dim=dim, keepdim=True)\n    e = torch.exp(x - m)\n"
                "    out = e / e.sum(dim=dim, keepdim=True)\n    out[0] = out[0]\n    return out\n")
    decoding = "model.eval()\nfast = torch.compile(model)\n"  # a model's eval, torch's compile: not the builtins
    assert audit([solution, decoding]) == []




def _in_a_thread(x, dim=-1):
    import asyncio

    # a loop of its own: asyncio.run would first set a SIGINT handler, refused before any thread starts
    return asyncio.new_event_loop().run_until_complete(asyncio.to_thread(torch.softmax, x, dim))


def _through_the_operators(x, dim=-1):
    return torch.ops.aten._safe_softmax(x, dim)


def _through_a_subclass(x, dim=-1):
    return x.as_subclass(type("Plain", (torch.Tensor,), {})).softmax(dim).as_subclass(torch.Tensor)


def _reads_the_guard(x, dim=-1):
    import operator
    import sys

    guard = operator.attrgetter("__self__")(sys.getprofile())
    guard._builtins.clear()
    return torch.softmax(x, dim)


def _partial(x, dim=-1):
    import functools

    return functools.partial(torch.softmax, dim=dim)(x)  # called from C: no profile event


def _mapped_method(x, dim=-1):
    return next(map(torch.Tensor.softmax, [x], [dim]))


def _pops_the_mode(x, dim=-1):
    torch._C._pop_torch_function_stack()
    return torch.softmax(x, dim)


def _retries_after_the_refusal(x, dim=-1):
    try:
        return tfm_ref.softmax(x, dim)
    except RuntimeError:
        return tfm_ref.softmax(x, dim)


def _dispatches_its_own_function(x, dim=-1):
    import functools

    from torch.overrides import handle_torch_function

    return handle_torch_function(lambda t: functools.partial(torch.softmax, dim=dim)(t), (x,), x)


def _steps_past_the_mode(x, dim=-1):
    import functools

    from torch.overrides import _pop_mode_temporarily

    with _pop_mode_temporarily():  # PyTorch's own helper, called by the student's code
        return functools.partial(torch.softmax, dim=dim)(x)


def _the_graders_helper_through_a_library(x, dim=-1):
    """A helper of the checks, right for one step of the exercise, called by a library function (not from here)."""
    import functools

    from autograde.exercises.ch09_efficient import _fold

    x = x.movedim(dim, -1)
    m = torch.full((*x.shape[:-1], 1), float("-inf"), dtype=x.dtype)
    _, _, total, p, _ = functools.singledispatch(_fold)(m, torch.zeros_like(m), x)
    return (p / torch.where(total == 0, torch.ones_like(total), total)).movedim(-1, dim)


def _a_catalogued_mistake():
    """A catalogued mistake that is right with its default keywords, called from C."""
    import functools

    from autograde.exercises.ch09_efficient import _online_variant

    return functools.partial(_online_variant(), block_size=4)


@pytest.mark.parametrize(("borrowed", "named"), [
    (_the_graders_helper_through_a_library, r"autograde\.exercises\.ch09_efficient\._fold"),
    (_a_catalogued_mistake(), r"autograde\.exercises\.ch09_efficient\._online_variant\.<locals>\.online_softmax"),
    (_retries_after_the_refusal, "tfm_ref.attention.softmax"),
    (_steps_past_the_mode, "torch._C._pop_torch_function_stack"),
    (_dispatches_its_own_function, "torch.overrides.handle_torch_function"),
    (_partial, "torch.softmax"),
    (_mapped_method, "Tensor.softmax"),
    (_pops_the_mode, "torch._C._pop_torch_function_stack"),
    (_in_a_thread, "_thread.start_new_thread"),
    (_through_the_operators, "torch.ops"),
    (_through_a_subclass, "Tensor.softmax"),
    (_reads_the_guard, "sys.getprofile"),
])
def test_other_doors_to_the_library_softmax_earn_nothing(borrowed, named):
    with pytest.raises(CheckFailed, match=f"ForbiddenCall: your code called {named}, which is off limits"):
        check("ch01_attention.softmax", borrowed)


def _sets_a_signal_handler(x, dim=-1):
    import signal

    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    signal.signal(signal.SIGUSR1, previous)
    return _right_softmax(x, dim)


def _unblocks_signals(x, dim=-1):
    import signal

    signal.pthread_sigmask(signal.SIG_UNBLOCK, [])
    return _right_softmax(x, dim)


@pytest.mark.parametrize(("code", "named"), [(_sets_a_signal_handler, "signal.signal"),
                                             (_unblocks_signals, "signal.pthread_sigmask")])
def test_a_right_answer_that_touches_signals_earns_nothing_and_is_told_why(code, named):
    # the runner holds signals back while it answers (autograde.lockdown): a handler would run outside the guard
    with pytest.raises(CheckFailed, match=f"your code called {named}, which is off limits while a check runs: a "
                                          "signal handler of yours would run where the check cannot see it"):
        check("ch01_attention.softmax", code)


def test_a_copy_of_the_reference_loaded_from_elsewhere_at_other_lines_earns_nothing(tmp_path):
    import importlib.util

    source = (tfm_ref.attention.__file__)
    copy = tmp_path / "copied_attention.py"
    copy.write_text("\n\n" + open(source).read().replace("from .", "from tfm_ref."))
    spec = importlib.util.spec_from_file_location("copied_attention", copy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    with pytest.raises(CheckFailed, match="a copy of tfm_ref.attention.softmax, which is off limits while a check "
                                          "runs: the course's reference"):
        check("ch01_attention.softmax", lambda x, dim=-1: module.softmax(x, dim))


def test_an_exercise_whose_forbidden_list_a_cell_emptied_is_put_back_before_the_next_check():
    exercise = chapter01.SOFTMAX
    listed = exercise.forbidden
    object.__setattr__(exercise, "forbidden", ())
    try:
        with pytest.raises(CheckFailed, match="ForbiddenCall"):
            check("ch01_attention.softmax", _library)
        assert exercise.forbidden is listed
    finally:
        object.__setattr__(exercise, "forbidden", listed)


def test_a_tuple_subclass_returned_is_not_rebuilt_after_the_guard_lifts():
    built_from = []

    class Answer(tuple):
        def __new__(cls, items=()):  # code of the student's that could run the reference, were it called unguarded
            built_from.append(type(items))
            return super().__new__(cls, items)

    def attention(q, k, v, mask=None, *, return_weights=False):
        weights = good_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
        return Answer((weights @ v, weights))

    with pytest.raises(CheckFailed, match="subclass|only tensors"):
        check("ch01_attention.attention", attention)
    assert set(built_from) == {tuple}  # built by the student's own code only, never again from the grader's items


def _switches_the_hook_off_from_c(x, dim=-1):
    import sys

    list(map(sys.setprofile, [None]))  # called from C: the hook sees no call
    return good_softmax(x, dim)


def test_a_guard_switched_off_from_c_fails_the_check():
    with pytest.raises(CheckFailed, match="your code switched off the grader's guard"):
        check("ch01_attention.softmax", _switches_the_hook_off_from_c)


def test_sys_setprofile_rebound_by_a_cell_does_not_keep_the_guard_off():
    import sys

    original = sys.setprofile
    sys.setprofile = lambda hook: None
    try:
        with pytest.raises(CheckFailed, match="ForbiddenCall"):
            check("ch01_attention.softmax", _reference)  # what only the profile hook sees
    finally:
        sys.setprofile = original


def test_the_real_sys_setprofile_kept_by_a_cell_that_rebound_it_is_still_refused():
    import sys

    original = sys.setprofile
    sys.setprofile = lambda hook: None  # what the guard would find there, were it to look only then

    def softmax(x, dim=-1):
        original(None)
        return tfm_ref.softmax(x, dim)

    try:
        with pytest.raises(CheckFailed, match="your code called sys.setprofile"):
            check("ch01_attention.softmax", softmax)
    finally:
        sys.setprofile = original


def _relay(model, src, call):
    """tfm_ref's Residual, whose forward the decoding exercises allow, calls what it is handed: here ``call``, on
    the source (the norm hands it over), from a frame of tfm_ref's own."""
    from tfm_ref.blocks import Residual

    return Residual(lambda t: src, 0.0, True).train(False)(torch.zeros((), dtype=torch.long), call)


def _greedy_relaying_the_reference(model, src, src_mask=None, *, bos_id, eos_id, max_len):
    import functools

    from tfm_ref.decoding import greedy_decode

    return _relay(model, src, functools.partial(greedy_decode.__wrapped__, model, src_mask=src_mask, bos_id=bos_id,
                                                eos_id=eos_id, max_len=max_len))


def _greedy_relaying_a_catalogued_mistake(model, src, src_mask=None, *, bos_id, eos_id, max_len):
    import functools

    return _relay(model, src, functools.partial(_RIGHT_BY_DEFAULT, model, src_mask=src_mask, bos_id=bos_id,
                                                eos_id=eos_id, max_len=max_len))


def _made_before_the_check():
    from autograde.exercises.ch08_encoder_decoder import _greedy_variant

    return _greedy_variant()  # a right greedy decoding with its default keywords


_RIGHT_BY_DEFAULT = _made_before_the_check()


def _greedy_relaying_a_helper_of_the_checks(model, src, src_mask=None, *, bos_id, eos_id, max_len):
    from autograde.exercises.ch08_encoder_decoder import _varied

    return _relay(model, src, _varied)  # called by Residual's frame, not this one


@pytest.mark.parametrize(("relayed", "named"), [
    (_greedy_relaying_the_reference, r"tfm_ref\.decoding\.greedy_decode"),
    (_greedy_relaying_a_catalogued_mistake, r"autograde\.exercises\.ch08_encoder_decoder\._greedy_variant\.<locals>\.greedy_decode"),
    (_greedy_relaying_a_helper_of_the_checks, r"autograde\.exercises\.ch08_encoder_decoder\._varied"),
])
def test_an_allowed_method_that_calls_what_it_is_handed_relays_nothing_off_limits(relayed, named):
    with pytest.raises(CheckFailed, match=f"ForbiddenCall: your code called {named}, which is off limits"):
        check("ch08_encoder_decoder.greedy", relayed)


def _the_graders_helper_through_the_graders_utilities(x, dim=-1):
    """A helper of the checks called by the grader's own `Call.map_tensors`, which calls what it is given."""
    import functools

    from autograde.exercises.ch09_efficient import _fold
    from autograde.inputs import Call

    x = x.movedim(dim, -1)
    m = torch.full((*x.shape[:-1], 1), float("-inf"), dtype=x.dtype)
    (_, _, total, p, _), = Call(x).map_tensors(functools.partial(_fold, m, torch.zeros_like(m))).args
    return (p / torch.where(total == 0, torch.ones_like(total), total)).movedim(-1, dim)


def _a_catalogued_mistake_under_another_name():
    """A right-by-default catalogued closure rebuilt under another name and file, as a cell could."""
    import functools
    import types

    from autograde.exercises.ch09_efficient import _online_variant

    online = _online_variant()
    renamed = types.FunctionType(online.__code__.replace(co_name="my_softmax", co_filename="<cell 9>"),
                                 online.__globals__, "my_softmax", online.__defaults__, online.__closure__)
    return functools.partial(renamed, block_size=4)


@pytest.mark.parametrize(("borrowed", "named"), [
    (_the_graders_helper_through_the_graders_utilities, r"autograde\.exercises\.ch09_efficient\._fold"),
    (_a_catalogued_mistake_under_another_name(), r"a copy of autograde\.exercises' my_softmax"),
])
def test_the_graders_code_relayed_by_its_own_utilities_or_renamed_earns_nothing(borrowed, named):
    with pytest.raises(CheckFailed, match=f"ForbiddenCall: your code called {named}, which is off limits"):
        check("ch01_attention.softmax", borrowed)


def _hand_made(**changes):
    """A generator function whose code was rebuilt with ``changes`` (CodeType.replace), as a student can."""
    def generator():
        yield

    return types.FunctionType(generator.__code__.replace(**changes), {})


class _SlyName(str):
    """A file name whose startswith calls the reference: the guard's hook asks it, where nothing is watched."""

    def startswith(self, *prefixes):
        _smuggled.append(tfm_ref.softmax(torch.ones(3), -1))
        return False


class _SlyConstant:
    def __hash__(self):  # hashing the code hashes its constants
        _smuggled.append(tfm_ref.softmax(torch.ones(3), -1))
        return 7


_smuggled: list = []


@pytest.mark.parametrize("hand_made", [
    lambda: _hand_made(co_filename=_SlyName("<cell 3>")),
    lambda: _hand_made(co_consts=_hand_made().__code__.co_consts + (_SlyConstant(),)),
], ids=["file-name", "constant"])
def test_code_made_by_hand_runs_nothing_inside_the_guards_hook(hand_made):
    run = hand_made()
    _smuggled.clear()
    with pytest.raises(ForbiddenCall, match="made by hand"):
        with Forbid([torch.softmax]):
            for _ in run():
                pass
    assert _smuggled == [], "the student's code ran inside the hook, unwatched"


def test_a_metaclass_name_is_not_read_by_the_guards_hook():
    read = []
    meta = type("Meta", (type(torch.Tensor),), {"__name__": property(lambda cls: read.append(cls) or "Tensor")})
    sly = meta("Sly", (torch.Tensor,), {})
    with pytest.raises(ForbiddenCall, match="Tensor.softmax"):
        with Forbid([torch.Tensor.softmax]):
            torch.randn(3).as_subclass(sly).softmax(-1)
    assert read == []


def test_an_exceptions_message_and_a_backward_of_the_students_own_run_under_the_guard():
    """Code run after the call (the message of the exception it raised, a custom backward) may not borrow the
    reference either: there, before, it ran unwatched and could fill in the outcome."""
    class Sly(Exception):
        def __str__(self):
            return str(tfm_ref.softmax(torch.ones(3), -1))

    def raises(x, dim=-1):
        raise Sly()

    class Borrowed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, dim):
            ctx.save_for_backward(x)
            ctx.dim = dim
            e = (x - x.amax(dim, keepdim=True)).exp()
            return torch.nan_to_num(e / e.sum(dim, keepdim=True))

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            y = tfm_ref.softmax(x, ctx.dim)
            return y * (grad - (grad * y).sum(ctx.dim, keepdim=True)), None

    def borrows_its_gradient(x, dim=-1):
        return Borrowed.apply(x, dim)

    for student in (raises, borrows_its_gradient):
        with pytest.raises(CheckFailed, match="off limits"):
            check("ch01_attention.softmax", student, hidden=True)


def test_the_guard_forgets_the_code_it_checked_once_that_code_is_freed():
    """A notebook session runs its cells again and again: each run makes new code, which the guard checks once and
    must not keep after the cell's functions are gone."""
    from autograde import integrity

    def run_the_cell_again(edit: int):
        namespace = {}  # a docstring: the guard also compares the code with the reference's (its signature)
        exec(compile(f'def add(x):\n    """x + a number."""\n    return x + {edit}\n', "<cell 2>", "exec"), namespace)
        with Forbid([torch.softmax]):
            namespace["add"](torch.ones(1))
        gc.collect()  # the function and its namespace hold each other

    run_the_cell_again(0)
    ordinary, signatures = len(integrity._ORDINARY), len(integrity._SIGNATURES)
    for edit in range(1, 11):
        run_the_cell_again(edit)
    assert len(integrity._ORDINARY) <= ordinary and len(integrity._SIGNATURES) <= signatures


def test_the_guard_forgets_code_freed_as_the_interpreter_exits_without_an_error(monkeypatch):
    """At exit the module's globals are cleared before the last code is freed: forgetting it may not need them."""
    from autograde import integrity

    code = compile("x + 1", "<cell 4>", "eval")
    assert integrity._ordinary(code)
    errors = []
    monkeypatch.setattr(sys, "unraisablehook", errors.append)
    monkeypatch.setattr(integrity, "_ORDINARY", None)  # as the interpreter's exit leaves it
    del code
    gc.collect()
    assert errors == []


def _right_softmax(x, dim=-1):
    m = x.amax(dim, keepdim=True)
    e = torch.exp(x - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    s = e.sum(dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


class _PassesOn(TorchFunctionMode):
    """A mode that changes nothing, yet sees every operation: one left on sees the grader's too."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _PassesOnBelow(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode", [_PassesOn, _PassesOnBelow], ids=["function-mode", "dispatch-mode"])
def test_a_torch_mode_a_cell_left_on_fails_the_check(mode):
    """A round-8 attack: a mode entered in a cell answered the runner's encoding of the output, after the guard."""
    with mode():
        with pytest.raises(CheckFailed, match="left a torch mode on"):
            check("ch01_attention.softmax", _right_softmax)
    with torch.device("cpu"):  # PyTorch's default-device mode is no student's
        check("ch01_attention.softmax", _right_softmax)


def test_a_dispatch_mode_the_checked_code_leaves_on_is_taken_off_and_fails_the_check():
    def leaves_a_mode_on(x, dim=-1):
        _PassesOnBelow().__enter__()
        return _right_softmax(x, dim)

    with pytest.raises(CheckFailed, match="ForbiddenCall"):
        check("ch01_attention.softmax", leaves_a_mode_on)
    assert torch._C._len_torch_dispatch_stack() == 0


def test_switching_every_torch_function_mode_off_fails_the_check():
    """Round 9: DisableTorchFunction turns the guard's mode off without a call the hook sees; a partial then reached
    torch.softmax from C, where neither looked."""
    def disabled(x, dim=-1):
        with torch._C.DisableTorchFunction():
            return functools.partial(torch.softmax, x, dim)().nan_to_num(0.0)

    with pytest.raises(CheckFailed, match="function modes off"):
        check("ch01_attention.softmax", disabled)
