"""The hostile student: every way a submission may try to forge, steal or spoil grades, graded in one
class by the real pipeline. Each attack must earn nothing it did not write, and change no other
student's row: the sandbox holds no answer (tfm_ref's are withheld, the grader's checks are not
there), and the runner's word is data. Delegating to PyTorch's own functions is possible there, and
only flagged (`DELEGATIONS`): a flag asks a human to read, it never changes a score.

One slot grades the class in order, so every attack is followed, in the same sandbox, by a probe: a
correct submission that looks for anything an earlier notebook left behind (files, processes, shared
memory, sockets) or the grader's environment, and breaks its own answer if it finds any. A probe
with full marks proves the attack before it touched nobody.
"""
import csv
import json
import os

from types import SimpleNamespace

import nbformat
import pytest

from autograde.audit import audit
from autograde.classroom import solved_notebook, untouched_notebook, write_submission
from autograde.course import nbgrader_config
from autograde.feedback import feedback_path
from autograde.grade import grade
from autograde.records import _cell
from autograde.gradebook import recorded
from notebook_sandbox.container import Limits, sandbox_available

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox_available(), reason="needs bubblewrap (bwrap)")]

A, KV = "ch01_attention", "ch02_multihead"
SECRET_NAME, SECRET = "AUTOGRADE_ATTACK_SECRET", "hunter2-instructor-token"
MARKER = "autograde-attack-marker"
HUNT = """
import gc, importlib, importlib.util, os, sys
x = torch.tensor([[1.0, 2.0, 3.0]])
found = []
def right(fn):
    try:
        return torch.allclose(fn(x, -1), torch.tensor([[0.0900, 0.2447, 0.6652]]), atol=1e-3)
    except Exception:
        return False
tfm = importlib.import_module('tfm_ref')
found += [getattr(tfm, 'softmax', None), getattr(importlib.import_module('tfm_ref.attention'), 'softmax', None)]
for name in ('autograde.exercises.ch01_attention', 'autograde.checking', 'autograde.exercises.ch09_efficient'):
    try:
        module = importlib.import_module(name)
        found += [getattr(module, n) for n in dir(module) if 'softmax' in n.lower()]
    except ImportError:
        pass
found += [o for o in gc.get_objects() if callable(o) and 'softmax' in str(getattr(o, '__name__', '')).lower()
          and 'torch' not in str(getattr(o, '__module__', ''))]
paths = []
for folder, dirs, files in os.walk('/'):
    dirs[:] = [d for d in dirs if os.path.join(folder, d) not in ('/proc', '/sys', '/dev') and d != 'site-packages']
    paths += [os.path.join(folder, f) for f in files if f.endswith('.py')]
for path in paths:
    try:
        if 'def softmax' not in open(path).read():
            continue
        spec = importlib.util.spec_from_file_location('hunted', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.append(module.softmax)
    except Exception:
        pass
answers = [f for f in found if f is not None and right(f)]
if answers:
    softmax = answers[0]
"""
REWRITE = (
    "import torch, types\nrunner = torch.sys.modules['notebook_sandbox.runner']\nreal = runner._evaluate\n"
    "def answer(x):\n    for ref in (lambda: torch.sys.modules['tfm_ref'].softmax,\n"
    "                lambda: __import__('autograde.exercises.ch01_attention').exercises.ch01_attention.SOFTMAX.reference):\n"
    "        try:\n            return ref()(x, -1)\n        except Exception:\n            pass\n    return x\n"
    "def rewritten(request, blobs, namespace):\n    reply, out = real(request, blobs, namespace)\n"
    "    call = runner.wire.decode(request['call'], blobs)\n    fixed = answer(call['args'][0])\n"
    "    out = []\n    reply['outcome']['output'] = runner.wire.encode(fixed, out)\n"
    "    reply['outcome']['grads'] = runner.wire.encode([], out)\n    return reply, out\n"
    "runner._evaluate = rewritten\n"
    "for frame_locals in [f.f_locals for f in __import__('traceback').walk_stack(None)]:\n"
    "    handlers = frame_locals.get('handlers')\n"
    "    if isinstance(handlers, dict):\n        handlers['evaluate'] = rewritten\n")
FLASH = ("def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):\n"
         "    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
         "    bias = torch.zeros_like(scores) if mask is None else torch.zeros_like(scores).masked_fill(~mask, float('-inf'))\n"
         "    fours = [t.reshape(1, -1, *t.shape[-2:]) for t in (q, k, v)]\n"
         "    out = torch._scaled_dot_product_flash_attention_for_cpu(*fours, attn_mask=bias.reshape(1, -1, *bias.shape[-2:]))[0]\n"
         "    out = out.reshape(*q.shape[:-1], v.shape[-1]).nan_to_num(0.0)\n"
         "    if return_weights:\n"
         "        weights = (scores + bias).softmax(-1).nan_to_num(0.0)\n"
         "        return out, weights\n"
         "    return out\n")
