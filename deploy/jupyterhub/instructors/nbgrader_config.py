"""An instructor's nbgrader settings on the course's JupyterHub: the course's own configuration
(its root, gradebook and late policy), so formgrader and ``nbgrader`` run anywhere see the course."""
import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

load_subconfig(os.path.join(os.environ["COURSE_ROOT"], "autograde", "nbgrader_config.py"))  # noqa: F821
