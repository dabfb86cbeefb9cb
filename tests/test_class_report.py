"""The class report (`class_report.report`, ``python -m class_report``): counts, hints and rows from grades.csv and
checks.csv as `grade` writes them (a fixture, fast; and one real graded class, slow), one self-contained page in
English and in Chinese, clear errors on bad input, and the page in a browser (light, dark, phone width)."""
from __future__ import annotations

import csv
import html
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
from babel.messages.extract import extract_from_file
from babel.messages.pofile import read_po
from nbformat.v4 import new_code_cell, new_notebook, new_output

from class_report.__main__ import main
from autograde.spec import get_exercise
from editions.assignments import ROOT
from autograde.messages import translations
from autograde.records import CHECK_COLUMNS, CSV_COLUMNS, _cell, unescaped
from class_report.report import CATALOGUE, STUB_MESSAGE, ReportError, languages, write_report
from site_browser import browser, theme, viewport  # noqa: F401 (fixtures)

A, M = "ch01_attention", "ch03_masking"
UNSTABLE, UPPER = "exp without subtracting the maximum", "upper instead of lower triangle"
DROPPED = "a mistake the catalogue no longer has"  # graded by an older catalogue: no hint, no translation
HOSTILE = "<img src=x onerror=alert(1)>"  # a folder name: any characters but '/'
PO = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{CATALOGUE}.po"


def _hint(exercise: str, name: str) -> str:
    return next(m.hint for m in get_exercise(exercise).mistakes if m.name == name)


def _checks(student: str, assignment: str, outcomes: dict[str, tuple]) -> list[dict]:
    """``outcomes``: exercise → (visible passed, hidden passed[, mistake[, delegated]]), as grade writes them."""
    rows = []
    for exercise, (visible, hidden, *rest) in outcomes.items():
        mistake, delegated = (rest + ["", ""])[:2]
        for is_hidden, passed in ((0, visible), (1, hidden)):
            cell = f"{exercise}_{'hidden' if is_hidden else 'visible'}"
            rows.append({"student_id": student, "assignment": assignment, "cell": cell,
                         "exercise": f"{assignment}.{exercise}", "hidden": is_hidden, "passed": int(passed),
                         "mistake": "" if passed else mistake, "delegated": delegated})
    return rows


ALL_PASS = {"softmax": (1, 1), "attention": (1, 1), "masked_attention": (1, 1)}
GRADES = [  # student_id, assignment, score, flags (as grade writes them: sorted, joined with ';')
    ("ana", A, 10, "no-timestamp"),
    ("ana", M, 10, "no-timestamp"),
    ("ben", A, 2, "no-timestamp"),
    ("ben", M, 6, "no-timestamp"),
    ("hal", M, 5, "no-timestamp;similar-to:kim@uni.edu@causal_mask"),  # the grader names the cell after an @
    ("kim@uni.edu", M, 5, "lms-late;similar-to:hal@causal_mask"),  # an id may hold @ too
    ("cy", A, 2, "no-timestamp"),
    ("dee", A, 7, "late;time-unverified"),
    ("eve", A, 10, "forbidden-call;no-timestamp;similar-to:ana;similar-to:tfm_ref.attention.softmax"),
    ("gus", A, 0, "no-timestamp"),
    ("'=1+1", A, 10, "no-timestamp;unexportable-student-id"),  # grade writes "=1+1" behind a quote
    (HOSTILE, A, 0, "missing-notebook;no-timestamp"),
]
CHECKS = [
    *_checks("ana", A, ALL_PASS),
    *_checks("ana", M, {"causal_mask": (1, 1), "padding_mask": (1, 1)}),
    *_checks("ben", A, {"softmax": (0, 0, UNSTABLE), "attention": (1, 0), "masked_attention": (1, 1)}),
    *_checks("ben", M, {"causal_mask": (0, 0, UPPER), "padding_mask": (1, 1)}),
    *_checks("hal", M, {"causal_mask": (0, 0, DROPPED), "padding_mask": (1, 1)}),
    *_checks("kim@uni.edu", M, {"causal_mask": (0, 0, DROPPED), "padding_mask": (1, 1)}),
    *_checks("cy", A, {"softmax": (0, 0, UNSTABLE), "attention": (1, 0), "masked_attention": (1, 1)}),
    *_checks("dee", A, {"softmax": (1, 0), "attention": (1, 0), "masked_attention": (1, 1)}),
    *_checks("eve", A, {"softmax": (1, 1, "", "softmax;_softmax"), "attention": (1, 1), "masked_attention": (1, 1)}),
    *_checks("gus", A, {"softmax": (0, 0), "attention": (0, 0), "masked_attention": (0, 0)}),
    *_checks("'=1+1", A, ALL_PASS),
]