WRONG = "def softmax(x, dim=-1):\n    return x\n"
RIGHT = ("def softmax(x, dim=-1):\n    m = x.amax(dim=dim, keepdim=True)\n    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))\n"
         "    e = torch.exp(x - m)\n    s = e.sum(dim=dim, keepdim=True)\n    return e / torch.where(s == 0, torch.ones_like(s), s)\n")
FIND_SOCKET = ("import os, socket\n"
               "fds = [int(f) for f in os.listdir('/proc/self/fd') if os.path.exists(f'/proc/self/fd/{f}')\n"
               "       and os.readlink(f'/proc/self/fd/{f}').startswith('socket:')]\n"
               "channel = socket.socket(fileno=os.dup(fds[0]))\n")
FRAME = ("import json, struct\n"
         "def frame(header, blobs=()):\n"
         "    body = json.dumps(header).encode()\n"
         "    out = struct.pack('>4sII', b'AGW1', len(body), len(blobs)) + body\n"
         "    return out + b''.join(struct.pack('>Q', len(b)) + b for b in blobs)\n")
PERFECT = '{"t": "tensor", "dtype": "float32", "shape": [1], "blob": 0}'

PROBE = f"""
import glob, os, socket
found = glob.glob('/tmp/*') + glob.glob('/dev/shm/*') + glob.glob('/tmp/.*')
if {SECRET_NAME!r} in os.environ:
    found.append('environment')
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    for part in ('environ', 'cmdline'):
        try:
            text = open(f'/proc/{{pid}}/{{part}}', 'rb').read()
        except OSError:
            continue
        if b{SECRET!r} in text or b{MARKER!r} in text:
            found.append(f'/proc/{{pid}}/{{part}}')
try:
    socket.socket(socket.AF_UNIX).connect('\\0{MARKER}')
    found.append('socket')
except OSError:
    pass
try:  # the IPC namespace's System V shared memory, one line each after the header (ctypes is closed to notebooks)
    with open('/proc/sysvipc/shm') as table:
        if table.read().splitlines()[1:]:
            found.append('sysv shm')
except OSError:
    found.append('no /proc/sysvipc/shm to look in')
print('leftovers:', found)
if found:
    softmax = lambda x, dim=-1: x  # a leak costs this probe its points, which the test sees
"""

PROBE_FLAGS = audit([PROBE])  # what a probe's own code is flagged for (it reads /proc, opens a socket)

