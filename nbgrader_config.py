"""nbgrader's configuration where nbgrader and formgrader look for it: the course root.

nbgrader reads ``nbgrader_config.py`` in the folder a command or a Jupyter server starts in, and in the
course root. The settings are the course's own, ``autograde/nbgrader_config.py`` (which
``python -m autograde`` reads), loaded here; so ``jupyter lab`` started here shows formgrader with
the course (its Edit and submission links open inside the server), and nbgrader's commands work here as
in ``autograde/``.
"""
import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

COURSE_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autograde", "nbgrader_config.py")
if not os.path.isfile(COURSE_CONFIG):
    raise FileNotFoundError(f"the course's nbgrader settings are missing: {COURSE_CONFIG}")
load_subconfig(COURSE_CONFIG)  # noqa: F821