def _stub_notebook(exercises: list[str]) -> nbformat.NotebookNode:
    """An autograded notebook whose every test cell failed on the released stub."""
    cells = []
    for exercise in exercises:
        for part in ("visible", "hidden"):
            message = f"✗ {exercise}: {STUB_MESSAGE}. Delete the line `raise NotImplementedError()`."
            cell = new_code_cell("", outputs=[new_output("error", ename="CheckFailed", evalue=message,
                                                         traceback=[message])])
            cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"{exercise}_{part}", "points": 1}
            cells.append(cell)
    return new_notebook(cells=cells)


def write_results(out: Path) -> Path:
    """OUT as `grade` leaves it, for the rows above: the two CSVs, some feedback pages and autograded notebooks."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "grades.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, CSV_COLUMNS)
        writer.writeheader()
        for student, assignment, score, flags in GRADES:
            writer.writerow({"student_id": student, "assignment": assignment, "notebook": assignment, "score": score,
                             "max_score": 10.0, "flags": flags, "cells": ""})
    with (out / "checks.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, CHECK_COLUMNS)
        writer.writeheader()
        writer.writerows(CHECKS)
    for student in ("ben", "dee", "eve"):
        page = out / "feedback" / student / A / f"{A}.html"
        page.parent.mkdir(parents=True)
        page.write_text("<p>feedback</p>", encoding="utf-8")
    (out / "autograded" / "ana" / A).mkdir(parents=True)
    nbformat.write(new_notebook(), out / "autograded" / "ana" / A / f"{A}.ipynb")
    (out / "autograded" / "dee" / A).mkdir(parents=True)
    (out / "autograded" / "dee" / A / "timestamp.txt").write_text("2026-12-02 09:00:00 UTC")
    (out / "autograded" / "gus" / A).mkdir(parents=True)
    nbformat.write(_stub_notebook(["softmax", "attention", "masked_attention"]),
                   out / "autograded" / "gus" / A / f"{A}.ipynb")
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return write_results(tmp_path_factory.mktemp("report") / "out")


@pytest.fixture(scope="module")
def pages(results) -> dict[str, Path]:
    return {language: write_report(results, results / f"report-{language}.html", language)
            for language in ("en", "zh_CN")}


def _section(page: str, anchor: str) -> str:
    return page.split(f'<section id="{anchor}">', 1)[1].split("</section>", 1)[0]


def _rows(section: str) -> list[str]:
    return re.findall(r"<tr>(.*?)</tr>", section, re.S)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment.replace("<wbr>", "")))


def test_the_most_frequent_mistakes_are_counted_by_student_with_the_hint_they_saw(pages):
    page = pages["en"].read_text(encoding="utf-8")
    mistakes = _rows(_section(page, "mistakes"))[1:]
    first = _text(mistakes[0])
    assert UNSTABLE in first and f"{A}.softmax" in first and re.match(r"\s*2\s+of 8", first)
    assert html.escape(_hint(f"{A}.softmax", UNSTABLE), quote=True) in mistakes[0]
    assert "ben" in first and "cy" in first
    upper = next(r for r in mistakes if UPPER in r)
    assert re.match(r"\s*1\s+of 4", _text(upper))  # ch03: four notebooks
    assert html.escape(_hint(f"{M}.causal_mask", UPPER), quote=True) in upper
    dropped = next(r for r in mistakes if DROPPED in r)
    assert "This mistake is no longer in the catalogue." in dropped and re.match(r"\s*2\s+of 4", _text(dropped))
    assert len(mistakes) == 3
    # the scores' table: per assignment, from grades.csv
    scores = [_text(r).split() for r in _rows(_section(page, "scores"))[1:]]
    assert scores[0] == [A, "8", "10", "5.1", "4.5", "0–10", "3", "2"]
    assert scores[1] == [M, "4", "10", "6.5", "5.5", "5–10", "1", "0"]


def test_exercises_show_pass_rates_and_where_the_catalogue_should_grow(pages):
    page = pages["en"].read_text(encoding="utf-8")
    exercises = {_text(r).split()[0]: _text(r).split() for r in _rows(_section(page, "exercises")) if "<td" in r}
    # softmax, checked in 7 notebooks (the missing one has no checks): visible passed 4 (ben, cy and gus failed), hidden
    # 3 (dee too); named: 2 students, no name: 1 (dee), not written: 1 (gus)
    assert exercises["softmax"] == ["softmax", "4", "/", "7", "(57", "%)", "3", "/", "7", "(43", "%)", "2", "1", "1"]
    grow = _rows(_section(page, "unnamed"))[1:]
    assert len(grow) == 1  # softmax: 2 named against 1 unnamed is not "most"
    attention = _text(grow[0]).split()
    # attention: ben, cy and dee failed its hidden check with no name, each of them failed softmax, which it calls
    assert attention == [f"{A}.attention", "3", "3", "0", "softmax", ":", "3", "1", "ben", ",", "cy", ",", "dee"]
    assert "gus" not in grow[0]  # still the stub: did not try (the 1 not written)


def _exercise_table(page: str, assignment: str) -> dict[str, dict[str, str]]:
    """An assignment's table in the Exercises section: exercise → column's label → the cell's text."""
    part = _section(page, "exercises").split(f"<h3><code>{assignment}</code></h3>", 1)[1].split("<h3>", 1)[0]
    head, *rows = _rows(part)
    labels = [_text(h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)]
    cells = [[_text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]
    return {row[0]: dict(zip(labels, row)) for row in cells}


@pytest.mark.parametrize("stopped", [None, {"softmax": "0", "attention": "1"}], ids=["older", "per-check"])
def test_a_check_counts_as_stopped_by_its_own_record_or_by_its_rows_flags_in_an_older_checks_csv(tmp_path, stopped):
    """ivy failed softmax with no name, then timed out in attention's cells. A checks.csv with the column ``stopped``
    says which failures the stop explains; one written before it had the column says only that the notebook timed out,
    and every unnamed failure of ivy's counts as stopped, as it did then."""
    out = write_results(tmp_path / "out")
    with (out / "grades.csv").open("a", newline="", encoding="utf-8") as f:
        csv.DictWriter(f, CSV_COLUMNS).writerow({"student_id": "ivy", "assignment": A, "notebook": A, "score": 3,
                                                 "max_score": 10.0, "flags": "no-timestamp;timeout", "cells": ""})
    ivy = [{**c, "stopped": (stopped or {}).get(c["exercise"].split(".")[1], "0")}
           for c in _checks("ivy", A, {"softmax": (0, 0), "attention": (0, 0), "masked_attention": (1, 1)})]
    columns = CHECK_COLUMNS if stopped else [c for c in CHECK_COLUMNS if c != "stopped"]
    with (out / "checks.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")  # the fixture's rows: "" (before the column)
        writer.writeheader()
        writer.writerows([*CHECKS, *ivy])
    timed_out = new_output("error", ename="Timeout", evalue="this cell ran past 30 s", traceback=[])
    ivys = out / "autograded" / "ivy" / A / f"{A}.ipynb"  # it stopped in a cell of the student's own
    ivys.parent.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[new_code_cell("import torch"), new_code_cell("x = 1", outputs=[timed_out])]),
                   ivys)
    page = write_report(out).read_text(encoding="utf-8")
    table = _exercise_table(page, A)
    softmax, attention = table["softmax"], table["attention"]
    flagged = {_text(r).split()[0]: " ".join(_text(r).split()) for r in _rows(_section(page, "flagged"))[1:]}
    assert "timeout stopped in cell 2" in flagged["ivy"]
    zh = write_report(out, out / "zh.html", "zh_CN").read_text(encoding="utf-8")
    assert "停在 第 2 个单元格" in " ".join(_text(_section(zh, "flagged")).split())
    if stopped is None:
        assert (softmax["no name"], softmax["stopped"]) == ("1", "1")  # dee; ivy, whose notebook timed out
    else:
        assert (softmax["no name"], softmax["stopped"]) == ("2", "0")  # dee and ivy: ivy's answer, before the stop
    assert (attention["no name"], attention["stopped"]) == ("3", "1")  # ben, cy and dee; ivy


