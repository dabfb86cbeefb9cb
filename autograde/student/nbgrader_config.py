"""nbgrader settings for students: ``python -m autograde release`` puts this file beside each
student notebook (``release/<id>/``, and so in what nbgrader's exchange hands out), where
``nbgrader validate``, run in that folder, finds it. It shows each failed check's message whole
and says that it ran the visible checks only.
"""
from autograde.validation import CourseValidator

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

# The kernel's own log lines (a warning about TCP, an interrupt at shutdown) are noise in a student's terminal.
c.Execute.extra_arguments = ["--IPKernelApp.log_level=CRITICAL"]
# nbgrader's 30 s a cell is less than a check of the capstone's training takes on a busy laptop: the kernel was
# interrupted mid-check
c.Execute.timeout = 300
CourseValidator.install()
