"""What a runner's interpreter refuses a notebook's code for as long as it lives, and the signals it holds back while
it answers a request.

A check's guard (`autograde.integrity.Forbid`) sees the student's code while it runs. Some code of theirs would run by
itself later, in the runner's own moments outside any guard: after the outcome is sealed and before the reply is sent,
with the inputs and the reply within reach of a frame. Two interpreter mechanisms do that, and this module closes both:

* An audit hook (``sys.addaudithook``) runs at every audit event the interpreter raises, the runner's own
  ``sys.setprofile`` among them, and Python has no way to take one off. `close_the_interpreter` adds the runner's
  own, before any student code, and it refuses for the life of the process: adding another (Python drops that
  refusal's error: the call returns, and no hook was added); listing objects through the garbage collector
  (``gc.get_objects``, ``get_referrers``, ``get_referents``), by which the interpreter's list of hooks is found;
  replacing a function's ``__code__``, its own included (not its defaults: ``collections.namedtuple`` sets them); and
  ctypes, whose memory access and foreign calls reach all of these. The hook reads no name a cell could rebind: its
  names are constants in its code.
* A signal handler runs between any two steps of the runner's code. `hold_signals` blocks every signal and sets the
  Python handlers aside (a signal that arrived before runs nothing) until `release_signals`, once the reply is sent;
  the check's guard refuses ``signal.signal`` and ``signal.pthread_sigmask``, so that none comes back meanwhile.

In the student's own kernel none of this is installed.
"""
from __future__ import annotations

import signal
import sys

__all__ = ["close_the_interpreter", "hold_signals", "release_signals", "SIGNAL_TOOLS"]


def _refuse(event: str, args: tuple) -> None:
    """The runner's audit hook. Only constants and the exact str ``event`` are read: a module global or a builtin
    could be rebound by a cell (a rebound ``PermissionError`` still raises, as calling or raising it fails)."""
    if event == "object.__getattr__":  # the most frequent by far (a frame's code read: the guard reads one per call)
        return
    if event == "object.__setattr__" and args[1] == "__code__" or event == "sys.addaudithook" \
            or event == "gc.get_objects" or event == "gc.get_referrers" or event == "gc.get_referents" \
            or event.startswith("ctypes."):
        what = "setting a function's __code__" if event == "object.__setattr__" else event
        raise PermissionError(what + " is closed while your notebook is graded: it reaches the grader's own objects, "
                                     "or runs code where no check can see it. (Your own kernel is not affected.)")


def close_the_interpreter() -> None:
    """Add the runner's audit hook (`_refuse`); call it before any student code runs, once per process."""
    sys.addaudithook(_refuse)


def hold_signals(tools: tuple) -> tuple:
    """Block every signal and set every Python handler to ignore its signal; returns (the mask before, the handlers
    set aside), for `release_signals`. ``tools`` is `SIGNAL_TOOLS` as the caller bound it before any student code ran:
    a cell may rebind signal's names, or this module's. A signal that arrived before the block runs its handler at the
    next step, and that handler may unblock signals or set one again: block and look again until nothing is left."""
    sigmask, getsignal, setsignal, is_callable, catchable, ignore, block, every, _ = tools
    mask, handlers = sigmask(block, every), {}
    while True:
        found = {number: handler for number in catchable if is_callable(handler := getsignal(number))}
        if not found:
            return mask, handlers
        for number in found:
            setsignal(number, ignore)
        handlers.update(found)
        sigmask(block, every)


def release_signals(held: tuple, tools: tuple) -> None:
    """Put back what `hold_signals` set aside."""
    sigmask, _, setsignal, *_, setmask = tools
    mask, handlers = held
    for number, handler in handlers.items():
        setsignal(number, handler)
    sigmask(setmask, mask)


SIGNAL_TOOLS = (signal.pthread_sigmask, signal.getsignal, signal.signal, callable,
                tuple(sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})), signal.SIG_IGN,
                signal.SIG_BLOCK, frozenset(signal.valid_signals()), signal.SIG_SETMASK)
"""What `hold_signals` and `release_signals` work with: (pthread_sigmask, getsignal, signal, callable, the catchable
signals, SIG_IGN, SIG_BLOCK, every signal, SIG_SETMASK)."""