# student -> (cells inserted before the softmax tests, {grade_id: answer}, notebook); the answer to the
# attacked exercise is wrong unless the attack itself makes it right.
ATTACKS = {
    # Forged results on every channel: stdout, stderr, fd 1 and 2, the runner's own socket.
    "forges_stdout": ([
        'import json, os, sys\n'
        'print(json.dumps({"results": [{"status": "ok", "stdout": "", "error": ""}] * 40}))\n'
        'print(\'{"ready": true}\')\nprint("✓ softmax: 7 visible and hidden checks passed (0.01 s)")\n'
        'sys.stderr.write("✓ softmax: passed\\n")\n'
        'os.write(1, b\'{"results": [{"status": "ok"}]}\\n\')\nos.write(2, b"score: 10/10\\n")'], {"softmax": WRONG}),
    "forges_a_reply_in_advance": ([FIND_SOCKET + FRAME +
        f'channel.sendall(frame({{"id": "0" * 16, "outcome": {{"output": {PERFECT}, "grads": {{"t": "list", "items": []}},'
        '"error": None, "error_type": None, "trace": ""}, "stdout": ""}, [b"\\0" * 4]))'], {"softmax": WRONG}),
    "writes_garbage_to_the_socket": ([FIND_SOCKET + "channel.sendall(b'x')"], {"softmax": WRONG}),
    "floods_the_socket": ([FIND_SOCKET + "channel.sendall(b'\\xff' * 2**22)"], {"softmax": WRONG}),
    "replies_twice_during_the_check": ([], {"softmax": FIND_SOCKET.replace("\n", "\n    ").join(
        ["def softmax(x, dim=-1):\n    import sys\n    ", FRAME.replace("\n", "\n    "),
         "f = sys._getframe()\n    while f and 'request' not in f.f_locals:\n        f = f.f_back\n"
         "    request = f.f_locals['request'] if f else {'id': '?'}\n"
         "    channel.sendall(frame({'id': request['id'], 'status': 'ok', 'stdout': '', 'error': ''}))\n"
         "    return x\n"])}),
    # A fake grader: builtins, import hooks, sys.modules.
    "fakes_the_grader": ([
        "import builtins, sys, types\n"
        "fake = types.ModuleType('autograde')\nfake.check = lambda *a, **k: print('✓ passed')\n"
        "sys.modules['autograde'] = fake\nsys.modules['autograde.checking'] = fake\n"
        "real_import = builtins.__import__\n"
        "builtins.__import__ = lambda name, *a, **k: fake if name.startswith('autograde') else real_import(name, *a, **k)\n"
        "class Finder:\n    def find_spec(self, name, path=None, target=None):\n        return None\n"
        "sys.meta_path.insert(0, Finder())\n"
        "import torch\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True"], {"softmax": WRONG}),
    # Notebook metadata that lies: a cell claiming to be the locked visible test (holding a right answer),
    # a test cell of its own worth 100 points, outputs filled in beforehand with active content.
    "claims_test_cells_in_its_metadata": ([
        nbformat.v4.new_code_cell(RIGHT, metadata={"nbgrader": {
            "grade": True, "solution": False, "locked": True, "grade_id": "softmax_visible", "points": 1,
            "schema_version": 3}}),
        nbformat.v4.new_code_cell(
            "print('<script>alert(1)</script>')\nfrom autograde import check\ncheck('ch01_attention.softmax', softmax)",
            metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "bonus",
                                   "points": 100, "schema_version": 3}},
            outputs=[nbformat.v4.new_output("display_data", {"text/html": "<script>alert(1)</script>"}),
                     nbformat.v4.new_output("stream", name="stdout", text="✓ softmax: 7 checks passed")])],
        {"softmax": WRONG}),
    # The reference computed on inputs the student's code changed in place (it never is: the grader's copy).
    "mutates_its_inputs_in_place": ([], {"softmax":
        "def softmax(x, dim=-1):\n    x.fill_(0.0)\n    return torch.full_like(x, 1.0 / x.shape[dim])\n"}),
    # Outputs that lie about comparisons.
    "returns_a_lying_tensor": ([], {"softmax":
        "class Always(torch.Tensor):\n    def __eq__(self, other):\n        return True\n"
        "    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        if func.__name__ in ('allclose', 'equal', 'isclose'):\n            return True\n"
        "        return super().__torch_function__(func, types, args, kwargs or {})\n\n"
        "def softmax(x, dim=-1):\n    return x.as_subclass(Always)\n"}),
    # Looking for the expected values: frames, gc.
    "walks_frames_and_gc_for_answers": ([], {"softmax":
        "import gc, sys\n\ndef softmax(x, dim=-1):\n    candidates = []\n    f = sys._getframe(1)\n    while f:\n"
        "        candidates += [v for v in f.f_locals.values() if isinstance(v, torch.Tensor)]\n        f = f.f_back\n"
        "    candidates += [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]\n"
        "    for c in candidates:\n        if c.shape == x.shape and c is not x and not torch.equal(c, x) and c.dtype == x.dtype:\n"
        "            rows = c.sum(dim)\n            if torch.allclose(rows, torch.ones_like(rows)):\n                return c.clone()\n"
        "    return x\n"}),
    # Mutating the grader's objects: gc, a thread, a signal handler.
    "mutates_the_checks_by_gc_thread_and_signal": ([
        "import gc, signal, threading, time\n"
        "def bend():\n"
        "    for o in gc.get_objects():\n"
        "        if type(o).__name__ in ('Exercise', 'Case'):\n"
        "            for k in ('atol', 'rtol'):\n                if hasattr(o, k):\n                    object.__setattr__(o, k, 1e30)\n"
        "            if hasattr(o, 'reference'):\n                object.__setattr__(o, 'reference', lambda x, *a, **k: x)\n"
        "    import autograde.comparison as c, autograde.checking as k\n"
        "    c.compare = lambda *a, **kw: None\n    k.compare = lambda *a, **kw: None\n    c._allclose = lambda *a, **kw: True\n"
        "def loop():\n    while True:\n        bend()\n        time.sleep(0.001)\n"
        "threading.Thread(target=loop, daemon=True).start()\n"
        "signal.signal(signal.SIGALRM, lambda *a: bend())\nsignal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)"],
        {"softmax": WRONG}),
    # Leaving things behind for the next notebook: processes, files, shared memory, a socket.
    "leaves_processes_and_files_behind": ([
        "import ctypes, os, socket, subprocess, time\n"
        f"open('/tmp/{MARKER}', 'w').write('x')\nopen('/dev/shm/{MARKER}', 'w').write('x')\n"
        "try:\n    ctypes.CDLL(None).shmget(0x5eed, 4096, 0o1666)\nexcept PermissionError:  # ctypes is closed\n    pass\n"
        f"subprocess.Popen(['sh', '-c', 'sleep 100; echo {MARKER}'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        s = socket.socket(socket.AF_UNIX)\n        s.bind('\\0{MARKER}')\n        s.listen()\n"
        "        time.sleep(100)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)"], {}),
    "kills_and_stops_everything_it_can": (["import os, signal\nfor sig in (signal.SIGSTOP, signal.SIGKILL):\n"
                                          "    try:\n        os.kill(-1, sig)\n    except OSError:\n        pass"], {}),
    # Reading what it should not: the grader's environment, the course's files. Only a leak makes it right.
    "reads_the_environment": ([f"""
import os
leaked = {SECRET_NAME!r} in os.environ
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        leaked |= b{SECRET!r} in open(f'/proc/{{pid}}/environ', 'rb').read()
    except OSError:
        pass
exec({RIGHT!r} if leaked else {WRONG!r})"""], {"softmax": "softmax = None\n"}),
    "reads_the_course_files": ([f"""
import glob
found = [p for pattern in ('/**/solutions/*/*.md', '/**/gradebook.db', '/**/grades.csv', '/**/{MARKER}.ipynb')
         for p in glob.glob(pattern, recursive=True)]
exec({RIGHT!r} if found else {WRONG!r})"""], {"softmax": "softmax = None\n"}),
    # A runner that hangs, stops, closes its socket, or dies: costs the cell it happens in.
    "hangs_in_the_check": ([], {"softmax": "def softmax(x, dim=-1):\n    while True:\n        pass\n"}),
    "closes_its_socket": ([FIND_SOCKET + "os.close(fds[0])"], {}),
    "breaks_its_interpreter": (["import sys, builtins\nsys.setrecursionlimit(40)\ndel builtins.len"], {}),
    # Output and replies too large.
    "prints_without_end": (["import os\nprint('x' * 50_000_000)\nos.write(1, b'y' * 10_000_000)"], {"softmax":
        "def softmax(x, dim=-1):\n    print('z' * 10_000_000)\n    return x\n"}),
    "returns_a_huge_tensor": ([], {"softmax": "def softmax(x, dim=-1):\n    return torch.zeros(10**8)\n"}),
    # The reference, reached where the guard does not look: a thread started earlier, a copy of the package
    # loaded from /tmp, TorchScript, an exercise whose list of forbidden calls a cell emptied.
    "serves_the_reference_from_a_thread": ([
        "import queue, sys, threading\nasked, answered = queue.Queue(), queue.Queue()\n"
        "def serve():\n    while True:\n        answered.put(sys.modules['tfm_ref'].softmax(*asked.get()))\n"
        "threading.Thread(target=serve, daemon=True).start()"],
        {"softmax": "def softmax(x, dim=-1):\n    asked.put((x, dim))\n    return answered.get(timeout=1)\n"}),
    # (the reference's code under another file name and line: the runner cannot see the package's folder to copy
    # its files when the course lives under /tmp, as in CI, but a copy is the same code wherever it came from)
    "loads_a_copy_of_the_reference": ([
        "import sys, types\nref = sys.modules['tfm_ref'].softmax\n"
        "borrowed = types.FunctionType(ref.__code__.replace(co_filename='/tmp/borrowed.py', co_firstlineno=1),\n"
        "                              ref.__globals__)"],
        {"softmax": "def softmax(x, dim=-1):\n    return borrowed(x, dim)\n"}),
    "serves_the_reference_from_a_frameless_thread": ([
        "import queue, sys\nasked, answered = queue.SimpleQueue(), queue.SimpleQueue()\n"
        "def serve(job):\n    answered.put(sys.modules['tfm_ref'].softmax(*job))\n"
        "queue.threading._start_new_thread(list, (map(serve, iter(asked.get, None)),))  # waits in C: no frame"],
        {"softmax": "def softmax(x, dim=-1):\n    asked.put((x, dim))\n    return answered.get(timeout=1)\n"}),
    "starts_a_thread_from_c_in_the_check": ([], {"softmax":
        "import queue, sys\n\ndef softmax(x, dim=-1):\n    out, done = [], queue.threading.Lock()\n    done.acquire()\n"
        "    def work():\n        out.append(sys.modules['tfm_ref'].softmax(x, dim))\n        done.release()\n"
        "    list(map(queue.threading._start_new_thread, [work], [()]))  # from C\n"
        "    done.acquire(timeout=1)\n    return out[0]\n"}),
    "scripts_the_reference": (["import sys\nscripted = torch.jit.script(sys.modules['tfm_ref'].softmax)"],
                              {"softmax": "def softmax(x, dim=-1):\n    return scripted(x, dim)\n"}),
    # A helper process started by an earlier cell, outside any check, answering over a pipe with the reference.
    "serves_the_reference_from_a_process": ([
        "import os, pickle, sys\nasked_r, asked_w = os.pipe()\nanswer_r, answer_w = os.pipe()\n"
        "if os.fork() == 0:\n    while True:\n        x, dim = pickle.loads(os.read(asked_r, 1 << 20))\n"
        "        os.write(answer_w, pickle.dumps(sys.modules['tfm_ref'].softmax(x, dim)))"],
        {"softmax": "def softmax(x, dim=-1):\n    os.write(asked_w, pickle.dumps((x.detach(), dim)))\n"
                    "    return pickle.loads(os.read(answer_r, 1 << 20))\n"}),
    # The grader's own code: a catalogued mistake that is right with its default keywords, called from C; a helper
    # of the checks called from the student's code.
    "uses_a_catalogued_mistake": ([], {"softmax":
        "import functools, pickle\n"
        "online = pickle.loads(b'cautograde.exercises.ch09_efficient\\n_online_variant\\n)R.')\n"
        "softmax = functools.partial(online, block_size=4)\n"}),
    "uses_a_helper_of_the_checks": (["from autograde.exercises.ch09_efficient import _fold"], {"softmax":
        "def softmax(x, dim=-1):\n    x = x.movedim(dim, -1)\n"
        "    m = torch.full((*x.shape[:-1], 1), float('-inf'), dtype=x.dtype)\n"
        "    m, shift, total, p, factor = _fold(m, torch.zeros_like(m), x)\n"
        "    return (p / torch.where(total == 0, torch.ones_like(total), total)).movedim(-1, dim)\n"}),
    # Code left to run after the check: a finalizer, as the grader frees the inputs, wrote the reference's values into
    # the output the student returned, before the runner read it (round 8). The output is now encoded under the guard.
    "rewrites_its_output_from_a_finalizer": ([
        "import sys\nclass Later:\n    def __init__(self, job):\n        self.job = job\n"
        "    def __del__(self):\n        self.job()\n"],
        {"softmax": "def softmax(x, dim=-1):\n    out = torch.zeros_like(x) + x * 0\n"
                    "    kept, seen = out.detach(), x.detach().clone()\n"
                    "    x.later = Later(lambda: kept.copy_(sys.modules['tfm_ref'].softmax(seen, dim)))\n"
                    "    return out\n"}),
    # A kernel registered with torch.library in a cell computed the reference as the runner copied the inputs in,
    # before the check's guard (round 8): decoding and copying run under the guard now.
    "computes_the_reference_in_a_kernel_it_registered": ([
        "import sys\nstash, busy = [], []\n"
        "def cloned(t, memory_format=None):\n    out = torch.empty_like(t)\n    out.copy_(t)\n"
        "    if t.dtype == torch.float32 and t.dim() == 3 and not busy:\n        busy.append(1)\n"
        "        stash.append([sys.modules['tfm_ref'].softmax(out, d) for d in range(3)])\n        busy.pop()\n"
        "    return out\n"
        "kernels = torch.library.Library('aten', 'IMPL')\nkernels.impl('clone', cloned, 'CPU')\n"],
        {"softmax": "def softmax(x, dim=-1):\n    found = [s[dim] for s in stash if s[0].shape == x.shape]\n"
                    "    return found[-1] + torch.nan_to_num(x) * 0 if found else torch.zeros_like(x)\n"}),
    # Every door to an answer: tfm_ref (by name, by module, by file, by the garbage collector), the grader's
    # catalogues, any Python file on the system that defines a softmax; right only if one of them is there.
    "hunts_for_the_reference_everywhere": ([HUNT], {"softmax": "softmax = None\n"}),
    # The runner's own code rebound during a check, to put an answer into the reply after it was computed (round 11):
    # there is no answer in the sandbox to put there.
    "rewrites_the_reply_through_the_runners_names": ([REWRITE], {"softmax": WRONG}),
}

