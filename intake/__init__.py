"""intake — a class's submissions, as the grader reads them: who handed in what, and when.

`collection` reads nbgrader's folders, a class zip or an LMS's download (`lms`: Canvas, Moodle, Blackboard) into
one submission per student and assignment, each student held to a budget and every link or member that leaves
its folder refused; `submission_times` says when each was handed in, from the instructor's record
(``--submitted-at``) rather than the student's own files. What a bad folder costs is that student's row, flagged.
Guarantees and their attacks: autograde/README.md ("Collection", "Student ids", "Submission times").
"""
