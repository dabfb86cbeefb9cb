"""Rounds 9 to 11 of the hostile student: attacks on the moments just outside a check's guard (before it, between its
parts, and after the outcome is sealed), each of which took softmax's full marks with no flag before its fix (but one,
`STILL_OPEN`). tests/test_grading_attacks.py grades them with the others. Each reaches its hooks by ways the audit did
not read then (string.Formatter, names spelled backwards through vars()), so that only the runner's own defences
stood in the way."""

STUB = "def scaled_dot_product_attention(q, k, v, mask=None, *, return_weights=False):\n    raise NotImplementedError\n"
STUBS = {"attention": STUB, "masked_attention": STUB}  # their checks would trip the attacks inside a guard


# What the attacks share: attributes reached through string.Formatter's fields (unread by the audit then), and the
# reference's reply to the request found in a frame, sealed as the runner seals it.
REACH = r'''
import string, sys

_F = string.Formatter()


def _get(obj, path):
    return _F.get_field("0." + path, [obj], {})[0]
'''
SEALED_REFERENCE = r'''

def _reference(loc):
    call, request = loc["call"], loc["request"]
    modules = _get(sys, "modules")
    ref, wire = modules["tfm_ref"].softmax, modules["autograde.wire"]
    x = call.args[0].detach().clone().requires_grad_(bool(request["grad"]))
    y = ref(x, *call.args[1:], **call.kwargs)
    grads = []
    if request["grad"]:
        gen = torch.Generator().manual_seed(request["seed"] + 1)
        up = torch.randn(y.shape, generator=gen).to(y.dtype)
        grads = [torch.autograd.grad([y], [x], [up])[0].detach()]
    blobs = []
    return (wire.encode(y.detach(), blobs), wire.encode(grads, blobs), blobs)
'''

# seal: After the last guard: a generator's `finally` (no __del__) hung on the input clone runs as evaluation.evaluate
# returns; it installs a profile function (sys.setprofile reached through string.Formatter().get_field, which the
# audit did not read then), which fires on runner._evaluate's next Python call (_last_pid) and replaces outcome.sealed
# (the sealed bytes are a mutable attribute of a mutable Outcome) with tfm_ref's output and gradients.
REWRITES_THE_SEALED_REPLY_FROM_A_FINALIZERS_HOOK_SETUP = REACH + SEALED_REFERENCE + r'''

def _answer(loc):
    loc["outcome"].sealed = _reference(loc)


def _hook(frame, event, arg):
    if event != "call":
        return
    loc = _get(frame, "f_" + "back.f_" + "locals")
    if "outcome" in loc and "request" in loc:
        _get(sys, "set" + "profile")(None)
        _answer(loc)


def _later():
    try:
        yield
    finally:
        _get(sys, "set" + "profile")(_hook)
'''
REWRITES_THE_SEALED_REPLY_FROM_A_FINALIZERS_HOOK_ANSWER = r'''
def softmax(x, dim=-1):
    job = _later()
    next(job)
    x.job = job
    return x * 0
'''

# exit: The exception path: a BaseException (not an Exception) raised by the checked function passes evaluation.evaluate's
# `except Exception` (and so _failure's guarded describe_error) and reaches runner._evaluate's `except BaseException`,
# which calls describe_error(error) -> str(error) unguarded. The exception's __str__ finds `call`/`request` in the
# runner's frame, runs tfm_ref.softmax, and sets a profile function that, on the return of the Outcome(...) built next,
# fills its `sealed` with the reference's output and gradients and clears its error.
REWRITES_THE_NEXT_OUTCOME_FROM_A_BASE_EXCEPTIONS_MESSAGE_SETUP = REACH + SEALED_REFERENCE + r'''

class _Stop(BaseException):
    def __str__(self):
        frame = _get(sys, "_get" + "frame")(1)
        while "request" not in _get(frame, "f_" + "locals"):
            frame = _get(frame, "f_" + "back")
        sealed = _reference(_get(frame, "f_" + "locals"))

        def hook(frame, event, arg):
            if event == "return" and _get(frame, "f_" + "code.co_" + "name") == "__init__":
                me = _get(frame, "f_" + "locals").get("self")
                if type(me).__name__ == "Outcome":
                    me.sealed, me.error, me.error_type = sealed, None, None
        _get(sys, "set" + "profile")(hook)
        return "stop"
'''
REWRITES_THE_NEXT_OUTCOME_FROM_A_BASE_EXCEPTIONS_MESSAGE_ANSWER = r'''
def softmax(x, dim=-1):
    raise _Stop()
'''