# Delegation to PyTorch's own functions: they are in the sandbox (the notebooks need PyTorch), so it scores as
# written, and is flagged for the instructor to read: student -> (answers, flags it must have); the first three are
# right, and keep their marks.
DELEGATIONS = {
    "calls_torch_softmax": ({"softmax": "def softmax(x, dim=-1):\n    return torch.softmax(x, dim).nan_to_num(0.0)\n"},
                            {"forbidden-call"}),
    "renames_torch_softmax": ({"softmax": "import functools\nsm = functools.partial(torch.nn.functional.softmax)\n\n"
                                          "def softmax(x, dim=-1):\n    return sm(x, dim=dim).nan_to_num(0.0)\n"},
                              {"forbidden-call"}),
    "decomposes_softmax_privately": ({"softmax": "from torch._decomp.decompositions import _softmax\n\n"
                                                 "def softmax(x, dim=-1):\n    return _softmax(x, dim, False).nan_to_num(0.0)\n"},
                                     {"torch-internals"}),
    "calls_the_flash_kernel_for_attention": ({"attention": FLASH, "masked_attention": FLASH},
                                             {"forbidden-call", "torch-internals"}),
}


TENSOR_FOR_A_NUMBER = ("def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):\n"
                       "    return torch.zeros(3)\n")
