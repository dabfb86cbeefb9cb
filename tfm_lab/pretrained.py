"""The small trained date model shipped with the course (chapters 4 and 8 use it in widgets).

    >>> from tfm_lab.pretrained import load_date_model
    >>> dates = load_date_model()
    >>> dates.translate(["22 November 2026", "二〇二六年十一月二十二日"])
    ['2026-11-22', '2026-11-22']
    >>> src, src_mask = dates.encode(["Nov 22, 2026"])        # (1, S) ids, (1, S) bool
    >>> with record_attention(dates.model) as maps:            # cross-attention for a plot
    ...     dates.model(src, dates.decoder_input(["2026-11-22"]), src_mask)

The model (128 wide, 2 + 2 Pre-Norm layers, 0.94 M parameters in float16) trained in 19 s on one H100;
the command that made it is in tfm_lab/README.md.

Shapes: B batch · S source positions · T target positions.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tfm_ref.beam_search import beam_search
from tfm_ref.config import TransformerConfig
from tfm_ref.decoding import greedy_decode
from tfm_ref.transformer import Transformer

from .tasks import BOS_ID, EOS_ID, DateTask, Vocab, make_task

__all__ = ["DATE_MODEL_PATH", "PretrainedDateModel", "load_date_model"]

DATE_MODEL_PATH = Path(__file__).parent / "checkpoints" / "date_model.pt"


@dataclass
class PretrainedDateModel:
    """A trained encoder-decoder and what it needs to read and write dates.

    Attributes:
        model: the `Transformer`, in eval mode.  task: the `DateTask` it was trained on
        (its formats, held-out days and vocabulary).  vocab: the character vocabulary.
        summary: the training run's summary (accuracy, steps, seconds, device).
    """

    model: Transformer
    task: DateTask
    vocab: Vocab
    summary: dict

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Typed dates → src (B, S) ids and src_mask (B, S), True = real character.

        Raises:
            ValueError: a character the model has never seen (the message names it).
        """
        src, src_mask = self.task.encode_source(list(texts))
        return src.to(self.device), src_mask.to(self.device)

    def decoder_input(self, outputs: list[str]) -> torch.Tensor:
        """ISO strings → the decoder's teacher-forcing input (B, T): ``<bos>`` then the characters."""
        ids = self.vocab.encode_batch(list(outputs))
        bos = torch.full_like(ids[:, :1], BOS_ID)
        return torch.cat([bos, ids], dim=1).to(self.device)

    def decode(self, ids: torch.Tensor) -> list[str]:
        """Generated ids (B, T) → strings (up to the first ``<eos>``)."""
        return [self.vocab.decode(row) for row in ids]

    @torch.no_grad()
    def translate(self, texts: str | list[str], beam_size: int = 1) -> list[str]:
        """Translate typed dates to ISO 8601 (greedy decoding, or beam search when beam_size > 1)."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        src, src_mask = self.encode(texts)
        settings = dict(bos_id=BOS_ID, eos_id=EOS_ID, max_len=self.task.max_answer_len)
        if beam_size > 1:
            ids, _ = beam_search(self.model, src, src_mask, beam_size=beam_size, **settings)
        else:
            ids = greedy_decode(self.model, src, src_mask, **settings)
        return self.decode(ids)


def load_date_model(path: str | Path | None = None, device: str | torch.device = "cpu") -> PretrainedDateModel:
    """Load the shipped date model (or another file written by ``python -m tfm_lab.train --export``).

    Raises:
        ValueError: the file holds a model for another task.
    """
    state = torch.load(Path(path or DATE_MODEL_PATH), map_location=device, weights_only=False)
    if state["task"] != "dates":
        raise ValueError(f"{path} holds a model for task {state['task']!r}, not 'dates'")
    model = Transformer(TransformerConfig(**state["model_config"]))
    model.load_state_dict({k: v.float() for k, v in state["state_dict"].items()})
    task = make_task("dates", **state["task_args"])
    return PretrainedDateModel(model.to(device).eval(), task, task.vocab, state["summary"])
