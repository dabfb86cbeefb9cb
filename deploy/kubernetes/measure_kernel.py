"""A kernel's peak memory and CPU time running a notebook or a book page to its end: the capacity plan's inputs.

    python deploy/kubernetes/measure_kernel.py book/08b_decoding.md solutions/ch10_capstone/ch10_capstone.md

Each notebook runs in a fresh kernel from the course root (as a student's would); a last cell reads the kernel's
/proc/self/status (VmHWM: the peak resident memory, VmRSS: what it holds after) and its CPU time. Linux only.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
PROBE = """\
import resource
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(status["VmHWM"].split()[0], status["VmRSS"].split()[0], usage.ru_utime + usage.ru_stime)
"""


def _notebook(path: Path) -> nbformat.NotebookNode:
    if path.suffix == ".md":
        return read_myst_markdown_notebook(path.read_text(encoding="utf-8"))
    return nbformat.read(path, as_version=4)


def measure(path: Path, timeout: int = 1800) -> tuple[float, float, float]:
    """(peak MiB, MiB held after, CPU seconds) of a fresh kernel that ran ``path``."""
    notebook = _notebook(path)
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
    NotebookClient(notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    peak_kib, held_kib, cpu = notebook.cells[-1].outputs[-1]["text"].split()
    return int(peak_kib) / 1024, int(held_kib) / 1024, float(cpu)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="book pages (.md) or notebooks (.ipynb)")
    args = parser.parse_args(argv)
    print("| notebook | peak | after | CPU |\n|---|---|---|---|")
    for path in args.notebooks:
        if not path.is_file():
            sys.exit(f"measure_kernel: no such notebook: {path}")
        peak, held, cpu = measure(path)
        print(f"| `{path}` | {peak:.0f} MiB | {held:.0f} MiB | {cpu:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