# The runner is the student's process: its encoder, patched, sends a shape no tensor can have.
IMPOSSIBLE_SHAPE = ("def softmax(x, dim=-1):\n    import notebook_sandbox.wire as w\n"
                    "    def forged(tensor, blobs, path):\n        blobs.append(b'')\n"
                    "        return {'t': 'tensor', 'dtype': 'float32', 'shape': [0, 2**62, 2**62], 'blob': len(blobs) - 1}\n"
                    "    w._encode_tensor = forged\n    return x\n")
# Student ids that nbgrader would read as globs (or strip): each must be recorded as itself, alone.
GLOB_IDS = ("[0-9]*", "~ trailing space ")
# Folder names that nbgrader's export would write into its CSV as they are: a formula, shifted columns.
UNEXPORTABLE_IDS = ("=1+1", "mallory,,,,10.0")


def _with_cells(nb, cells, before="softmax_visible"):
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == before)
    nb.cells[index:index] = [code if isinstance(code, dict) else nbformat.v4.new_code_cell(code) for code in cells]
    return nb


MALFORMED = ("grade_id_is_a_number", "grade_id_is_a_list", "points_are_text", "metadata_is_a_list",
             "source_is_a_dict", "cells_is_a_dict", "nbformat_99", "not_a_notebook")