def test_flagged_late_and_delegated_rows_are_listed_with_links_to_what_exists(pages, results):
    page = pages["en"].read_text(encoding="utf-8")
    flagged = _section(page, "flagged")
    rows = {_text(r).split()[0]: r for r in _rows(flagged) if "<td" in r and "/ 10" in r}
    assert set(rows) == {"eve", "=1+1", HOSTILE.split()[0], "hal", "kim@uni.edu"}
    assert "forbidden-call" in rows["eve"] and "similar-to:tfm_ref.attention.softmax" in _text(rows["eve"])
    # similar-to:ana names ana, linked to ana's notebook as it ran; eve's own feedback page is linked
    assert f'href="autograded/ana/{A}/{A}.ipynb"' in rows["eve"] and f'href="feedback/eve/{A}/{A}.html"' in rows["eve"]
    assert "unexportable-student-id" in rows["=1+1"] and "none written" in rows["=1+1"]
    # similar-to:<student>@<cell>: the student and the cell, whatever @ the student's id holds
    assert "similar-to kim@uni.edu (cells causal_mask )" in " ".join(_text(rows["hal"]).split())
    assert "similar-to hal (cells causal_mask )" in " ".join(_text(rows["kim@uni.edu"]).split())
    legend = _text(flagged.split("</table>")[0])
    assert "forbidden-call" in legend and "get the file again" in legend and "no-timestamp" not in legend
    late = _section(page, "late")
    late_rows = _rows(late.split("<h3>Late</h3>")[1].split("<details")[0])[1:]
    assert len(late_rows) == 2 and "dee" in late_rows[0] and "time-unverified" in late_rows[0]
    assert "kim@uni.edu" in late_rows[1] and "lms-late" in late_rows[1]  # Canvas said late, with no time
    assert "2026-12-02 09:00:00 UTC" in late_rows[0] and f'href="feedback/dee/{A}/{A}.html"' in late_rows[0]
    assert "<details open><summary>10 rows on time, but by a time that is not the instructor" in late
    delegations = _rows(_section(page, "delegations"))[1:]
    assert len(delegations) == 1 and "eve" in delegations[0]
    assert "<code>softmax</code>, <code>_softmax</code>" in delegations[0]
    assert f'href="feedback/eve/{A}/{A}.html#cell-softmax_visible"' in delegations[0]
    for link in re.findall(r'href="([^"#]+)', page):
        if not link.startswith("#"):
            assert (results / unquote(html.unescape(link))).exists(), link


