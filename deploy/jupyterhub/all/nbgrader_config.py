"""Everyone's nbgrader settings on the course's JupyterHub: the course and the exchange that
``fetch_assignment``, ``submit``, ``collect``, ``release_feedback`` and ``fetch_feedback`` use.
The hub (jupyterhub_config.py) passes them to each server."""
import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

c.CourseDirectory.course_id = os.environ["NBGRADER_COURSE_ID"]
c.Exchange.root = os.environ["NBGRADER_EXCHANGE"]