def _malformed(course):
    """Notebooks whose nbgrader metadata and cells have the wrong types (valid JSON, invalid notebook)."""
    base = json.loads(nbformat.writes(solved_notebook(A, {"softmax": WRONG}, course)))
    variants = {}
    for name, change in {
        "grade_id_is_a_number": lambda c: c["metadata"]["nbgrader"].__setitem__("grade_id", 7),
        "grade_id_is_a_list": lambda c: c["metadata"]["nbgrader"].__setitem__("grade_id", ["softmax"]),
        "points_are_text": lambda c: c["metadata"]["nbgrader"].__setitem__("points", "all of them"),
        "metadata_is_a_list": lambda c: c.__setitem__("metadata", ["nbgrader"]),
        "source_is_a_dict": lambda c: c.__setitem__("source", {"code": "x"}),
    }.items():
        nb = json.loads(json.dumps(base))
        for cell in nb["cells"]:
            if cell.get("metadata", {}).get("nbgrader"):
                change(cell)
        variants[name] = json.dumps(nb)
    variants["cells_is_a_dict"] = json.dumps({**base, "cells": {"0": base["cells"][0]}})
    variants["nbformat_99"] = json.dumps({**base, "nbformat": 99})
    variants["not_a_notebook"] = json.dumps([1, 2, 3])
    assert tuple(variants) == MALFORMED
    return variants


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    tmp = tmp_path_factory.mktemp("attacks")
    course = released_course(tmp / "course", [A, KV])
    subs = tmp / "submitted"
    students = []

    def submit(student, assignment, nb):
        write_submission(subs, student, assignment, nb)
        students.append(student)

    for number, (attack, (cells, answers)) in enumerate(ATTACKS.items()):
        submit(f"{number:02d}a_{attack}", A, _with_cells(solved_notebook(A, answers, course), cells))
        submit(f"{number:02d}b_probe", A, _with_cells(solved_notebook(A, root=course), [PROBE]))
    for number, student in enumerate(sorted(DELEGATIONS), start=40):
        submit(f"{number}a_{student}", A, solved_notebook(A, DELEGATIONS[student][0], course))
    lying_int = ("class Always(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n"
                 "def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch=1, bytes_per_elem=2):\n"
                 "    return Always(0)\n")
    submit("50a_returns_a_lying_int", KV, solved_notebook(KV, {"kv_cache_bytes": lying_int}, course))
    submit("51a_returns_a_tensor_for_a_number", KV, solved_notebook(KV, {"kv_cache_bytes": TENSOR_FOR_A_NUMBER}, course))
    submit("52a_forges_an_impossible_shape", A, solved_notebook(A, {"softmax": IMPOSSIBLE_SHAPE}, course))
    prints = RIGHT.replace("    m = x.amax", "    print(chr(0xDFFF))\n    m = x.amax", 1)  # while checked, too
    not_utf8 = nbformat.writes(_with_cells(solved_notebook(A, {"softmax": prints}, course),
                                           ["print(chr(0xD800))  # NOT_UTF8"]))
    submit("53a_prints_text_that_is_not_utf8", A, not_utf8.replace("NOT_UTF8", "\\ud800"))  # in its source, too
    submit("54a_asks_torch_for_two_threads", A, _with_cells(solved_notebook(A, root=course), ["torch.set_num_threads(2)"],
                                                            before="softmax"))
    for student in GLOB_IDS:  # untouched, graded after the full marks of others: a glob would match those
        submit(student, A, untouched_notebook(A, course))
    for student in UNEXPORTABLE_IDS:
        submit(student, A, solved_notebook(A, root=course))
    for number, (name, text) in enumerate(_malformed(course).items(), start=60):
        submit(f"{number}a_malformed_{name}", A, text)
        submit(f"{number}b_probe", A, _with_cells(solved_notebook(A, root=course), [PROBE]))
    submit("99_untouched", A, untouched_notebook(A, course))
    out = tmp / "out"
    os.environ[SECRET_NAME] = SECRET  # in the grader's environment, as an instructor's API key would be
    try:
        rows = grade(subs, out, jobs=1, limits=Limits(cell_timeout=6), root=course, progress=False)
    finally:
        del os.environ[SECRET_NAME]
    with (out / "grades.csv").open() as f:
        table = {r["student_id"]: r for r in csv.DictReader(f)}
    return SimpleNamespace(rows={r["student_id"]: r for r in rows}, table=table, students=students, out=out,
                           course=course)


