"""The course's nbgrader configuration: course root = the folder above this one, source = solutions/.

nbgrader's own commands and formgrader read it through the course root's ``nbgrader_config.py``, which
loads this file (``jupyter lab`` or ``nbgrader export`` started at the course root), or from this folder
(``cd autograde && nbgrader export``); so does ``python -m autograde``. A deployment's settings (course id,
exchange) come from Jupyter's config path (deploy/jupyterhub/). The gradebook is nbgrader's default,
``gradebook.db`` at the course root, unless ``--db URL`` (or ``CourseDirectory.db_url`` here)
names another, e.g. ``postgresql://grader@dbhost/course``.
"""
import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

c.CourseDirectory.root = ROOT
# The exchange files assignments under it, and the gradebook's assignments belong to it (PostgreSQL
# enforces that: nbgrader's default, no id, fails there). A deployment reads it from here.
c.CourseDirectory.course_id = "transformer-piece-by-piece"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# The MyST sources are the notebooks' text form; only the generated .ipynb are released.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.md"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# `nbgrader export` writes its CSV at the course root, wherever it is run: never grades.csv, the grader's own,
# nor a file inside the package
c.ExportPlugin.to = os.path.join(ROOT, "nbgrader-export.csv")

# One feedback page: generate_feedback (after grading by hand in formgrader) writes the page that
# `python -m autograde grade` writes, with the course's exporter and template (autograde/feedback.py,
# autograde/templates/feedback/): scores and comments from the gradebook (CourseGrades: nbgrader's GetGrades,
# marking a score given by hand), math drawn locally, never a hidden test (nbgrader's own page shows them) nor the
# unrun "try it" cells.
c.GenerateFeedback.exporter_class = "autograde.feedback.FeedbackExporter"
c.GenerateFeedback.preprocessors = ["autograde.feedback.CourseGrades"]

# nbgrader's autograde (the command, and formgrader's Autograde button) would run the students' code in an
# ordinary kernel, outside the sandbox: it refuses, saying to use `python -m autograde grade`, which runs
# nbgrader's autograde step itself without the kernel (autograde/autograded.py).
c.Autograde.exporter_class = "autograde.autograded.SandboxOnly"

# Late submissions: a submission's time is its timestamp.txt (nbgrader collect writes it), the due
# date is the assignment's in the gradebook (nbgrader db assignment add ID --duedate=...). With
# "none" a late submission is only marked late; "zero" scores it 0; or name your own
# nbgrader.plugins.LateSubmissionPlugin subclass in c.AssignLatePenalties.plugin_class.
c.LateSubmissionPlugin.penalty_method = "none"