def test_the_page_is_self_contained_and_escapes_what_students_named(pages):
    for path in pages.values():
        page = path.read_text(encoding="utf-8")
        assert not re.search(r"https?:|//[a-z]", page, re.I), "nothing fetched, no other host"
        assert not any(tag in page for tag in ("<script", "<link", "<img", "<iframe", "@import", "url(http"))
        assert page.count("<svg") >= 3  # the scores and each assignment's exercises
        assert HOSTILE not in page and html.escape(HOSTILE) in page
        ids = re.findall(r'\bid="([^"]+)"', page)
        assert len(ids) == len(set(ids)), "ids are unique across the inline SVGs"


class _Words(HTMLParser):
    """The words a reader reads: not code, ids, flags, plots or text marked English (``lang="en"``)."""

    SKIP = {"code", "svg", "style", "title"}  # and a mistake's cell: the checks' catalogue's words (feedback.po)

    def __init__(self):
        super().__init__()
        self.stack: list[bool] = []
        self.words: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        skip = tag in self.SKIP or attrs.get("lang") == "en" or attrs.get("class") in ("id", "flag", "mistake")
        if tag not in ("br", "wbr", "meta", "img"):
            self.stack.append(skip or bool(self.stack and self.stack[-1]))

    def handle_endtag(self, tag):
        if tag not in ("br", "wbr", "meta", "img") and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not (self.stack and self.stack[-1]):
            self.words += re.findall(r"[A-Za-z][A-Za-z'’]+", data)


