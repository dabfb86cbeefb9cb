"""notebook_sandbox — where a student's notebook runs while it is graded, and nothing of the grader.

The grader (`autograde`) starts a `container.Sandbox` per slot and a fresh runner per notebook in it; the runner
(`runner`, forked by `zygote`, isolated by `isolation`) runs the cells it is sent and, when asked, builds the
student's object (`building`), calls it (`evaluation`, on `inputs`) and returns the outcome as plain data (`wire`,
over `channel`). This package imports nothing of `autograde`, so the sandbox, which holds it alone of the grading
code, holds no check, catalogue or answer. `evaluation`, `building` and `inputs` also serve the checks in a
student's own kernel. What each part guarantees, and the attack that tests it: autograde/README.md.
"""
