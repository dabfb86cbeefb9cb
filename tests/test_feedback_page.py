"""The feedback page a student gets (`autograde.feedback.FeedbackExporter`, the course's nbconvert template), in a
browser: math drawn from the page itself, messages that wrap at phone width in both colour modes, the fix folded
behind its toggle, the ✓/✗ summary with the instructor's score and comment, hidden tests, the unrun "try it" cells
and the grader's note to the instructor left out, nothing fetched."""
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograde.verdict import FIX_PREFIX
from autograde.feedback import GRADER_NOTE, feedback_html
from site_browser import browser, theme, viewport  # noqa: F401 (fixtures)

MESSAGE = ["✗ softmax: hidden check 'huge logits' failed — the output contains NaN or inf where the reference is finite.",
           "Likely mistake — exp without subtracting the maximum: exp(x) overflows to inf for large logits " * 3,
           f"{FIX_PREFIX}subtract the row maximum first: e = torch.exp(x - x.amax(dim, keepdim=True))",
           "Smallest failing input (B=1, T=1, D=2; torch.float32):", "    x = tensor([[[1e3, -1e3]]])"]


def _graded(cell, grade_id, points, score, **meta):
    """A cell as nbgrader's GetGrades leaves it: its points and the score the gradebook holds."""
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "points": points, "score": score,
                                 "locked": True, "solution": False, "schema_version": 3, **meta}
    return cell


def _solution(cell, grade_id, comment):
    cell.metadata["nbgrader"] = {"grade": False, "grade_id": grade_id, "solution": True, "locked": False,
                                 "schema_version": 3, "comment": comment}
    return cell


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    nb = new_notebook(cells=[
        new_markdown_cell("## Exercise 1\n\n$$\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$$ "
                          "over the axis $\\mathrm{dim}$."),
        _solution(new_code_cell("def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim, keepdim=True)"),
                  "softmax", f"Subtract the **row maximum** first.\n\n{GRADER_NOTE}: similar-to:bob"),
        _graded(new_code_cell("check('ch01_attention.softmax', softmax)", outputs=[
            new_output("stream", name="stdout", text="✓ softmax: 4 visible checks passed")]), "softmax_visible", 1, 1),
        _graded(new_code_cell("# Hidden checks (run when graded).\n### BEGIN HIDDEN TESTS\ncheck(hidden=True)\n"
                              "### END HIDDEN TESTS", outputs=[
                                  new_output("error", ename="CheckFailed", evalue=MESSAGE[0], traceback=MESSAGE)]),
                "softmax_hidden", 2, 1.5),
        _graded(new_code_cell("check('ch01_attention.attention', attention)", outputs=[
            new_output("error", ename="NameError", evalue="name 'attention' is not defined",
                       traceback=["\x1b[0;31mNameError\x1b[0m: name 'attention' is not defined"])]), "attention", 3, 0),
        new_markdown_cell("**Try it.** The attention calculator, with your softmax inside."),
        new_code_cell("attention_explorer(fn=softmax)", metadata={"tags": ["widget"]}),
    ])
    resources = {"nbgrader": {"student": "a student", "assignment": "ch01_attention", "score": 0.5, "max_score": 6,
                              "late_penalty": 2}}
    path = tmp_path_factory.mktemp("feedback") / "page.html"
    path.write_text(feedback_html(nb, resources), encoding="utf-8")
    return path


def test_the_page_is_the_courses_with_the_summary_and_the_instructors_score_and_comment(page):
    text = page.read_text(encoding="utf-8")
    assert "<title>ch01_attention — a student</title>" in text
    assert '<p class="points">Score: 0.5 / 6 <span class="late">— Late submission penalty: 2 points taken off</span>' in text
    assert '<a href="#cell-softmax_visible">softmax_visible</a></td><td class="ok">✓ 1 / 1</td>' in text
    assert '<td class="part">◐ 1.5 / 2</td>' in text and '<td class="bad">✗ 0 / 3</td>' in text
    assert '<div class="comment"><strong>Comment</strong><p>Subtract the <strong>row maximum</strong> first.</p>' in text
    assert GRADER_NOTE not in text and "similar-to" not in text  # the grader's note is the instructor's
    assert "\x1b" not in text and "NameError: name &#x27;attention&#x27; is not defined" in text  # no ANSI codes


def test_the_page_leaves_out_hidden_tests_and_the_try_it_cells_and_folds_the_fix(page):
    text = page.read_text(encoding="utf-8")
    assert "attention_explorer" not in text and "Try it." not in text
    assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text
    assert "<details class='fix'><summary>How to fix it</summary>" in text
    assert not any(fetch in text for fetch in ("<script", "<link", "src=", "url(", "@import"))  # nothing to fetch


@pytest.mark.slow  # a browser
@pytest.mark.parametrize("mode", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_it_reads_well_in_a_browser(browser, page, tmp_path, mode, width):  # noqa: F811
    with viewport(browser, width), theme(browser, mode):
        browser.get(page.as_uri())
        assert browser.execute_script("return document.querySelectorAll('math').length") == 2  # drawn, not $…$
        assert "$$" not in browser.find_element("tag name", "body").text
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
        fix = browser.find_element("css selector", "details.fix")
        assert not fix.get_attribute("open") and "torch.exp(x - x.amax" not in fix.text  # folded until opened
        fix.find_element("tag name", "summary").click()
        assert "torch.exp(x - x.amax" in fix.text
        colours = browser.execute_script(
            "const s = getComputedStyle(document.body); return [s.color, s.backgroundColor];")
        assert colours[0] != colours[1]
        dark_background = colours[1] in ("rgb(13, 17, 23)",)
        assert dark_background == (mode == "dark")
        comment = browser.execute_script(
            "const s = getComputedStyle(document.querySelector('.comment')); return [s.color, s.backgroundColor];")
        assert comment[0] != comment[1]
        assert browser.save_screenshot(str(tmp_path / f"feedback-{mode}-{width}.png"))