# json: After the seal: the json module is not among Snapshot's PROTECTED_MODULES, and `json.dumps = f` is no
# patches-modules assignment for the audit. channel.Channel.send calls json.dumps(reply) with the reply's blobs list
# as its own local: the student's dumps (unguarded) runs tfm_ref.softmax on the input the checked function kept, and
# writes the reference's output (and, for the gradient case, its gradient for the upstream drawn from the request's
# seed) into those blobs. Frames are read through string.Formatter().get_field (unread by the audit then).
REWRITES_THE_REPLY_FROM_A_PATCHED_JSON_DUMPS_SETUP = r'''
import json, string, sys

_F = string.Formatter()
_kept = []
_plain_dumps = json.dumps


def _get(obj, path):
    return _F.get_field("0." + path, [obj], {})[0]


def _bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _dumps(header, **kw):
    outcome = header.get("outcome")
    if outcome and _kept and outcome.get("output", {}).get("t") == "tensor":
        x, dim = _kept.pop()
        frame = _get(sys, "_get" + "frame")(1)
        blobs = _get(frame, "f_" + "locals")["blobs"]
        request = _get(frame, "f_" + "back.f_" + "locals")["request"]
        x = x.requires_grad_(bool(request["grad"]))
        y = _get(sys, "modules")["tfm_ref"].softmax(x, dim)
        blobs[outcome["output"]["blob"]] = _bytes(y)
        if request["grad"]:
            gen = torch.Generator().manual_seed(request["seed"] + 1)
            up = torch.randn(y.shape, generator=gen).to(y.dtype)
            blobs[outcome["grads"]["items"][0]["blob"]] = _bytes(torch.autograd.grad([y], [x], [up])[0])
    return _plain_dumps(header, **kw)


json.dumps = _dumps
'''
REWRITES_THE_REPLY_FROM_A_PATCHED_JSON_DUMPS_ANSWER = r'''
def softmax(x, dim=-1):
    _kept.append((x.detach().clone(), dim))
    return x * 0
'''

# unwrap: Before the check, unguarded, with the inputs decoded: checking.guard_for runs inspect.unwrap(exercise.reference)
# in LocalCandidate.evaluate. A `__wrapped__` put into tfm_ref.softmax's __dict__ (which Snapshot does not record)
# holding an object with __getattr__ runs the student's code there; it finds `call`/`seed` in the caller's frame
# (string.Formatter().get_field, unread by the audit then), runs tfm_ref.softmax and keeps the result and its graph. The
# checked softmax replays it through an autograd.Function whose backward asks autograd for the reference's VJP.
COMPUTES_THE_REFERENCE_BEFORE_THE_CHECK_FROM_A_PLANTED_WRAPPED_SETUP = r'''
import string, sys

_F = string.Formatter()
_stash = {}


def _get(obj, path):
    return _F.get_field("0." + path, [obj], {})[0]


def _grab():
    frame = _get(sys, "_get" + "frame")(1)
    while frame is not None:
        loc = _get(frame, "f_" + "locals")
        if "call" in loc and "seed" in loc and "case" in loc and "exercise" in loc:
            call = loc["call"]
            x = call.args[0].detach().clone().requires_grad_(True)
            _stash["x"], _stash["y"] = x, _ref(x, *call.args[1:], **call.kwargs)
            return
        frame = _get(frame, "f_" + "back")


class _Trap:
    def __getattr__(self, name):
        _grab()
        raise AttributeError(name)


_ref = _get(sys, "modules")["tfm_ref"].softmax
vars(_ref)["__wrap" + "ped__"] = _Trap()


class _Replay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _stash["y"].detach().clone()

    @staticmethod
    def backward(ctx, g):
        return torch.autograd.grad([_stash["y"]], [_stash["x"]], [g], retain_graph=True)[0]
'''
COMPUTES_THE_REFERENCE_BEFORE_THE_CHECK_FROM_A_PLANTED_WRAPPED_ANSWER = r'''
def softmax(x, dim=-1):
    return _Replay.apply(x)
'''

