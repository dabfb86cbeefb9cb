"""autograde.lockdown: what a runner's interpreter refuses for good, and the signals it holds while it answers. The
audit hook cannot be taken off again, so each test runs in a Python of its own."""
import subprocess
import sys
import textwrap

import pytest
import torch


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


CLOSED = {
    "the garbage collector's object list": "gc.get_objects()",
    "what refers to an object": "gc.get_referrers(sys)",
    "what an object refers to": "gc.get_referents(sys)",
    "a function's code": "f.__code__ = (lambda: 1).__code__",
    "the runner's own hook's code": "lockdown._refuse.__code__ = (lambda event, args: None).__code__",
    "ctypes' foreign calls": "ctypes.CDLL(None).getpid()",
    "ctypes' raw memory": "ctypes.string_at(id(sys), 8)",
}


@pytest.mark.parametrize("what", CLOSED)
def test_a_closed_door_raises_an_error_that_names_it(what):
    said = _run(f"""
        import ctypes, gc, sys
        from autograde import lockdown

        def f(a=1, *, k=1):
            return a
        lockdown.close_the_interpreter()
        try:
            {CLOSED[what]}
        except PermissionError as error:
            print("refused:", error)
        else:
            print("done")
        print("still", f(), f.__code__.co_name)
    """)
    assert said.startswith("refused:") and "is closed while your notebook is graded" in said, said
    assert said.rstrip().endswith("still 1 f")  # the function is as it was


def test_another_audit_hook_is_never_added():
    said = _run("""
        import sys
        from autograde import lockdown

        lockdown.close_the_interpreter()
        sys.addaudithook(lambda event, args: print("the student's hook ran at", event))  # Python drops the refusal
        open(sys.executable, "rb").close()
        exec("1")
        print("end")
    """)
    assert said == "end\n"


def test_the_hook_closes_only_its_doors():
    # what a notebook's cells do in a runner, where torch and ctypes are imported before the hook (as the zygote does)
    said = _run("""
        import ctypes, gc, importlib, sys, torch
        from autograde import lockdown

        lockdown.close_the_interpreter()
        import collections, dataclasses, enum
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from torch.utils.data import DataLoader, TensorDataset
        import tfm_ref

        Point = collections.namedtuple("Point", "x y", defaults=(0,))  # sets its __new__'s defaults
        class Plain:
            pass
        Plain.x = 1  # a class's attribute: an audit event too, and an ordinary one
        @dataclasses.dataclass
        class Settings:
            width: int = 4
        class Colour(enum.Enum):
            RED = 1
        class Twice(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return 2 * x
            @staticmethod
            def backward(ctx, grad):
                return 2 * grad
        x = torch.ones(3, requires_grad=True)
        Twice.apply(x).sum().backward()
        exec(compile("y = 2", "<cell>", "exec"), {})
        importlib.import_module("json")
        gc.collect(), gc.disable(), gc.enable()
        with open(sys.executable, "rb") as f:
            f.read(4)
        plt.plot([1, 2])
        batches = len(list(DataLoader(TensorDataset(torch.arange(10)), batch_size=4)))
        print(Point(1).y, Settings().width, Colour.RED.value, x.grad.tolist(), batches,
              round(tfm_ref.softmax(torch.zeros(4), -1).sum().item(), 4), torch.cuda.is_available())
    """)
    assert said.split() == ["0", "4", "1", "[2.0,", "2.0,", "2.0]", "3", "1.0", str(torch.cuda.is_available())]


def test_held_signals_run_no_handler_until_released_and_the_handler_and_mask_come_back():
    said = _run("""
        import os, signal
        from autograde.lockdown import SIGNAL_TOOLS, hold_signals, release_signals

        ran = []
        signal.signal(signal.SIGUSR1, lambda number, frame: ran.append(number))
        held = hold_signals(SIGNAL_TOOLS)
        os.kill(os.getpid(), signal.SIGUSR1)
        print("held:", ran, signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN,
              signal.SIGUSR1 in signal.pthread_sigmask(signal.SIG_BLOCK, []))
        release_signals(held, SIGNAL_TOOLS)
        print("released:", ran == [signal.SIGUSR1], callable(signal.getsignal(signal.SIGUSR1)),
              signal.SIGUSR1 in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    """)
    # the signal sent while held stays pending, and reaches the handler once it is back
    assert said.splitlines() == ["held: [] True True", "released: True True False"]

