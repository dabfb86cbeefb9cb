"""The feedback page a student gets, in a browser: math drawn from the page itself, messages that
wrap at phone width in both colour modes, the fix folded behind its toggle, hidden tests and the
unrun "try it" cells left out, nothing fetched."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograde.checking import FIX_PREFIX
from autograde.feedback import feedback_html
from site_browser import browser, theme, viewport  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow  # a browser

MESSAGE = ["✗ softmax: hidden check 'huge logits' failed — the output contains NaN or inf where the reference is finite.",
           "Likely mistake — exp without subtracting the maximum: exp(x) overflows to inf for large logits " * 3,
           f"{FIX_PREFIX}subtract the row maximum first: e = torch.exp(x - x.amax(dim, keepdim=True))",
           "Smallest failing input (B=1, T=1, D=2; torch.float32):", "    x = tensor([[[1e3, -1e3]]])"]


def _grade(cell, grade_id, points):
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "points": points, "locked": True,
                                 "solution": False, "schema_version": 3}
    return cell


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    nb = new_notebook(cells=[
        new_markdown_cell("## Exercise 1\n\n$$\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$$ "
                          "over the axis $\\mathrm{dim}$."),
        new_code_cell("def softmax(x, dim=-1):\n    e = torch.exp(x)\n    return e / e.sum(dim, keepdim=True)"),
        _grade(new_code_cell("# Hidden checks (run when graded).", outputs=[
            new_output("error", ename="CheckFailed", evalue=MESSAGE[0], traceback=MESSAGE)]), "softmax_hidden", 2),
        new_markdown_cell("**Try it.** The attention calculator, with your softmax inside."),
        new_code_cell("attention_explorer(fn=softmax)", metadata={"tags": ["widget"]}),
    ])
    path = tmp_path_factory.mktemp("feedback") / "page.html"
    path.write_text(feedback_html("ch01_attention — a student", nb, {"softmax_hidden": 0.0}), encoding="utf-8")
    return path


def test_the_page_leaves_out_the_try_it_cells_and_folds_the_fix(page):
    text = page.read_text(encoding="utf-8")
    assert "attention_explorer" not in text and "Try it." not in text
    assert "<details class='fix'><summary>How to fix it</summary>" in text
    assert not any(fetch in text for fetch in ("<script", "<link", "src=", "url(", "@import"))  # nothing to fetch


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
        assert browser.save_screenshot(str(tmp_path / f"feedback-{mode}-{width}.png"))
