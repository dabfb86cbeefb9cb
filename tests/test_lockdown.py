"""autograde.lockdown: what a runner's interpreter refuses for good, and the signals it holds while it answers. The
audit hook cannot be taken off again, so each test runs in a Python of its own."""
import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


CLOSED = {
    "the garbage collector's object list": "gc.get_objects()",
    "what refers to an object": "gc.get_referrers(sys)",
    "what an object refers to": "gc.get_referents(sys)",
    "a function's code": "f.__code__ = (lambda: 1).__code__",
    "a function's defaults": "f.__defaults__ = (2,)",
    "a function's keyword defaults": "f.__kwdefaults__ = {'k': 2}",
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
    said = _run("""
        import gc, importlib, sys, torch
        from autograde import lockdown

        lockdown.close_the_interpreter()
        class Plain:
            pass
        Plain.x = 1  # a class's attribute: an audit event too, and an ordinary one
        exec(compile("y = 2", "<cell>", "exec"), {})
        importlib.import_module("json")
        gc.collect(), gc.disable(), gc.enable()
        with open(sys.executable, "rb") as f:
            f.read(4)
        print(torch.ones(3).softmax(0).sum().item())
    """)
    assert said.strip() == "1.0"


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