# disable: In the check: torch._C.DisableTorchFunction (reached through string.Formatter().get_field, which the audit did not
# read) switches the guard's TorchFunctionMode off; the profile hook sees no call of torch.softmax made from C by
# functools.partial. The exit looks at the mode stack only (its depth and top), which DisableTorchFunction leaves as it was.
SWITCHES_THE_GUARDS_MODE_OFF_WITH_DISABLE_TORCH_FUNCTION_SETUP = r'''
import functools, string

_off = string.Formatter().get_field("0._C.DisableTorchFunction", [torch], {})[0]
'''
SWITCHES_THE_GUARDS_MODE_OFF_WITH_DISABLE_TORCH_FUNCTION_ANSWER = r'''
def softmax(x, dim=-1):
    with _off():
        return functools.partial(torch.softmax, x, dim)().nan_to_num(0.0)
'''

ATTACKS = {
    "rewrites_the_sealed_reply_from_a_finalizers_hook": ([REWRITES_THE_SEALED_REPLY_FROM_A_FINALIZERS_HOOK_SETUP], {"softmax": REWRITES_THE_SEALED_REPLY_FROM_A_FINALIZERS_HOOK_ANSWER, **STUBS}),
    "rewrites_the_next_outcome_from_a_base_exceptions_message": ([REWRITES_THE_NEXT_OUTCOME_FROM_A_BASE_EXCEPTIONS_MESSAGE_SETUP], {"softmax": REWRITES_THE_NEXT_OUTCOME_FROM_A_BASE_EXCEPTIONS_MESSAGE_ANSWER, **STUBS}),
    "rewrites_the_reply_from_a_patched_json_dumps": ([REWRITES_THE_REPLY_FROM_A_PATCHED_JSON_DUMPS_SETUP], {"softmax": REWRITES_THE_REPLY_FROM_A_PATCHED_JSON_DUMPS_ANSWER, **STUBS}),
    "computes_the_reference_before_the_check_from_a_planted_wrapped": ([COMPUTES_THE_REFERENCE_BEFORE_THE_CHECK_FROM_A_PLANTED_WRAPPED_SETUP], {"softmax": COMPUTES_THE_REFERENCE_BEFORE_THE_CHECK_FROM_A_PLANTED_WRAPPED_ANSWER, **STUBS}),
    "switches_the_guards_mode_off_with_disable_torch_function": ([SWITCHES_THE_GUARDS_MODE_OFF_WITH_DISABLE_TORCH_FUNCTION_SETUP], {"softmax": SWITCHES_THE_GUARDS_MODE_OFF_WITH_DISABLE_TORCH_FUNCTION_ANSWER, **STUBS}),
}


# Round 10: what the runner itself looked up after the seal. Names are reversed strings read through vars(), which the
# audit does not read: only the runner's defences stand in the way.
# A cell replaced sys.setprofile by one that ignores None, so the runner's unhooking left the cell's profile hook on;
# it fired after the seal and replaced the sealed reply. The checked code replaced builtins.setattr (a dict store,
# no call), which contextlib's redirect_stdout called as the runner's capture of the output ended.
RUNNER_LOOKUPS = REACH + SEALED_REFERENCE + r'''
import sys, torch
_s = sys
_sd = vars(_s)
_mods = _sd["seludom"[::-1]]
_bd = vars(_mods["snitliub"[::-1]])
_ga = _bd["rttateg"[::-1]]
_realsetattr = _bd["rttates"[::-1]]
_frame = _sd["emarfteg_"[::-1]]
_realset = _sd["eliforptes"[::-1]]
_done = []


def _answer(loc):
    outcome = loc["outcome"]
    if outcome.sealed is None or any(outcome.sealed is d for d in _done):
        return
    outcome.sealed = _reference(loc)
    _done[:] = [outcome.sealed]


def _find(frame):
    while frame is not None:
        if _ga(_ga(frame, "edoc_f"[::-1]), "eman_oc"[::-1]) == "_evaluate":
            loc = _ga(frame, "slacol_f"[::-1])
            if "outcome" in loc and "request" in loc and loc["request"].get("name") == "softmax":
                return loc
            return None
        frame = _ga(frame, "kcab_f"[::-1])
    return None


def _relay(frame, undo=None):
    """The reference's reply in place of the runner's, from its _evaluate below ``frame`` if that is found there
    (first putting back what ``undo`` puts back)."""
    loc = _find(frame)
    if loc is not None:
        if undo is not None:
            undo()
        _answer(loc)
'''
UNHOOK_IGNORED_SETUP = RUNNER_LOOKUPS + r'''
def _hook(frame, event, arg):
    if event != "call":
        return
    back = _ga(frame, "kcab_f"[::-1])
    if back is None or _ga(_ga(back, "edoc_f"[::-1]), "eman_oc"[::-1]) != "_evaluate":
        return
    _relay(back)


def _keep(f):
    if f is not None:
        _realset(f)


_sd["eliforptes"[::-1]] = _keep
_realset(_hook)
'''
SETATTR_SWAPPED_SETUP = RUNNER_LOOKUPS + r'''
def _evil(obj, name, value):
    _realsetattr(obj, name, value)
    _relay(_frame(1), lambda: _bd.update({"rttates"[::-1]: _realsetattr}))
'''
NOTHING = r'''
def softmax(x, dim=-1):
    return x * 0
'''
SWAPS_SETATTR = r'''
def softmax(x, dim=-1):
    _bd["rttates"[::-1]] = _evil
    return x * 0
'''

