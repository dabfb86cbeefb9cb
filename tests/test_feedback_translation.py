"""What a check says speaks the notebook's language (autograde/messages.py, the ``feedback`` gettext domain).

Every message a student can read from a check (the templates of the checks, every catalogued mistake's name,
hint and fix, every case's label) has a Chinese translation that is complete, not fuzzy, and keeps the
template's placeholders and code; a Chinese notebook's checks name the mistake in Chinese in the student's
kernel, under ``nbgrader validate``, and on the feedback page the grader writes, while the mistake is recorded
by its English name whatever the language.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from babel.messages.pofile import read_po, write_po

from autograde import messages
from autograde.checking import CheckFailed, check
from autograde.spec import _FAILED_BEFORE, get_exercise
from autograde.verdict import FIX_PREFIX, MISTAKE_PREFIX
from autograde.messages import ENVIRONMENT, _, language, notebook_language, speaking

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_CN"
CATALOGUE = ROOT / "locales" / LANGUAGE / "LC_MESSAGES" / f"{messages.DOMAIN}.po"
CHINESE = re.compile(r"[\u4e00-\u9fff]")
FIELD = re.compile(r"\{[^{}]*\}")  # a template's placeholder, with its conversion and format: {seconds:.2f}
CODE = re.compile(r"`[^`]*`")
A = "ch01_attention"
UNSTABLE = "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"
UNSTABLE_NAME = "exp without subtracting the maximum"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"locales_{name}", ROOT / "locales" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def _catalogue(path: Path = CATALOGUE) -> dict:
    with path.open("rb") as file:
        return {m.id: m for m in read_po(file) if m.id}


def _mistake(exercise: str, name: str):
    return next(m for m in get_exercise(exercise).mistakes if m.name == name)


# --------------------------------------------------------------------------- the catalogue

@pytest.fixture(scope="module")
def template():
    return messages.template()


def test_every_message_a_check_can_show_is_translated_keeping_its_placeholders_and_code(template):
    translated = _catalogue()
    extracted = [m.id for m in template if m.id]
    untranslated = [m for m in extracted if m not in translated or not translated[m].string]
    fuzzy = [m for m in extracted if m in translated and translated[m].fuzzy]
    assert not untranslated and not fuzzy, (
        f"{len(untranslated)} untranslated and {len(fuzzy)} fuzzy messages (run `python locales/build.py "
        f"--update-feedback` and translate them): {(untranslated + fuzzy)[:3]}")
    for message in extracted:
        chinese = translated[message].string
        assert sorted(FIELD.findall(chinese)) == sorted(FIELD.findall(message)), (message, chinese)
        assert all(code in chinese for code in CODE.findall(message)), (message, chinese)


def test_the_catalogue_holds_the_templates_and_every_hint_fix_and_name_of_the_catalogues(template):
    ids = {m.id for m in template if m.id}
    assert {FIX_PREFIX, MISTAKE_PREFIX, "Smallest failing input ({details}):"} <= ids
    assert "the {what} has shape {got}, expected {expected}" in ids  # comparison's words
    assert "tensor of shape {shape}, dtype {dtype} (too large to print)" in ids  # display's
    from autograde.exercises import load_all

    for chapter in load_all():
        for exercise in chapter.EXERCISES:
            for mistake in exercise.mistakes:
                assert {mistake.name, mistake.hint} <= ids and (not mistake.fix or mistake.fix in ids), mistake.name
            assert {case.label for case in (*exercise.visible, *exercise.hidden)} <= ids


def test_a_changed_hint_fails_the_coverage_until_its_translation_is_revisited(tmp_path, template, monkeypatch):
    coverage = _load("coverage")
    assert "feedback" in coverage.released()[LANGUAGE]  # make i18n-coverage marks it released
    hint = _mistake("ch01_attention.softmax", UNSTABLE_NAME).hint
    changed = messages.template()
    del changed[hint]
    changed.add(hint.replace("overflows", "runs over"))
    pot = tmp_path / "pot" / "feedback.pot"
    pot.parent.mkdir()
    with pot.open("wb") as file:
        write_po(file, changed, no_location=True)
    found = {c.page: c for c in coverage.coverage_after_update(pot.parent, coverage.LOCALES, LANGUAGE, tmp_path / "new")}
    assert (found["feedback"].fuzzy, found["feedback"].untranslated) == (1, 0)
    assert _catalogue()[hint].string, "the check must not touch the catalogue"


# --------------------------------------------------------------------------- choosing the language

def test_the_language_is_the_environment_s_unless_something_speaks_for_the_notebook(monkeypatch):
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    assert language() == "en" and _(FIX_PREFIX) == FIX_PREFIX
    monkeypatch.setenv(ENVIRONMENT, "zh-CN")
    assert language() == LANGUAGE and CHINESE.search(_(FIX_PREFIX))
    with speaking("en"):  # the grader speaks the submitted notebook's language, whatever its own environment
        assert _(FIX_PREFIX) == FIX_PREFIX
    monkeypatch.setenv(ENVIRONMENT, "tlh")  # a language without a catalogue is English
    assert language() == "en"
    assert _("a message nobody catalogued") == "a message nobody catalogued"


@pytest.mark.parametrize(("metadata", "expected"), [
    ({"autograde": {"language": LANGUAGE}}, LANGUAGE), ({}, "en"), ({"autograde": {"language": "../../etc"}}, "en"),
    ({"autograde": "zh_CN"}, "en"), ({"autograde": {"language": ["zh_CN"]}}, "en")])
def test_a_notebook_s_metadata_picks_among_the_catalogues_only(metadata, expected):
    assert notebook_language({"metadata": metadata, "cells": []}) == expected
    assert notebook_language(None) == notebook_language({"metadata": "junk"}) == "en"


def test_a_released_notebook_is_marked_in_its_metadata_and_its_setup_cell(monkeypatch):
    setup = nbformat.v4.new_code_cell("import torch", metadata={"nbgrader": {
        "grade": False, "grade_id": "setup", "locked": True, "solution": False, "schema_version": 3, "checksum": "x"}})
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 标题"), setup])
    messages.mark_notebook(notebook, LANGUAGE)
    assert notebook_language(notebook) == LANGUAGE
    assert setup.source.startswith("import torch\nimport os\n") and setup.metadata.nbgrader.checksum != "x"
    assert messages.mark_notebook(notebook, LANGUAGE).cells[1].source == setup.source  # idempotent
    monkeypatch.setenv(ENVIRONMENT, "en")  # restored after the test, whatever the setup cell sets
    exec(setup.source.replace("import torch\n", ""), {})  # what the student's kernel runs first
    assert language() == LANGUAGE


# --------------------------------------------------------------------------- the student's kernel

def test_a_chinese_kernel_names_the_mistake_in_chinese_and_shows_its_fix_the_second_time(monkeypatch):
    monkeypatch.setenv(ENVIRONMENT, LANGUAGE)
    mistake = _mistake("ch01_attention.softmax", UNSTABLE_NAME)
    namespace = {"torch": torch}
    exec(UNSTABLE, namespace)
    _FAILED_BEFORE.discard(("softmax", UNSTABLE_NAME))
    with pytest.raises(CheckFailed) as first:
        check("ch01_attention.softmax", namespace["softmax"], hidden=True)
    with speaking(LANGUAGE):
        prefix, name, hint, fix_prefix, fix = map(_, (MISTAKE_PREFIX, mistake.name, mistake.hint, FIX_PREFIX, mistake.fix))
    said = str(first.value)
    assert CHINESE.search(name) and CHINESE.search(hint)
    assert f"{prefix}{name}：{hint}" in said and "可能的错误" in said and "出错的最小输入" in said
    assert "Likely mistake" not in said and fix_prefix not in said and "期望：" in said
    # the second failure of the same mistake shows how to fix it: keyed by the mistake's English name
    assert ("softmax", UNSTABLE_NAME) in _FAILED_BEFORE
    with pytest.raises(CheckFailed) as second:
        check("ch01_attention.softmax", namespace["softmax"], hidden=True)
    assert f"{fix_prefix}{fix}" in str(second.value) and "How to fix it" not in str(second.value)


def test_a_chinese_report_keeps_the_english_name_of_the_mistake():
    namespace = {"torch": torch}
    exec(UNSTABLE, namespace)
    exercise = get_exercise("ch01_attention.softmax")
    with speaking(LANGUAGE):
        chinese = exercise.run(namespace["softmax"], hidden=True, seed=3)
    english = exercise.run(namespace["softmax"], hidden=True, seed=3)
    assert chinese.mistake == english.mistake == UNSTABLE_NAME  # what the gradebook and the class report record
    assert CHINESE.search(chinese.message) and not CHINESE.search(english.message)
    assert chinese.message.count("\n") == english.message.count("\n")  # the same message, line for line


def test_the_passed_line_and_a_shape_message_speak_chinese(capsys):
    exercise = get_exercise("ch01_attention.softmax")
    with speaking(LANGUAGE):
        passed = exercise.check(exercise.reference)
        wrong_shape = exercise.run(lambda x, dim=-1: x.sum(dim=dim), seed=1)
    assert passed.passed and "项可见检查全部通过" in capsys.readouterr().out
    assert not wrong_shape.passed
    assert "的形状是" in wrong_shape.message and "应为" in wrong_shape.message


# --------------------------------------------------------------------------- nbgrader validate and grading

def _chinese_with(root: Path, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The Chinese notebook with the instructor's solutions, or ``answers[grade_id]`` where given."""
    from autograde.classroom import solved_notebook
    from editions.assignments import translated_notebook

    solved = {c.metadata.nbgrader.grade_id: c.source for c in solved_notebook(A, answers, root).cells
              if c.metadata.get("nbgrader", {}).get("solution")}
    notebook = nbformat.read(translated_notebook(A, LANGUAGE, root), 4)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = solved[cell.metadata.nbgrader.grade_id]
    return notebook


