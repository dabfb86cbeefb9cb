import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch


def pytest_configure(config):
    """Under pytest-xdist, each worker's PyTorch takes its share of the cores: two workers of two threads each on two
    cores spend their time waiting on one another."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def checks_on_one_thread():
    """PyTorch on one thread, as a check runs it (`autograde.candidates.one_thread`): a test that trains through
    the checks would otherwise fight pytest-xdist's other workers for the cores."""
    from autograde.candidates import one_thread

    with one_thread():
        yield


@pytest.fixture(scope="session")
def released_course(tmp_path_factory):
    """``released_course(folder, assignments, late_penalty=None, chinese=False, due=())``: a released course of its
    own at ``folder``, copied from one released once per session (tests/courses.py)."""
    from courses import ReleasedCourses

    return ReleasedCourses(tmp_path_factory.mktemp("released"))


@pytest.fixture
def bwrap_refused():
    """An environment whose bwrap fails as it does where user namespaces are not allowed."""
    fake = Path(tempfile.mkdtemp())  # where the unprivileged sandbox user may run it
    fake.chmod(0o755)
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    yield {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    shutil.rmtree(fake)


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
