"""class_report — what a class got wrong, on one self-contained HTML page (``python -m class_report``).

It reads what the grader (`autograde`) wrote (grades.csv, checks.csv, the autograded notebooks) and the mistake
catalogues, and writes report.html beside them. Its sections and how to read them: autograde/README.md.
"""
