"""What a check says: a failure in words (`failure_message`), the line a pass prints, the note on a delegation,
each in the language in use (`autograde.messages`). A check's outcome is a `Report`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from notebook_sandbox.display import indent, show, show_named

from .adapters import AS_BUILT, TRAINING
from .attempts import Failure, gradient_names
from .comparison import error_hint
from .messages import N_, _

if TYPE_CHECKING:
    from .spec import Case, Exercise

__all__ = ["Report", "failure_message", "passed_line", "delegation_note", "FIX_PREFIX", "MISTAKE_PREFIX"]

FIX_PREFIX = N_("How to fix it: ")
"""Starts the line that holds a recognised mistake's fix (in English; the message's language has ``_(FIX_PREFIX)``)."""
MISTAKE_PREFIX = N_("Likely mistake — ")
"""Starts the line that names a recognised mistake and its hint (in English, as above)."""


@dataclass(frozen=True)
class Report:
    """The outcome of a check. ``mistake`` is the catalogued mistake recognised, if any; ``delegated``: the
    exercise's forbidden PyTorch operators that ran in the student's code (a flag)."""

    exercise: str
    passed: bool
    mistake: str | None
    message: str
    n_cases: int
    seconds: float = 0.0
    delegated: tuple[str, ...] = ()


def delegation_note(report: Report) -> str:
    """What a check says when the student's code ran an operator that does the exercise (it still counts)."""
    return _("⚠ {exercise}: your code ran PyTorch's {operators}, which does this exercise for you. It passes, but "
             "grading flags it for your instructor to read: write the computation yourself.").format(
        exercise=report.exercise, operators=", ".join(report.delegated))


def passed_line(report: Report, hidden: bool) -> str:
    if hidden:
        line = (_("✓ {exercise}: {n} visible and hidden check passed ({seconds:.2f} s)") if report.n_cases == 1 else
                _("✓ {exercise}: {n} visible and hidden checks passed ({seconds:.2f} s)"))
    else:
        line = (_("✓ {exercise}: {n} visible check passed ({seconds:.2f} s)") if report.n_cases == 1 else
                _("✓ {exercise}: {n} visible checks passed ({seconds:.2f} s)"))
    return line.format(exercise=report.exercise, n=report.n_cases, seconds=report.seconds)


def failure_message(failure: Failure, exercise: Exercise, case: Case, seed: int, hidden: bool, reveal_fix: bool,
                    failing_uses: list[tuple[Report, bool | None]]) -> str:
    """The failure in words, in the language in use (`autograde.messages`)."""
    if failure.stub:
        return _("✗ {exercise}: not written yet — it raises NotImplementedError. Delete the line "
                 "`raise NotImplementedError()` and write your code in its place.").format(exercise=exercise.name)
    # what a common exception most often means, where no catalogued mistake says what it means here
    hint = error_hint(failure.got.error) if failure.got.error and failure.mistake is None else ""
    problem = failure.problem.rstrip(".") + hint
    # the case's label names its own input; the values quoted are the smaller one's, shown below
    where = _("on a smaller input (below), ") if failure.shrunk else ""
    if hidden and case in exercise.hidden:
        verdict = _("✗ {exercise}: hidden check '{case}' failed — {where}{problem}.")
    else:
        verdict = _("✗ {exercise}: check '{case}' failed — {where}{problem}.")
    lines = [verdict.format(exercise=exercise.name, case=_(case.label), where=where, problem=problem)]
    for report, calls in failing_uses:
        first, *rest = report.message.splitlines()
        named = [line for line in rest if line.startswith(_(MISTAKE_PREFIX))]  # its diagnosis, if it has one
        lines += [(_("Your `{exercise}` from an earlier exercise fails its own check, and this exercise calls it: "
                     "fix it first.") if calls else
                   _("Your `{exercise}` from an earlier exercise fails its own check; if this exercise calls it, "
                     "fix that first.")).format(exercise=report.exercise), indent("\n".join([first, *named]))]
    mistake = failure.mistake
    if mistake is not None:
        lines.append(_(MISTAKE_PREFIX) + _("{mistake}: {hint}").format(mistake=_(mistake.name), hint=_(mistake.hint)))
        if mistake.fix and reveal_fix:
            lines.append(_(FIX_PREFIX) + _(mistake.fix))  # folded behind a toggle on the feedback page
        elif mistake.fix:
            # the fix is kept per kernel: a run of nbgrader validate, a new process each time, never shows it
            lines.append(_("(Try again in the notebook; if the same mistake fails again there, the check shows "
                           "how to fix it.)"))
    if failure.random and failure.dims.get(AS_BUILT):  # the module's own initial values, not its weights loaded
        lines.append(_("Your module, built twice, gives two different outputs on this same input, and the "
                       "reference's does not: its initial values are drawn at random. A new module starts "
                       "where the reference starts (a LayerNorm at γ = 1 and β = 0, say): torch.ones and "
                       "torch.zeros, not torch.rand or torch.randn."))
    elif failure.random:
        lines.append(_("Your output changes from one call to the next on this same input, and the reference's "
                       "does not: something random is still on. Dropout, say: the check builds modules in eval "
                       "mode, where `nn.Dropout` does nothing, but `F.dropout(x, p)` drops unless given "
                       "`training=self.training`."))
    if failure.dims.get(TRAINING) and mistake is None and failure.got.error is None:
        lines.append(_("This case runs in training mode and compares the outputs exactly: both sides draw the "
                       "same random numbers, so it expects `nn.Dropout` (or `F.dropout(x, p, "
                       "training=self.training)`) with the rate it is given, at the places the notebook gives, in "
                       "the same order. Dropout at another place, with another rate, missing, or written by hand "
                       "with torch.rand draws other numbers."))
    if failure.got.trace:
        lines += ["", _("Your code raised:"), indent(failure.got.trace)]
    # every size of the input: the ladder's, and those written in capitals that it lacks (H, the heads, where the
    # ladder has none); not the flags, written in lowercase (pre=1), which the case's label names
    sizes = ", ".join(f"{k}={v}" for k, v in failure.dims.items() if k in exercise.ladder_keys or k[:1].isupper())
    floating = any(t.is_floating_point() for t in failure.call.tensors()) or failure.weights
    details = "; ".join([sizes] + ([str(case.dtype)] if floating else [])
                        + ([_("with gradients")] if case.grad else []))
    lines += ["", _("Smallest failing input ({details}):").format(details=details)]
    if hasattr(exercise.adapter, "describe"):  # a module: how it was built
        built = exercise.adapter.describe(exercise.name, failure.dims)
        lines.append(indent(_("built as {module}").format(module=built)))
    if exercise.input_note:
        lines.append(indent(_("({note})").format(note=_(exercise.input_note))))
    lines.append(indent(failure.call.describe(exercise.arg_names)))
    if failure.gradient is not None:
        name = gradient_names(exercise, failure.call, failure.weights)[failure.gradient]
        expected = failure.expected.grads[failure.gradient]
        lines += [_("expected gradient of {name}:").format(name=name), indent(show(expected)),
                  _("your gradient of {name}:").format(name=name), indent(show(failure.got.grads[failure.gradient]))]
    elif failure.got.error is None and not failure.setup:
        names = [_(n) for n in exercise.output_names]
        lines += [_("expected:"), indent(show_named(failure.expected.output, names)),
                  _("got:"), indent(show_named(failure.got.output, names))]
    lines.append(_("(random seed {seed})").format(seed=seed))
    return "\n".join(lines)
