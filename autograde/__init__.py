"""autograde — the grading code of "Transformer, Piece by Piece".

* `autograde.checking`: the check framework (exercises, mistake catalogues, `check`);
  `autograde.exercises.<assignment>`: each chapter's exercise specs.
* ``python -m autograde release | grade | bench | audit``: the instructor's pipeline
  (see ``autograde/README.md``).

Importing the package loads every chapter's specs and then records the protected namespaces
(`autograde.checking.SNAPSHOT`), before any student code can run in the process.
"""
from . import exercises
from .checking import SNAPSHOT, CheckFailed, check

__all__ = ["check", "CheckFailed"]

exercises.load_all()
SNAPSHOT.take()