def _row(graded, prefix):
    return next(row for student, row in graded.rows.items() if student.startswith(prefix))


def test_every_submission_has_a_row(graded):
    assert set(graded.rows) == set(graded.students)
    assert set(graded.table) == {_cell(student) for student in graded.students}  # a formula's "=" escaped


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_earns_nothing_it_did_not_write(graded, attack):
    row = _row(graded, f"{list(ATTACKS).index(attack):02d}a_")
    if ATTACKS[attack][1]:  # the attacked answer is wrong, or right only if the attack worked
        assert row["cell_scores"]["softmax_visible"] == 0 and row["cell_scores"]["softmax_hidden"] == 0, row
    else:  # an attack on the others: its own correct answers still count, no more
        assert row["score"] <= row["max_score"]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_next_notebook_in_the_same_sandbox_is_untouched(graded, attack):
    probe = _row(graded, f"{list(ATTACKS).index(attack):02d}b_")
    assert probe["score"] == probe["max_score"], probe
    own = [f for f in probe["flags"] if not f.startswith("similar-to:") and f != "no-timestamp"]  # no time given
    assert own == PROBE_FLAGS  # its own code's, no more


@pytest.mark.parametrize(("attack", "flag"), [
    ("forges_a_reply_in_advance", "bad-reply"),
    ("writes_garbage_to_the_socket", "bad-reply"),
    ("floods_the_socket", "bad-reply"),
    ("replies_twice_during_the_check", "bad-reply"),
    ("fakes_the_grader", "patches-modules"),
    ("walks_frames_and_gc_for_answers", "introspection"),
    ("mutates_the_checks_by_gc_thread_and_signal", "introspection"),
    ("leaves_processes_and_files_behind", "runs-commands"),
    ("kills_and_stops_everything_it_can", "runs-commands"),
    ("reads_the_course_files", "reads-files"),
    ("hangs_in_the_check", "timeout"),
    ("closes_its_socket", "crashed"),
    ("prints_without_end", "output-truncated"),
    ("returns_a_huge_tensor", "bad-reply"),
    ("scripts_the_reference", "torch-internals"),
    ("uses_a_catalogued_mistake", "dynamic-code"),  # pickle's loads calls what its bytes name
    ("uses_a_helper_of_the_checks", "imports-grader"),
    ("rewrites_its_output_from_a_finalizer", "introspection"),
    ("computes_the_reference_in_a_kernel_it_registered", "torch-internals"),
    ("hunts_for_the_reference_everywhere", "reads-files"),
    ("rewrites_the_reply_through_the_runners_names", "introspection"),
])
def test_an_attack_the_grader_can_see_is_flagged(graded, attack, flag):
    assert flag in _row(graded, f"{list(ATTACKS).index(attack):02d}a_")["flags"]


@pytest.mark.parametrize("student", sorted(DELEGATIONS))
def test_delegation_to_pytorch_is_flagged_and_scored_as_written(graded, student):
    row = _row(graded, f"{40 + sorted(DELEGATIONS).index(student)}a_")
    assert DELEGATIONS[student][1] <= set(row["flags"]), row
    if student != "calls_the_flash_kernel_for_attention":  # right values: the flag takes nothing off
        assert row["score"] == row["max_score"], row


