"""Chapter 1 checks beyond tests/test_exercises.py: the softmax's normaliser may not come from logsumexp."""
import torch

from autograde.exercises import ch01_attention as chapter


def test_softmax_may_not_take_its_normaliser_from_logsumexp():
    def softmax(x, dim=-1):
        return torch.exp(x - x.logsumexp(dim=dim, keepdim=True))  # stable, and the library's own work

    report = chapter.SOFTMAX.run(softmax, seed=0)
    assert not report.passed
    assert "ForbiddenCall: your code called Tensor.logsumexp" in report.message
