"""Character vocabularies for the synthetic tasks: one token per character, plus specials.

Ids 0, 1, 2 are always ``<pad>``, ``<bos>``, ``<eos>``; the characters follow in the order given.
Encoding a whole batch of strings is vectorised (one lookup table over code points), so the
training loop never builds tensors one example at a time.

Shapes: B batch · W padded width.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["Vocab", "PAD_ID", "BOS_ID", "EOS_ID"]

from tfm_ref.tokens import BOS_ID, EOS_ID, PAD_ID
_SPECIALS = ("<pad>", "<bos>", "<eos>")


class Vocab:
    """Maps characters to ids and back.

    Args:
        chars: the characters, each a one-character string, no repeats, no NUL.
    Raises:
        ValueError: a repeated or multi-character entry.
    """

    def __init__(self, chars: str | list[str]) -> None:
        chars = list(chars)
        if any(len(c) != 1 or c == "\0" for c in chars):
            raise ValueError("every vocabulary entry must be one character other than NUL")
        if len(set(chars)) != len(chars):
            raise ValueError("the vocabulary has repeated characters")
        self.tokens = [*_SPECIALS, *chars]
        self.pad_id, self.bos_id, self.eos_id = PAD_ID, BOS_ID, EOS_ID
        # Code point → id; -1 marks characters outside the vocabulary. NUL (used to pad) → <pad>.
        self._lookup = np.full(max(map(ord, chars), default=0) + 1, -1, dtype=np.int64)
        self._lookup[0] = PAD_ID
        for i, c in enumerate(chars, start=len(_SPECIALS)):
            self._lookup[ord(c)] = i

    def __len__(self) -> int:
        return len(self.tokens)

    def encode_batch(self, strings: list[str], width: int | None = None) -> torch.Tensor:
        """Encode strings into a (B, W) int64 tensor, right-padded with ``<pad>``.

        Args:
            width: W; None means the longest string.
        Raises:
            ValueError: a character outside the vocabulary, or a string longer than ``width``.
        """
        longest = max(map(len, strings), default=0)
        width = longest if width is None else width
        if longest > width:
            raise ValueError(f"a string of {longest} characters does not fit width {width}")
        # One UTF-32 buffer of NUL-padded strings → a (B, W) array of code points, no Python per character.
        buffer = "".join(s.ljust(width, "\0") for s in strings).encode("utf-32-le")
        codes = np.frombuffer(buffer, dtype=np.uint32).reshape(len(strings), width)
        unknown = codes >= len(self._lookup)
        ids = self._lookup[np.where(unknown, 0, codes)]
        ids[unknown] = -1
        if (ids < 0).any():
            bad = sorted({chr(c) for c in codes[ids < 0].tolist()})
            raise ValueError(f"characters not in the vocabulary: {bad}")
        return torch.from_numpy(ids)

    def encode(self, text: str) -> torch.Tensor:
        """One string → (W,) ids."""
        return self.encode_batch([text])[0]

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """Ids → text, stopping at the first ``<eos>`` and skipping ``<pad>`` and ``<bos>``."""
        out = []
        for i in torch.as_tensor(ids).tolist():
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                out.append(self.tokens[i])
        return "".join(out)
