"""The course in every language: where its exercises are, and their prose translated with the locales' catalogues.

Below both the book's build and the grader, which share it; it imports neither.
"""
