import pytest
import torch


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


requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