def test_the_chinese_page_is_chinese_where_an_instructor_reads_and_says_what_stays_english(pages):
    page = pages["zh_CN"].read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page and "<h1>班级报告</h1>" in page
    for title in ("得分", "练习", "最常见的错误", "错误目录需要补充之处", "需要复核的标记行", "迟交与未经核实的提交时间",
                  "调用禁用函数"):
        assert f"<h2>{title}</h2>" in page
    # a mistake, its hint and its fix as the checks say them in Chinese (feedback.po); one it lacks, in English
    checks_words = translations("zh_CN")
    mistake = next(m for m in get_exercise(f"{A}.softmax").mistakes if m.name == UNSTABLE)
    for text in (mistake.name, mistake.hint, mistake.fix):
        assert html.escape(checks_words[text]) in page
    assert f'<span lang="en">{DROPPED}</span>' in page and "它们以英文显示" in page
    words = _Words()
    words.feed(page)
    # what may stay: names of files, programs, options, the time zone, and the catalogue's folder
    allowed = {"UTC", "PyTorch", "ID", "nbgrader", "autograde", "formgrader", "exercises", "tfm_ref", "TIMES", "csv",
               "tmp", "out", "grades", "checks", "report", "submitted", "at", "forbidden", "call", "grader", "errors",
               "log", "timestamp", "txt", "max", "submission", "mb", "cell", "timeout", "memory", "README", "md",
               "tfm", "ref", "feedback", "po", "Canvas"}
    english = sorted({w for w in words.words if w not in allowed})
    assert not english, f"English words on the Chinese page: {english}"


def test_the_chinese_catalogue_translates_every_word_of_the_page():
    wanted = {m for _line, m, _comments, _context in extract_from_file("python", ROOT / "class_report" / "report.py")}
    wanted = {m if isinstance(m, str) else m[0] for m in wanted}
    with PO.open("rb") as f:
        catalogue = read_po(f)
    have = {m.id if isinstance(m.id, str) else m.id[0]: m for m in catalogue if m.id}
    assert not wanted - set(have), f"{PO.name} lacks (add them, translated): {sorted(wanted - set(have))}"
    assert not [m for m in wanted if not have[m].string or have[m].fuzzy], "untranslated or fuzzy messages"
    assert not set(have) - wanted, f"{PO.name} holds messages the page no longer has: {sorted(set(have) - wanted)}"
    assert "zh_CN" in languages()


@pytest.mark.parametrize("problem, files, message", [
    ("no grades", {}, "no grades.csv in {out}: run `python -m autograde grade SUBMISSIONS --out {out}` first"),
    ("a column missing", {"grades.csv": "student_id,assignment,score\n"}, "{out}/grades.csv lacks the column(s) "
     "max_score, flags: is it the grades.csv that `python -m autograde grade` writes?"),
    ("not a number", {"grades.csv": "student_id,assignment,notebook,score,max_score,flags\nana,a,a,ten,10,\n"},
     "{out}/grades.csv line 2: score 'ten' is not a number of points"),
    ("empty", {"grades.csv": "student_id,assignment,notebook,score,max_score,flags\n"},
     "{out}/grades.csv has no rows: nothing was graded"),
    ("no checks", {"grades.csv": "student_id,assignment,notebook,score,max_score,flags\nana,a,a,1,10,\n"},
     "no checks.csv in {out} beside grades.csv: grade again"),
    ("another run", {"grades.csv": "student_id,assignment,notebook,score,max_score,flags\nana,a,a,1,10,\n",
                     "checks.csv": ",".join(CHECK_COLUMNS) + "\nbob,a,c,a.x,0,1,,\n"},
     "{out}/checks.csv line 2: bob/a has no row in grades.csv: the two files are not from the same grading run"),
    ("not text", {"grades.csv": b"\xff\xfe\x00binary"}, "{out}/grades.csv is not UTF-8 text"),
])
def test_bad_input_is_one_line_that_names_the_problem(tmp_path, capsys, problem, files, message):
    out = tmp_path / "out"
    out.mkdir()
    for name, content in files.items():
        (out / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SystemExit) as exit_:
        main([str(out)])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("python -m class_report: error: ") and error.count("\n") == 1
    assert message.format(out=out) in error
    assert not (out / "report.html").exists()


def test_an_unknown_language_is_refused_naming_those_there_are(results, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(results), "--lang", "fr"])
    assert exit_.value.code == 2 and "choose one of en, zh_CN" in capsys.readouterr().err


def test_the_command_writes_the_page_in_out_or_where_asked_with_links_that_still_lead_there(results, tmp_path, capsys):
    assert main([str(results)]) == 0
    assert f"class report → {results / 'report.html'}" in capsys.readouterr().out
    elsewhere = tmp_path / "elsewhere" / "class.html"
    assert main([str(results), "--out", str(elsewhere), "--lang", "zh_CN"]) == 0
    page = elsewhere.read_text(encoding="utf-8")
    links = [html.unescape(link) for link in re.findall(r'href="([^"#]+)', page)]
    assert links and all((elsewhere.parent / unquote(link)).exists() for link in links)
    with pytest.raises(ReportError, match="cannot write the report"):
        write_report(results, results / "grades.csv" / "report.html")