ATTACKS |= {
    "keeps_its_profile_hook_through_a_replaced_setprofile": ([UNHOOK_IGNORED_SETUP], {"softmax": NOTHING, **STUBS}),
    "rewrites_the_reply_from_a_builtin_replaced_in_the_check": ([SETATTR_SWAPPED_SETUP],
                                                                {"softmax": SWAPS_SETATTR, **STUBS}),
}


# Round 11: code of the student's that runs by itself while the runner works, after the seal. Names are reversed
# strings read through vars(), as in round 10.
# An audit hook (sys.addaudithook) added in a cell runs at every audit event the interpreter raises, and no hook can be
# taken off again: the runner's own sys.setprofile(None) after the check raises one, and the hook replaced the sealed
# reply there.
AUDIT_HOOK_SETUP = RUNNER_LOOKUPS + r'''
_busy = []


def _audit(event, args):
    if event != "sys.setprofile" or _busy:  # its own frame lookups raise events too
        return
    _busy.append(1)
    _relay(_frame(1))
    _busy.pop()


_sd["koohtiduadda"[::-1]](_audit)
'''
# A signal handler: the check arms a timer; each time it fires while the check still runs (evaluation.evaluate on the
# stack), the handler arms it again, a few microseconds later, until it finds the runner past the seal.
SIGNAL_HANDLER_SETUP = RUNNER_LOOKUPS + r'''
_signal = _mods["langis"[::-1]]


def _in_check(frame):
    while frame is not None:
        if _ga(_ga(frame, "edoc_f"[::-1]), "eman_oc"[::-1]) == "evaluate":
            return True
        frame = _ga(frame, "kcab_f"[::-1])
    return False


def _handler(number, frame):
    if _in_check(frame):
        _signal.setitimer(_signal.ITIMER_REAL, 0.00001)
        return
    _relay(frame)


_signal.signal(_signal.SIGALRM, _handler)
'''
ARMS_A_TIMER = r'''
def softmax(x, dim=-1):
    _signal.setitimer(_signal.ITIMER_REAL, 0.00001)
    return x * 0
'''

ATTACKS |= {
    "rewrites_the_reply_from_an_audit_hook": ([AUDIT_HOOK_SETUP], {"softmax": NOTHING, **STUBS}),
    "rewrites_the_reply_from_a_signal_handler": ([SIGNAL_HANDLER_SETUP], {"softmax": ARMS_A_TIMER, **STUBS}),
}
# Still open: the checked code rebinds a name of the runner's module (a dict store, no call the guard sees), and the
# runner calls it once the check is over, before its reply is sent. What runs there is the runner's own Python, whose
# names live in modules the student's code can write to; `STILL_OPEN` marks it, so that its test fails the day it is
# closed and says so.
RUNNER_NAME_SETUP = RUNNER_LOOKUPS + r'''
_runner = vars(_mods["rennur.edargotua"[::-1]])
_real_unhook = _runner["koohnu_"[::-1]]


def _evil():
    _real_unhook()
    _relay(_frame(1), lambda: _runner.update({"koohnu_"[::-1]: _real_unhook}))
'''
REBINDS_A_RUNNER_NAME = r'''
def softmax(x, dim=-1):
    _runner["koohnu_"[::-1]] = _evil
    return x * 0
'''
ATTACKS["rewrites_the_reply_from_a_runner_name_rebound_in_the_check"] = ([RUNNER_NAME_SETUP],
                                                                        {"softmax": REBINDS_A_RUNNER_NAME, **STUBS})

STILL_OPEN = {
    "rewrites_the_reply_from_a_runner_name_rebound_in_the_check":
        "the runner's code after the check looks names up in modules the checked code can write to",
}
