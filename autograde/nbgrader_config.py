"""nbgrader configuration: course root = the repository root, source = solutions/.

Used by ``python -m autograde`` and by nbgrader's own commands run from this folder
(``cd autograde && nbgrader generate_assignment ch01_attention --force``; run
``python -m autograde release`` first, which writes the .ipynb that nbgrader reads).
"""
import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(ROOT, "gradebook.db")
# The MyST sources are the notebooks' text form; only the generated .ipynb are released.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.md"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.Execute.timeout = 60
