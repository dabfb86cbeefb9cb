"""tfm_lab.tasks: every generator against an independent computation of its answers."""
from __future__ import annotations

import datetime as dt

import pytest
import torch

from tfm_lab.tasks import (
    DATE_VOCAB, FORMATS, IGNORE_INDEX, AdditionTask, CopyTask, DateTask, ReverseTask, SortTask, Vocab, heldout_hash,
    make_task, render,
)
from tfm_lab.tasks.dates import FIRST_DAY, LAST_DAY


@pytest.fixture(scope="module")
def dates() -> DateTask:
    return DateTask()


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _prompt_and_answer(task, batch, row: int) -> tuple[str, str]:
    """Decode one decoder-only example back to text: (prompt, scored answer)."""
    text = task.vocab.decode(torch.cat([batch.inp[row], batch.target[row, -1:]]))
    answer = task.vocab.decode(batch.target[row][batch.target[row] != IGNORE_INDEX])
    return text[: task.prompt_len], answer


@pytest.mark.parametrize("task, expected", [
    (CopyTask(6), lambda digits: digits),
    (ReverseTask(6), lambda digits: digits[::-1]),
    (SortTask(6), lambda digits: "".join(sorted(digits))),
])
def test_digit_tasks_answer_as_python_computes_it(task, expected):
    batch = task.sample(64, _gen())
    for row in range(len(batch)):
        prompt, answer = _prompt_and_answer(task, batch, row)
        assert prompt.endswith("=") and len(prompt) == 7
        assert answer == expected(prompt[:-1])


def test_addition_answers_the_sum_least_significant_digit_first():
    task = AdditionTask(4)
    batch = task.sample(64, _gen())
    for row in range(len(batch)):
        prompt, answer = _prompt_and_answer(task, batch, row)
        a, b = prompt[:-1].split("+")
        assert len(a) == len(b) == 4
        assert answer == str(int(a) + int(b)).zfill(5)[::-1]


def test_lm_batches_are_shifted_by_one_and_score_only_the_answer():
    task = CopyTask(5)
    batch = task.sample(8, _gen())
    scored = batch.target != IGNORE_INDEX
    assert torch.equal(batch.inp[:, 1:][scored[:, :-1]], batch.target[:, :-1][scored[:, :-1]])
    assert scored.sum(1).eq(task.max_answer_len).all()  # the digits and <eos>
    assert not scored[:, : task.prompt_len - 1].any()


@pytest.mark.parametrize("task", [CopyTask(3), AdditionTask(2), DateTask()], ids=lambda t: t.name)
def test_training_batches_never_contain_heldout_examples(task):
    train = task.sample(4000, _gen(1), split="train")
    held = task.eval_set(500)
    if task.kind == "lm":
        def key(b): return b.inp[:, : task.prompt_len - 1]
    else:
        def key(b): return b.target  # the ISO date: a held-out day in any format
    train_keys = {tuple(r) for r in key(train).tolist()}
    held_keys = {tuple(r) for r in key(held).tolist()}
    assert train_keys.isdisjoint(held_keys)


def test_eval_set_is_the_same_in_every_run():
    first, second = CopyTask(4).eval_set(100), CopyTask(4).eval_set(100)
    assert torch.equal(first.inp, second.inp)


def test_batch_for_step_depends_only_on_seed_and_step():
    task = ReverseTask(4)
    assert torch.equal(task.batch_for_step(7, 32, seed=3).inp, task.batch_for_step(7, 32, seed=3).inp)
    assert not torch.equal(task.batch_for_step(7, 32, seed=3).inp, task.batch_for_step(8, 32, seed=3).inp)


def test_heldout_hash_is_in_range_and_spreads_rows():
    values = torch.randint(0, 10, (5000, 6), generator=_gen())
    h = heldout_hash(values)
    assert h.min() >= 0 and h.max() < 1000
    assert 0.05 < (h < 100).float().mean() < 0.15  # about a tenth held out at eval_fraction 0.1


