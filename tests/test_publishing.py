"""Publishing the book: the GitHub Actions workflow (checked by actionlint, and built with the README's
command) and the Binder environment (PyTorch's CPU build, pages that open as notebooks)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BOOK_WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _actionlint() -> str:
    # The venv's bin/ is on PATH only when it is activated: look beside this Python too.
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail("actionlint is not installed: `pip install -r requirements.txt`")
    return found


def _readme_build_command() -> str:
    """The command the README's quick start gives for building the book."""
    match = re.search(r"^(make \w+)\s+# .*builds the site", (ROOT / "README.md").read_text(encoding="utf-8"), re.M)
    assert match, "the README's quick start gives no command that builds the site"
    return match.group(1)


def _run_steps(workflow: Path) -> list[str]:
    return re.findall(r"^\s*run: (.+)$", workflow.read_text(encoding="utf-8"), re.M)


def test_workflows_pass_actionlint():
    assert WORKFLOWS, "no workflow in .github/workflows"
    result = subprocess.run([_actionlint(), "-no-color", *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path):
    """The check above can fail: a step that names no action and runs nothing is rejected."""
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text("on: push\njobs:\n  build:\n    runs-on: ubuntu-24.04\n    steps:\n      - name: nothing\n")
    result = subprocess.run([_actionlint(), "-no-color", str(broken)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0


def test_the_book_workflow_builds_with_the_readmes_command_on_cpu_pytorch():
    runs = _run_steps(BOOK_WORKFLOW)
    assert _readme_build_command() in runs, f"the workflow's steps run {runs}"
    text = BOOK_WORKFLOW.read_text(encoding="utf-8")
    assert re.search(rf"pip install .*torch\S* .*--index-url {re.escape(CPU_INDEX)}", text), "no CPU build of torch"


def test_the_book_workflow_deploys_the_site_and_publishes_the_notebooks_for_colab():
    text = BOOK_WORKFLOW.read_text(encoding="utf-8")
    assert re.search(r"uses: actions/upload-pages-artifact@\S+\s+with:\s+path: _build/html", text)
    assert "uses: actions/deploy-pages@" in text
    colab_branch = re.search(r'add_config_value\("colab_branch", "(\w+)"', (ROOT / "_ext" / "book_site.py").read_text())
    assert colab_branch, "_ext/book_site.py no longer names the Colab buttons' branch"
    assert "working-directory: _build/colab" in text and re.search(rf"git push .* {colab_branch.group(1)}\b", text), \
        f"the executed notebooks are not pushed to the {colab_branch.group(1)!r} branch"


def _requirements(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def test_binder_installs_pytorchs_cpu_build_and_the_courses_requirements():
    lines = _requirements(ROOT / "binder" / "requirements.txt")
    assert f"--extra-index-url {CPU_INDEX}" in lines or f"--index-url {CPU_INDEX}" in lines
    torch = [Requirement(line) for line in lines if re.match(r"torch\b", line)]
    assert len(torch) == 1 and all(spec.version.endswith("+cpu") for spec in torch[0].specifier), torch
    assert "-r ../requirements.txt" in lines, "Binder must install what the course needs"
    course_torch = next(Requirement(line) for line in _requirements(ROOT / "requirements.txt") if re.match(r"torch\b", line))
    pinned = next(iter(torch[0].specifier)).version
    assert course_torch.specifier.contains(pinned), f"Binder's torch {pinned} is outside {course_torch.specifier}"


def test_binder_opens_the_pages_as_notebooks():
    post_build = ROOT / "binder" / "postBuild"
    assert post_build.stat().st_mode & 0o111, "binder/postBuild must be executable"
    assert re.search(r"^jupytext-config set-default-viewer .*\bmarkdown\b", post_build.read_text(), re.M)


def test_binder_can_pull_the_published_notebooks():
    """The Chinese edition's Binder button opens its page's notebook from the published notebooks branch,
    pulled into Binder's environment by nbgitpuller (`git-pull?…`, _ext/book_site.py)."""
    lines = _requirements(ROOT / "binder" / "requirements.txt")
    assert any(Requirement(line).name == "nbgitpuller" for line in lines if not line.startswith("-")), lines