@pytest.fixture(scope="module")
def course(tmp_path_factory, released_course):
    return released_course(tmp_path_factory.mktemp("course") / "course", [A], chinese=True)


@pytest.mark.slow
def test_nbgrader_validate_of_a_chinese_notebook_speaks_chinese(course, monkeypatch):
    from student_validation import validate

    from editions.assignments import translated_notebook

    monkeypatch.delenv(ENVIRONMENT, raising=False)  # the notebook's own setup cell sets it
    folder = translated_notebook(A, LANGUAGE, course).parent
    nbformat.write(_chinese_with(course, {"softmax": UNSTABLE}), folder / "unstable.ipynb")
    out = validate(folder, "unstable.ipynb")
    with speaking(LANGUAGE):
        name = _(UNSTABLE_NAME)
    assert f"可能的错误——{name}" in out and "个单元格的可见检查未通过" in out and "下面这个单元格未通过" in out, out[-3000:]
    assert "Likely mistake" not in out and "VISIBLE CHECKS FAILED" not in out


@pytest.mark.slow
def test_grading_a_chinese_notebook_writes_its_feedback_in_chinese(course, tmp_path):
    from autograde.classroom import solved_notebook, write_submission
    from autograde.feedback import feedback_path
    from autograde.grade import grade

    subs = tmp_path / "submitted"
    write_submission(subs, "zh_student", A, _chinese_with(course, {"softmax": UNSTABLE}))
    write_submission(subs, "en_student", A, solved_notebook(A, {"softmax": UNSTABLE}, course))
    rows = {r["student_id"]: r for r in grade(subs, tmp_path / "graded", jobs=1, root=course, progress=False)}
    chinese = feedback_path(tmp_path / "graded", "zh_student", A).read_text(encoding="utf-8")
    english = feedback_path(tmp_path / "graded", "en_student", A).read_text(encoding="utf-8")
    with speaking(LANGUAGE):
        name, hint = _(UNSTABLE_NAME), _(_mistake("ch01_attention.softmax", UNSTABLE_NAME).hint)
    assert f"可能的错误——{name}" in chinese and hint.split("（")[0] in chinese and "出错的最小输入" in chinese
    assert "Likely mistake" not in chinese and f"Likely mistake — {UNSTABLE_NAME}" in english
    assert "第 1 章练习" in chinese and "<html lang=\"zh-CN\"" in chinese  # the page's own words and the prose
    assert "改正方法" in chinese  # the fold's label
    for row in rows.values():  # recorded by the English name, whatever the language
        assert UNSTABLE_NAME in {c["mistake"] for c in row["checks"]}
