"""The static audit of a student's cells (`autograde.audit`): what it flags, and the honest code it leaves clean.
A flag asks the instructor to read the code; it never changes a score."""
import pytest

from autograde.audit import audit


@pytest.mark.parametrize(("code", "flag"), [
    ("import tfm_ref\nsoftmax = tfm_ref.softmax", "imports-reference"),
    ("from autograde.checking import compare", "imports-grader"),
    ("import notebook_sandbox.runner as runner", "imports-grader"),
    ("from intake import collection", "imports-grader"),
    ("import notebook_sandbox.wire as wire\nwire.encode = lambda *a, **k: None", "patches-modules"),
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
    ("from tfm_widgets.attention import softmax  # the reference, re-exported", "imports-reference"),
    ("import tfm_widgets.attention as w\nsoftmax = w.softmax", "imports-reference"),
    ("from tfm_widgets import attention as w\nsoftmax = w.softmax", "imports-reference"),
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
    ("from tfm_widgets.alignment import attention  # the reference's module, imported by a widget",
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
    ("from tfm_widgets import attention as w\nsoftmax = getattr(w, 'softmax')", "imports-reference"),
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
    # PyTorch's own code for an exercise, under private names (flagged, not refused: it is PyTorch's)
    ("from torch._decomp.decompositions import _softmax", "torch-internals"),
    ("y = torch._decomp.decompositions._softmax(x, -1, False)", "torch-internals"),
    ("import torch._refs as refs\ny = refs.softmax(x, -1)", "torch-internals"),
    ("y = torch._prims.exp(x)", "torch-internals"),
    ("y = torch._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]", "torch-internals"),
    ("y = torch._softmax(x, -1, False)", "torch-internals"),
    ("y = torch._C._nn.scaled_dot_product_attention(q, k, v)", "torch-internals"),
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
    (["import tfm_widgets.attention as w", "softmax = w.softmax"], "imports-reference"),
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
    solution = ("import math\nimport torch\nfrom tfm_widgets.attention import attention_explorer\n"
                "def softmax(x, dim=-1):\n    m = x.amax(dim=dim, keepdim=True)\n    e = torch.exp(x - m)\n"
                "    out = e / e.sum(dim=dim, keepdim=True)\n    out[0] = out[0]\n    return out\n")
    decoding = "model.eval()\nfast = torch.compile(model)\n"  # a model's eval, torch's compile: not the builtins
    assert audit([solution, decoding]) == []


def test_a_forbidden_helper_no_torch_mode_sees_is_flagged_by_name():
    """PyTorch's causal-mask helper is Python with no torch-function dispatch: the watch cannot see it run."""
    from autograde.slot import python_helpers

    helpers = python_helpers("ch03_masking")
    assert "generate_square_subsequent_mask" in helpers and not python_helpers("ch01_attention")
    assert "forbidden-call" in audit(["mask = nn.Transformer.generate_square_subsequent_mask(4) == 0"], helpers)
    assert "forbidden-call" not in audit(["mask = torch.ones(4, 4).tril().bool()"], helpers)
