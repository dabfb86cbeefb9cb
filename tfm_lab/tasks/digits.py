"""Decoder-only toy tasks on digit strings: copy, reverse, sort and multi-digit addition.

One encoded example of each (n_digits = 4; ids: <pad> 0, <bos> 1, <eos> 2, '0'–'9' 3–12,
'+' 13, '=' 14):

    copy       3141=3141<eos>        reverse  3141=1413<eos>        sort  3141=1134<eos>
    addition   0457+0682=93110<eos>   457 + 682 = 1139, the sum's 5 digits least-significant
                                     first (as minGPT's adder: the carry flows left to right)

For "3141=3141<eos>" the ids are [6, 4, 7, 4, 14, 6, 4, 7, 4, 2];
``inp`` drops the last id and ``target`` the first, with the first 4 targets (the prompt's)
set to ``IGNORE_INDEX``: only "3141<eos>" is learned and scored.

Held out: prompts whose `heldout_hash` falls in the evaluation share never appear in training.

Shapes: B batch · L prompt digits · T sequence length − 1.
"""
from __future__ import annotations

import torch

from .base import IGNORE_INDEX, Batch, Task, heldout_hash
from .vocab import EOS_ID, Vocab

__all__ = ["DigitTask", "CopyTask", "ReverseTask", "SortTask", "AdditionTask"]

DIGITS_VOCAB = Vocab("0123456789+=")
_DIGIT0 = DIGITS_VOCAB.tokens.index("0")
_PLUS, _EQUALS = DIGITS_VOCAB.tokens.index("+"), DIGITS_VOCAB.tokens.index("=")


class DigitTask(Task):
    """A prompt of digits, '=', then the answer and ``<eos>``.

    Args:
        n_digits: digits in the prompt (per operand for addition).
        eval_fraction: share of all prompts held out for evaluation.
    Raises:
        ValueError: n_digits < 1 or eval_fraction outside (0, 1).
    """

    kind = "lm"
    vocab = DIGITS_VOCAB

    def __init__(self, n_digits: int = 8, eval_fraction: float = 0.1) -> None:
        if n_digits < 1:
            raise ValueError(f"n_digits must be at least 1, got {n_digits}")
        if not 0.0 < eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must lie in (0, 1), got {eval_fraction}")
        self.n_digits, self.eval_fraction = n_digits, eval_fraction

    @property
    def drawn_digits(self) -> int:
        """Digits drawn per example (the held-out split hashes all of them)."""
        return self.n_digits

    @property
    def prompt_len(self) -> int:
        return self.n_digits + 1  # digits and '='

    @property
    def max_answer_len(self) -> int:
        return self.n_digits + 1  # answer and <eos>

    def answer(self, digits: torch.Tensor) -> torch.Tensor:
        """Digit values (B, L) → answer digit values (B, A)."""
        raise NotImplementedError

    def prompt(self, digits: torch.Tensor) -> torch.Tensor:
        """Digit values (B, L) → prompt token ids (B, prompt_len)."""
        equals = torch.full_like(digits[:, :1], _EQUALS)
        return torch.cat([digits + _DIGIT0, equals], dim=1)

    def _draw_digits(self, n: int, generator: torch.Generator, split: str) -> torch.Tensor:
        """Rejection sampling: draw uniform digit strings and keep those of ``split``."""
        self.check_split(split)
        want_eval = split == "eval"
        oversample = 2.0 / self.eval_fraction if want_eval else 2.0 / (1.0 - self.eval_fraction)
        kept, have = [], 0
        while have < n:
            candidates = torch.randint(0, 10, (int((n - have) * oversample) + 16, self.drawn_digits), generator=generator)
            in_eval = heldout_hash(candidates) < 1000 * self.eval_fraction
            rows = torch.nonzero(in_eval == want_eval)[:, 0]
            kept.append(candidates.index_select(0, rows))  # boolean indexing is far slower on CPU
            have += kept[-1].shape[0]
        return torch.cat(kept)[:n]  # (n, L)

    def sample(self, n: int, generator: torch.Generator, split: str = "train") -> Batch:
        digits = self._draw_digits(n, generator, split)  # (B, L)
        answer = self.answer(digits) + _DIGIT0  # (B, A)
        eos = torch.full_like(answer[:, :1], EOS_ID)
        seq = torch.cat([self.prompt(digits), answer, eos], dim=1)  # (B, P + A + 1)
        target = seq[:, 1:].clone()
        target[:, : self.prompt_len - 1] = IGNORE_INDEX  # the prompt is given, not predicted
        return Batch(inp=seq[:, :-1], target=target)


class CopyTask(DigitTask):
    name = "copy"

    def answer(self, digits: torch.Tensor) -> torch.Tensor:
        return digits


class ReverseTask(DigitTask):
    name = "reverse"

    def answer(self, digits: torch.Tensor) -> torch.Tensor:
        return digits.flip(1)


class SortTask(DigitTask):
    name = "sort"

    def answer(self, digits: torch.Tensor) -> torch.Tensor:
        return digits.sort(dim=1).values


class AdditionTask(DigitTask):
    """a + b with ``n_digits`` digits each, zero-padded; the sum is written least-significant
    digit first, ``n_digits + 1`` digits long. Both operands' digits are drawn and hashed
    together, so the held-out split is over (a, b) pairs."""

    name = "addition"

    @property
    def prompt_len(self) -> int:
        return 2 * self.n_digits + 2  # a, '+', b, '='

    @property
    def max_answer_len(self) -> int:
        return self.n_digits + 2  # n + 1 sum digits and <eos>

    @property
    def drawn_digits(self) -> int:
        return 2 * self.n_digits

    def prompt(self, digits: torch.Tensor) -> torch.Tensor:
        a, b = digits.split(self.n_digits, dim=1)  # (B, n) each
        plus = torch.full_like(a[:, :1], _PLUS)
        equals = torch.full_like(a[:, :1], _EQUALS)
        return torch.cat([a + _DIGIT0, plus, b + _DIGIT0, equals], dim=1)

    def answer(self, digits: torch.Tensor) -> torch.Tensor:
        powers = 10 ** torch.arange(self.n_digits - 1, -1, -1)  # most significant first
        a, b = (part @ powers for part in digits.split(self.n_digits, dim=1))  # (B,) each
        total = a + b
        places = 10 ** torch.arange(self.n_digits + 1)  # least significant first
        return total[:, None] // places % 10  # (B, n + 1)
