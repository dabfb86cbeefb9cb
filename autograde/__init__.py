"""autograde — the grading code of "Transformer, Piece by Piece".

* `autograde.spec`: what an exercise is; `autograde.checking`: ``check``, the notebooks' entry point;
  `autograde.exercises.<assignment>`: each chapter's exercise specs.
* ``python -m autograde release | grade | bench | audit``: the instructor's pipeline (see ``autograde/README.md``);
  the class report is ``python -m class_report``, the sandbox notebooks run in is `notebook_sandbox`, and a
  class's submissions are read by `intake`.

``from autograde import check`` loads the checks on first use; importing the package itself
loads nothing heavy (``autograde.audit`` and the grading CLI's collection step need no torch).
"""
__all__ = ["check", "CheckFailed"]


def __getattr__(name: str):
    if name in __all__:
        from . import checking

        return getattr(checking, name)
    raise AttributeError(f"module 'autograde' has no attribute {name!r}")