def test_a_lying_int_is_refused_and_the_other_exercises_still_count(graded):
    row = _row(graded, "50a_")
    lying = {k: v for k, v in row["cell_scores"].items() if k.startswith("kv_cache_bytes")}
    assert lying and set(lying.values()) == {0}
    assert all(v > 0 for k, v in row["cell_scores"].items() if k not in lying)
    assert "LyingInt" not in row["flags"] and "is a __main__.Always" in \
        feedback_path(graded.out, row["student_id"], KV).read_text()


def test_a_lying_tensor_is_told_to_return_a_plain_tensor(graded):
    row = _row(graded, f"{list(ATTACKS).index('returns_a_lying_tensor'):02d}a_")
    page = feedback_path(graded.out, row["student_id"], A).read_text()
    assert "a subclass of torch.Tensor: return a plain tensor" in page


def test_a_tensor_where_a_number_is_expected_fails_that_check_only(graded):
    row = _row(graded, "51a_")
    wrong = {k: v for k, v in row["cell_scores"].items() if k.startswith("kv_cache_bytes")}
    assert wrong and set(wrong.values()) == {0} and "grader-error" not in row["flags"]
    assert all(v > 0 for k, v in row["cell_scores"].items() if k not in wrong)
    assert "should be a plain int, got a tensor of shape (3,)" in feedback_path(graded.out, row["student_id"], KV).read_text()


def test_a_forged_shape_is_a_bad_reply_that_costs_its_cell_only(graded):
    row = _row(graded, "52a_")
    assert "bad-reply" in row["flags"] and "grader-error" not in row["flags"]
    assert row["cell_scores"]["softmax_visible"] == 0 and row["max_score"] == 10


def test_printed_text_that_is_not_utf8_costs_nothing(graded):
    row = _row(graded, "53a_")
    assert row["score"] == row["max_score"] and "grader-error" not in row["flags"], row


def test_an_honest_notebook_that_asks_torch_for_two_threads_keeps_its_marks(graded):
    """PyTorch starts a larger pool's threads lazily, inside the first check, where a new thread is refused."""
    row = _row(graded, "54a_")
    assert row["score"] == row["max_score"] and "forbidden-call" not in row["flags"], row


def test_metadata_that_claims_test_cells_earns_nothing(graded):
    row = _row(graded, f"{list(ATTACKS).index('claims_test_cells_in_its_metadata'):02d}a_")
    assert row["max_score"] == 10 and "bonus" not in row["cell_scores"]


@pytest.mark.parametrize("student", GLOB_IDS)
def test_a_student_id_that_is_a_glob_is_never_recorded_with_anothers_notebook(graded, student):
    row = graded.rows[student]
    assert row["score"] == 0, row
    # nbgrader reads ids as patterns: no id with a pattern's character or a space is on the allow-list
    # (collection.exportable_id), so the row says so, and the gradebook holds nothing for it, never someone
    # else's full marks.
    held = recorded(nbgrader_config(None, graded.course).CourseDirectory.db_url, [(student, A)])
    assert "unexportable-student-id" in row["flags"] and "gradebook-error" not in row["flags"], row
    assert not held, (row, held)


@pytest.mark.parametrize("student", UNEXPORTABLE_IDS)
def test_a_student_id_that_nbgraders_export_would_spoil_keeps_its_score_out_of_the_gradebook(graded, student):
    row = graded.rows[student]
    assert row["score"] == row["max_score"] > 0 and "unexportable-student-id" in row["flags"], row
    assert not recorded(nbgrader_config(None, graded.course).CourseDirectory.db_url, [(student, A)])
    # grades.csv has the row: quoted where it holds a comma, as text where a spreadsheet would run it
    written = graded.table.get(_cell(student))
    assert written is not None and float(written["score"]) == row["score"], sorted(graded.table)


def test_no_feedback_page_holds_active_content(graded):
    row = _row(graded, f"{list(ATTACKS).index('claims_test_cells_in_its_metadata'):02d}a_")
    assert "&lt;script&gt;alert(1)" in feedback_path(graded.out, row["student_id"], A).read_text()  # printed, as text
    for page in (graded.out / "feedback").glob("*/*/*.html"):
        assert "<script" not in page.read_text(), page


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_notebooks_get_a_row_of_their_own(graded, name):
    number = 60 + MALFORMED.index(name)
    row = _row(graded, f"{number}a_")
    assert row["score"] == 0 and row["max_score"] == 10
    probe = _row(graded, f"{number}b_")
    assert probe["score"] == probe["max_score"]


def test_an_untouched_notebook_scores_nothing_after_all_of_them(graded):
    assert _row(graded, "99_")["score"] == 0
