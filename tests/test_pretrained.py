"""tfm_lab.pretrained: the shipped date model translates freshly generated dates."""
from __future__ import annotations

import datetime as dt

import pytest
import torch

from tfm_lab.pretrained import DATE_MODEL_PATH, load_date_model
from tfm_lab.tasks import FORMATS, render


@pytest.fixture(scope="module")
def date_model():
    return load_date_model()


def test_shipped_model_is_small_and_loads_in_eval_mode(date_model):
    assert DATE_MODEL_PATH.stat().st_size < 4 * 2**20
    assert not date_model.model.training
    assert date_model.task.name == "dates" and len(date_model.vocab) == date_model.model.config.vocab_size


def test_shipped_model_translates_fresh_dates_in_every_format(date_model):
    """At least 95% exact match, by greedy decoding, on dates drawn now (held-out days included)."""
    g = torch.Generator().manual_seed(20261122)
    ordinals = torch.randint(dt.date(1900, 1, 1).toordinal(), dt.date(2099, 12, 31).toordinal() + 1, (600,), generator=g)
    days = [dt.date.fromordinal(o) for o in ordinals.tolist()]
    formats = torch.randint(len(FORMATS), (600,), generator=g).tolist()
    texts = [render(d, FORMATS[f]) for d, f in zip(days, formats)]
    predicted = date_model.translate(texts)
    accuracy = sum(p == d.isoformat() for p, d in zip(predicted, days)) / len(days)
    assert accuracy >= 0.95


def test_shipped_model_translates_held_out_days(date_model):
    held_out = date_model.task.days("eval")[::97][:40]
    texts = [render(d, FORMATS[i % len(FORMATS)]) for i, d in enumerate(held_out)]
    predicted = date_model.translate(texts)
    assert sum(p == d.isoformat() for p, d in zip(predicted, held_out)) / len(held_out) >= 0.95


def test_beam_search_agrees_with_greedy_on_a_confident_model(date_model):
    texts = ["22 November 2026", "Nov 22, 2026", "二〇二六年十一月二十二日", "Sunday, November 22, 2026"]
    assert date_model.translate(texts, beam_size=3) == date_model.translate(texts) == ["2026-11-22"] * 4


def test_widget_helpers_encode_and_decode(date_model):
    src, src_mask = date_model.encode(["22/11/2026"])
    assert src.shape == src_mask.shape and int(src_mask.sum()) == len("22/11/2026")
    tgt = date_model.decoder_input(["2026-11-22"])
    assert tgt.shape == (1, 11)
    logits = date_model.model(src, tgt, src_mask)
    assert date_model.decode(logits.argmax(-1)) == ["2026-11-22"]


def test_unknown_characters_are_named(date_model):
    with pytest.raises(ValueError, match="€"):
        date_model.translate("22 € 2026")