def test_a_value_grade_wrote_as_text_for_spreadsheets_is_read_back_as_it_was():
    from autograde.exercises import load_all

    names = [m.name for module in load_all() for e in module.EXERCISES for m in e.mistakes]
    assert all(unescaped(_cell(name)) == name for name in names)
    assert unescaped(_cell("=1+1;-x,@y")) == "=1+1;-x,@y"


# ---------------------------------------------------------------------------------------------- in a browser

@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "zh_CN"])
@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_it_reads_well_in_a_browser(browser, pages, language, mode, width):  # noqa: F811
    browser.get_log("browser")  # what earlier pages left
    with viewport(browser, width), theme(browser, mode):
        browser.get(pages[language].as_uri())
        plots = browser.execute_script(
            "return [...document.querySelectorAll('svg.plot')].map(s => s.getBoundingClientRect().width)")
        assert len(plots) == 3 and all(w > 250 for w in plots), plots  # drawn, and wide enough to read on a phone
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
        colours = browser.execute_script(
            "const s = getComputedStyle(document.body); return [s.color, s.backgroundColor];")
        assert colours[0] != colours[1] and (colours[1] == "rgb(13, 17, 23)") == (mode == "dark")
        # the plots' text takes the page's colour: readable on either background
        tick = browser.execute_script("return getComputedStyle(document.querySelector('svg.plot text')).fill")
        assert tick == colours[0]
        assert browser.execute_script("return document.querySelector('#mistakes td.mistake').offsetHeight") > 0
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": min(height, 8000), "deviceScaleFactor": 1,
                                 "mobile": width < 576})
        assert browser.save_screenshot(f"/tmp/report-{language}-{mode}-{width}.png")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


# ---------------------------------------------------------------------------------------- a real graded class

STOPPING = {  # ch03_masking's answers of two students whose notebooks stop
    # padding_mask wrong in a way the catalogue does not name, then a shift_right that never returns: its checks hang
    "wil": {"padding_mask": "def padding_mask(lengths, max_len):\n"
                            "    return torch.ones(len(lengths), max_len, dtype=torch.bool)",
            "shift_right": "def shift_right(targets, bos_id):\n    while True:\n        pass"},
    # attention_mask's cell never finishes: the notebook goes on without it, and its checks find no function
    "hex": {"attention_mask": "def attention_mask(lengths, max_len, causal=True):\n    return None\n\n"
                              "while True:\n    pass"},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, released_course):
    """A real grading run: two chapters, a solved, a broken, an unwritten, a delegating and a late notebook; then a
    second run into the same OUT, with a short cell timeout, of two notebooks that stop (`STOPPING`)."""
    from autograde.classroom import solved_notebook, untouched_notebook, write_submission
    from autograde.grade import grade
    from notebook_sandbox.container import Limits

    tmp = tmp_path_factory.mktemp("graded")
    course = released_course(tmp / "course", [A, M], due=[A])
    subs = tmp / "submitted"
    unstable = {"softmax": "def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim=dim, keepdim=True)"}
    upper = {"causal_mask": "def causal_mask(n_q, n_k=None, device=None):\n    n_k = n_q if n_k is None else n_k\n"
                            "    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu(n_k - n_q)"}
    write_submission(subs, "ana", A, solved_notebook(A, root=course))
    write_submission(subs, "ana", M, solved_notebook(M, root=course))
    write_submission(subs, "cho", A, solved_notebook(A, unstable, course))
    write_submission(subs, "dev", A, solved_notebook(A, unstable, course))
    write_submission(subs, "cho", M, solved_notebook(M, upper, course))
    write_submission(subs, "gus", M, untouched_notebook(M, course))
    write_submission(subs, "fay", A, solved_notebook(
        A, {"softmax": "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)"}, course))
    late = write_submission(subs, "lu", A, solved_notebook(A, root=course))
    (late.parent / "timestamp.txt").write_text("2026-11-25 00:00:00 UTC")
    out = tmp / "out"
    grade(subs, out, jobs=2, root=course, progress=False)
    stopping = tmp / "stopping"
    for student, answers in STOPPING.items():
        write_submission(stopping, student, M, solved_notebook(M, answers, course))
    grade(stopping, out, jobs=2, root=course, progress=False, limits=Limits(cell_timeout=8))
    return out