def test_date_batches_equal_the_python_reference_for_every_format(dates):
    days = [FIRST_DAY, LAST_DAY, dt.date(2026, 11, 22), dt.date(2000, 2, 29), dt.date(1911, 1, 1),
            dt.date(1999, 12, 31), dt.date(2023, 3, 5), dt.date(2012, 10, 10)]
    pairs = [(d, f) for d in days for f in range(len(FORMATS))]
    batch = dates.encode_dates([d for d, _ in pairs], [f for _, f in pairs])
    for row, (day, fmt) in enumerate(pairs):
        assert DATE_VOCAB.decode(batch.src[row]) == render(day, FORMATS[fmt])
        assert DATE_VOCAB.decode(batch.target[row]) == day.isoformat()
        assert DATE_VOCAB.decode(batch.inp[row]) == day.isoformat()  # <bos> is skipped
    assert torch.equal(batch.src_mask, batch.src != DATE_VOCAB.pad_id)


def test_date_formats_cover_english_and_chinese_examples():
    day = dt.date(2026, 11, 22)
    written = {render(day, f) for f in FORMATS}
    for example in ("22 November 2026", "Nov 22, 2026", "22/11/2026", "Sunday, November 22, 2026",
                    "2026年11月22日", "二〇二六年十一月二十二日", "the 22nd of November, 2026", "2026年11月22日星期日"):
        assert example in written


def test_random_date_batches_round_trip_to_their_iso_targets(dates):
    batch = dates.sample(256, _gen(5))
    for row in range(len(batch)):
        iso = DATE_VOCAB.decode(batch.target[row])
        day = dt.date.fromisoformat(iso)  # raises if the target is not a valid ISO date
        source = DATE_VOCAB.decode(batch.src[row])
        assert source in {render(day, f) for f in FORMATS}


def test_date_source_width_fits_the_longest_format(dates):
    longest = max(len(render(d, f)) for f in FORMATS for d in (dt.date(2026, 9, 30), dt.date(1977, 9, 23)))
    assert dates.src_width >= longest


def test_vocab_encodes_and_decodes_round_trip():
    vocab = Vocab("abc")
    ids = vocab.encode_batch(["cab", "a"])
    assert ids.shape == (2, 3) and ids[1, 1:].eq(vocab.pad_id).all()
    assert vocab.decode(ids[0]) == "cab" and vocab.decode(ids[1]) == "a"
    assert vocab.decode([3, vocab.eos_id, 4]) == "a"


def test_vocab_names_unknown_characters():
    with pytest.raises(ValueError, match="'z'"):
        Vocab("abc").encode_batch(["abz"])
    with pytest.raises(ValueError, match="年"):
        Vocab("abc").encode("年")


def test_bad_task_arguments_raise_value_errors(dates):
    with pytest.raises(ValueError, match="unknown task"):
        make_task("translate")
    with pytest.raises(ValueError, match="n_digits"):
        CopyTask(0)
    with pytest.raises(ValueError, match="split"):
        CopyTask(2).sample(4, _gen(), split="test")
    with pytest.raises(ValueError, match="between"):
        dates.encode_dates([dt.date(1850, 1, 1)], [0])


def test_the_capstone_recipe_s_draws_repeat_as_rarely_as_its_text_says(dates):
    """The capstone notebook says its 800 batches of 128 (seed 0, as the run draws them) come from the training days
    written in every format and repeat an earlier draw only 3 % of the time: counted here, draw by draw."""
    from editions.assignments import source_markdown

    text = " ".join(source_markdown("ch10_capstone").read_text(encoding="utf-8").split())
    seen, repeats = set(), 0
    for step in range(800):
        for row in dates.batch_for_step(step, 128, seed=0).src.tolist():
            repeats += tuple(row) in seen
            seen.add(tuple(row))
    days, formats = len(dates.days("train")), len(dates.formats)
    assert f"{800 * 128:,} draws, from {days:,} days written in {formats} formats" in text
    assert f"only {round(100 * repeats / (800 * 128))} % of the time" in text
