"""What every synthetic task produces: a `Batch` of token ids ready for teacher forcing.

Two model families, one batch format:

* ``kind = "lm"`` (decoder-only): ``inp`` is the whole sequence but its last token, ``target``
  the whole sequence but its first; the prompt's positions carry ``IGNORE_INDEX`` so that only
  the answer is learned and scored.
* ``kind = "seq2seq"`` (encoder-decoder): ``src`` goes to the encoder; ``inp`` is the target
  shifted right (``<bos>`` first) and ``target`` is the target followed by ``<eos>``.

Every task keeps a held-out part of its inputs (``split="eval"``) that training never draws.

Shapes: B batch · S source positions · T target positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .vocab import Vocab

__all__ = ["Batch", "Task", "IGNORE_INDEX", "EVAL_SEED", "SPLITS", "heldout_hash"]

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index
EVAL_SEED = 1234  # the held-out evaluation set is the same in every run
SPLITS = ("train", "eval")


@dataclass
class Batch:
    """Token ids for one training or evaluation step.

    Attributes:
        inp: (B, T) decoder input.  target: (B, T) next tokens, ``IGNORE_INDEX`` where unscored.
        src: (B, S) encoder input, or None for decoder-only tasks.
        src_mask: (B, S) bool, True = real token, or None.
    """

    inp: torch.Tensor
    target: torch.Tensor
    src: torch.Tensor | None = None
    src_mask: torch.Tensor | None = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """The batch on ``device``. To a GPU with ``non_blocking``, through pinned memory: a copy from
        ordinary (pageable) memory first waits for all the work queued on the GPU, so the next batch
        could not go up while the current step runs."""
        pin = non_blocking and torch.device(device).type == "cuda"

        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            if t is None:
                return None
            return (t.pin_memory() if pin else t).to(device, non_blocking=non_blocking)

        return Batch(move(self.inp), move(self.target), move(self.src), move(self.src_mask))

    def __getitem__(self, rows: slice) -> "Batch":
        """The rows ``rows`` of every tensor (how data-parallel ranks split a global batch)."""
        pick = lambda t: None if t is None else t[rows]  # noqa: E731
        return Batch(self.inp[rows], self.target[rows], pick(self.src), pick(self.src_mask))

    def by_source_length(self, parts: int) -> list["Batch"]:
        """The rows in ``parts`` groups of similar source length, each trimmed to its longest source.

        The encoder then computes fewer padded positions; what it computes for real ones is the
        same, since no query attends to a padded key. A decoder-only batch has no source: [self].
        """
        if self.src is None or parts == 1:
            return [self]
        lengths = self.src_mask.sum(dim=1)  # (B,)
        groups = []
        for rows in lengths.argsort(stable=True).tensor_split(min(parts, len(self))):  # shortest sources first
            width = int(lengths[rows].max())  # the longest source in the group
            groups.append(Batch(self.inp[rows], self.target[rows], self.src[rows, :width], self.src_mask[rows, :width]))
        return groups

    def in_chunks(self, rows: int) -> list["Batch"]:
        """The rows in pieces of at most ``rows``, for a forward pass each: of similar source length
        and trimmed like `by_source_length`'s groups when there is a source, in order when not."""
        if self.src is not None:
            return self.by_source_length(-(-len(self) // rows))
        return [self[start:start + rows] for start in range(0, len(self), rows)]

    def __len__(self) -> int:
        return self.inp.shape[0]

    @property
    def n_tokens(self) -> int:
        """Tokens the model reads: decoder input plus encoder input (throughput counts these)."""
        return self.inp.numel() + (0 if self.src is None else self.src.numel())


def heldout_hash(values: torch.Tensor) -> torch.Tensor:
    """A deterministic hash in [0, 1000) of each row of non-negative integers (B, L) → (B,).

    Tasks put a row in the held-out set when its hash falls below ``1000 · eval_fraction``.
    """
    modulus = 1_000_000_007
    weights = torch.tensor([pow(131, j, modulus) for j in range(values.shape[-1])], dtype=torch.int64)
    h = (values.long() * weights.to(values.device)).sum(dim=-1) % modulus
    return (h * 2_654_435_761 % 4_294_967_296) % 1000  # multiplicative mixing spreads nearby rows


class Task:
    """Base class: a generator of batches with a train/eval split.

    Subclasses set ``name``, ``kind`` ("lm" or "seq2seq"), ``vocab`` and ``max_answer_len``,
    and implement ``sample``.
    """

    name: str
    kind: str
    vocab: Vocab
    max_answer_len: int  # longest answer in tokens, <eos> included (decoding length)

    def sample(self, n: int, generator: torch.Generator, split: str = "train") -> Batch:
        """Draw ``n`` examples from ``split`` with ``generator`` (a CPU generator)."""
        raise NotImplementedError

    def eval_set(self, n: int = 2000) -> Batch:
        """The held-out evaluation set: ``n`` examples, the same in every run."""
        return self.sample(n, torch.Generator().manual_seed(EVAL_SEED), split="eval")

    def batch_for_step(self, step: int, n: int, seed: int) -> Batch:
        """The training batch of step ``step``: a pure function of (seed, step), so a resumed
        run sees exactly the batches an uninterrupted run would, without saving generator state."""
        return self.sample(n, torch.Generator().manual_seed(seed * 1_000_003 + step), split="train")

    @staticmethod
    def check_split(split: str) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