@pytest.mark.slow
def test_a_real_graded_class_reports_what_its_checks_found(graded):
    page = write_report(graded).read_text(encoding="utf-8")
    with (graded / "checks.csv").open(encoding="utf-8") as f:
        checks = list(csv.DictReader(f))
    named = {(c["exercise"], c["mistake"]): set() for c in checks if c["mistake"]}
    for c in checks:
        if c["mistake"]:
            named[(c["exercise"], c["mistake"])].add(c["student_id"])
    rows = _rows(_section(page, "mistakes"))[1:]
    assert len(rows) == len(named)
    for (exercise, mistake), students in named.items():
        row = next(r for r in rows if html.escape(mistake) in r and exercise.split(".")[1] in r)
        assert re.match(rf"\s*{len(students)}\s+of", _text(row)), (mistake, _text(row))
        assert html.escape(_hint(exercise, mistake), quote=True) in row
    assert (f"{A}.softmax", UNSTABLE) in named and named[(f"{A}.softmax", UNSTABLE)] == {"cho", "dev"}
    assert (f"{M}.causal_mask", UPPER) in named
    # gus handed the stubs back: counted as not written, not as failures the catalogue should name
    assert "gus" not in _section(page, "unnamed")
    assert _exercise_table(page, M)["causal_mask"]["not written"] == "1"
    late = _section(page, "late").split("<h3>Late</h3>")[1].split("<details")[0]
    assert "lu" in _text(late) and "time-unverified" in late and "2026-11-25 00:00:00 UTC" in late
    delegations = _section(page, "delegations")
    assert "fay" in delegations and "softmax" in delegations
    assert "forbidden-call" in _section(page, "flagged")
    for link in re.findall(r'href="([^"#]+)', page):
        assert (graded / unquote(html.unescape(link))).is_file(), link
    assert not re.search(r"https?:", page)
    zh = write_report(graded, graded / "zh.html", "zh_CN").read_text(encoding="utf-8")
    assert "班级报告" in zh and html.escape(translations("zh_CN")[UNSTABLE]) in zh
    assert 'lang="en"' not in zh and "它们以英文显示" not in zh  # every mistake named here has its translation


@pytest.mark.slow
def test_a_failure_before_the_cell_where_a_notebook_stopped_is_where_the_catalogue_should_grow(graded):
    """Only the failures a cell that stopped explains count as stopped: wil's unnamed padding_mask, graded before
    shift_right hung, is a failure the catalogue should name; shift_right's hung checks and hex's attention_mask,
    whose cell never finished, are not."""
    with (graded / "checks.csv").open(encoding="utf-8") as f:
        checks = [c for c in csv.DictReader(f) if c["passed"] == "0" and not c["mistake"]]
    stopped = {(c["student_id"], c["exercise"], c["hidden"]) for c in checks if c["stopped"] == "1"}
    assert stopped == {(s, f"{M}.{e}", h) for s, e in (("wil", "shift_right"), ("hex", "attention_mask"))
                       for h in "01"}
    wrong = {c["hidden"] for c in checks if (c["student_id"], c["exercise"]) == ("wil", f"{M}.padding_mask")}
    assert wrong == {"0", "1"}  # failed, no name, not stopped
    page = write_report(graded).read_text(encoding="utf-8")
    table = _exercise_table(page, M)
    assert (table["padding_mask"]["no name"], table["padding_mask"]["stopped"]) == ("1", "0")
    assert (table["shift_right"]["no name"], table["shift_right"]["stopped"]) == ("0", "1")
    assert table["attention_mask"]["stopped"] == "1"
    grow = {_text(r).split()[0]: _text(r) for r in _rows(_section(page, "unnamed"))[1:]}
    assert "wil" in grow[f"{M}.padding_mask"].split()
    assert f"{M}.shift_right" not in grow and "hex" not in _text(_section(page, "unnamed"))
    flagged = _text(_section(page, "flagged"))
    assert "wil" in flagged and "hex" in flagged and "timeout" in flagged
    # each names the cell it stopped in: wil's first check of shift_right, hex's own attention_mask cell
    rows = {_text(r).split()[0]: " ".join(_text(r).split()) for r in _rows(_section(page, "flagged"))[1:]}
    assert "stopped in shift_right_visible" in rows["wil"] and "stopped in attention_mask" in rows["hex"]
