"""Date translation (encoder-decoder): a date as people write it, in English or Chinese → ISO 8601.

    "22 November 2026", "Nov 22, 2026", "22/11/2026", "Sunday, November 22, 2026",
    "the 22nd of November, 2026", "2026年11月22日", "二〇二六年十一月二十二日", …  →  "2026-11-22"

One encoded example (character tokens; ids: <pad> 0, <bos> 1, <eos> 2, then `DATE_VOCAB`'s
characters):

    src     "Nov 22, 2026"   → [vocab ids of N, o, v, ' ', 2, 2, ',', ' ', 2, 0, 2, 6, <pad>, …]
    inp     <bos> 2 0 2 6 - 1 1 - 2 2          (the target shifted right)
    target  2 0 2 6 - 1 1 - 2 2 <eos>

Every format is a template (`FORMATS`) of literal text and fields ({d} day, {B} month name, {Y} year, …).
A batch is built without Python per example, from a table of every piece a template can produce, encoded
once (`_PieceTable`): a gather of pieces, then one scatter. `render` is the plain-Python reference.

Held out: a fixed tenth of the days between `FIRST_DAY` and `LAST_DAY` (chosen by
`heldout_hash`) are never drawn for training, in any format.

Shapes: B batch · K pieces per template · L piece width · S source width · T target length.
"""
from __future__ import annotations

import datetime as dt
import string

import torch

from .base import Batch, Task, heldout_hash
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

__all__ = ["DateTask", "FORMATS", "render", "DATE_VOCAB", "FIRST_DAY", "LAST_DAY"]

FIRST_DAY, LAST_DAY = dt.date(1900, 1, 1), dt.date(2099, 12, 31)

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]  # date.weekday()
CN_DIGITS = "〇一二三四五六七八九"
CN_WEEKDAYS = ["一", "二", "三", "四", "五", "六", "日"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _cn_number(n: int) -> str:
    """1–31 in Chinese numerals: 5 五, 10 十, 11 十一, 20 二十, 22 二十二."""
    tens, ones = divmod(n, 10)
    return ("" if tens == 0 else ("十" if tens == 1 else CN_DIGITS[tens] + "十")) + (CN_DIGITS[ones] if ones or not tens else "")


# field → (what it reads: day/month/year/weekday, how it writes one value)
FIELDS = {
    "d": ("day", str), "dd": ("day", "{:02d}".format), "do": ("day", _ordinal), "dcn": ("day", _cn_number),
    "m": ("month", str), "mm": ("month", "{:02d}".format), "mcn": ("month", _cn_number),
    "B": ("month", lambda m: MONTHS[m - 1]), "b": ("month", lambda m: MONTHS[m - 1][:3]),
    "BU": ("month", lambda m: MONTHS[m - 1].upper()), "bl": ("month", lambda m: MONTHS[m - 1][:3].lower()),
    "Y": ("year", str), "Ycn": ("year", lambda y: "".join(CN_DIGITS[int(c)] for c in str(y))),
    "A": ("weekday", lambda w: WEEKDAYS[w]), "a": ("weekday", lambda w: WEEKDAYS[w][:3]),
    "Acn": ("weekday", lambda w: "星期" + CN_WEEKDAYS[w]),
}
_FIELD_VALUES = {"day": range(1, 32), "month": range(1, 13), "year": range(FIRST_DAY.year, LAST_DAY.year + 1),
                 "weekday": range(7)}

# The human formats (template → example for 2026-11-22).
FORMATS = [
    "{d} {B} {Y}",              # 22 November 2026
    "{d} {b} {Y}",              # 22 Nov 2026
    "{b} {d}, {Y}",             # Nov 22, 2026
    "{b}. {d}, {Y}",            # Nov. 22, 2026
    "{B} {d}, {Y}",             # November 22, 2026
    "{bl} {d} {Y}",             # nov 22 2026
    "{BU} {d}, {Y}",            # NOVEMBER 22, 2026
    "{dd}/{mm}/{Y}",            # 22/11/2026 (day first, as in most of the world)
    "{d}/{m}/{Y}",              # 22/11/2026, 5/3/2026
    "{dd}.{mm}.{Y}",            # 22.11.2026
    "{Y}/{mm}/{dd}",            # 2026/11/22
    "{dd}-{b}-{Y}",             # 22-Nov-2026
    "{A}, {B} {d}, {Y}",        # Sunday, November 22, 2026
    "{A} {d} {B} {Y}",          # Sunday 22 November 2026
    "{a}, {d} {b} {Y}",         # Sun, 22 Nov 2026
    "{do} {B} {Y}",             # 22nd November 2026
    "{B} {do}, {Y}",            # November 22nd, 2026
    "the {do} of {B}, {Y}",     # the 22nd of November, 2026
    "{Y}年{m}月{d}日",           # 2026年11月22日
    "{Y}年{mm}月{dd}日",         # 2026年11月22日, 2026年03月05日
    "{Y}年{m}月{d}号",           # 2026年11月22号 (spoken style)
    "{Y}年{m}月{d}日{Acn}",      # 2026年11月22日星期日
    "{Ycn}年{mcn}月{dcn}日",     # 二〇二六年十一月二十二日
]
ISO_FORMAT = "{Y}-{mm}-{dd}"


def _pieces(template: str) -> list[tuple[str, str | None]]:
    """A template cut into (literal, None) and ("", field) pieces."""
    out = []
    for literal, field, _, _ in string.Formatter().parse(template):
        if literal:
            out.append((literal, None))
        if field is not None:
            if field not in FIELDS:
                raise ValueError(f"unknown date field {{{field}}} in {template!r}")
            out.append(("", field))
    return out


def render(day: dt.date, template: str) -> str:
    """The reference: ``day`` written with ``template`` (one of `FORMATS`, or `ISO_FORMAT`)."""
    values = {"day": day.day, "month": day.month, "year": day.year, "weekday": day.weekday()}
    return "".join(lit if field is None else FIELDS[field][1](values[FIELDS[field][0]])
                   for lit, field in _pieces(template))


def _charset() -> str:
    pieces = {lit for t in (*FORMATS, ISO_FORMAT) for lit, f in _pieces(t) if f is None}
    pieces |= {write(v) for kind, write in FIELDS.values() for v in _FIELD_VALUES[kind]}
    return "".join(sorted(set("".join(pieces))))


DATE_VOCAB = Vocab(_charset())
_KINDS = ("none", "day", "month", "year", "weekday")  # column order of `_day_values`


class _PieceTable:
    """Every piece any of ``templates`` can produce, encoded once.

    ``base[f, k] + value[kind[f, k]]`` is the row of piece k of template f for a given date,
    where value holds (0, day − 1, month − 1, year − first year, weekday).
    """

    def __init__(self, templates: list[str]) -> None:
        rows: list[str] = [""]  # row 0: the empty piece that pads short templates
        index: dict[tuple, int] = {}
        specs = []
        for template in templates:
            spec = []
            for lit, field in _pieces(template):
                key = (lit,) if field is None else (field,)
                if key not in index:
                    index[key] = len(rows)
                    if field is None:
                        rows.append(lit)
                    else:
                        kind, write = FIELDS[field]
                        rows.extend(write(v) for v in _FIELD_VALUES[kind])
                spec.append((index[key], 0 if field is None else _KINDS.index(FIELDS[field][0])))
            specs.append(spec)
        n_pieces = max(map(len, specs))
        self.base = torch.tensor([[b for b, _ in s] + [0] * (n_pieces - len(s)) for s in specs])  # (F, K)
        self.kind = torch.tensor([[k for _, k in s] + [0] * (n_pieces - len(s)) for s in specs])  # (F, K)
        self.tokens = DATE_VOCAB.encode_batch(rows)  # (P, L)
        self.lengths = torch.tensor([len(r) for r in rows])  # (P,)
        # The widest string any template writes: the static width of every batch.
        longest_piece = torch.zeros(len(specs), n_pieces, dtype=torch.long)
        for kind_id, kind in enumerate(_KINDS):
            span = len(_FIELD_VALUES[kind]) if kind != "none" else 1
            offsets = torch.arange(span)
            widest = self.lengths[(self.base[..., None] + offsets).clamp(max=len(rows) - 1)].amax(-1)  # (F, K)
            longest_piece = torch.where(self.kind == kind_id, widest, longest_piece)
        self.width = int(longest_piece.sum(1).max())

    def assemble(self, template_ids: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """(B,) template ids and (B, 5) field values → (B, width) ids, right-padded."""
        # index_select rather than fancy indexing: many times faster on CPU for these sizes
        base, kind = self.base.index_select(0, template_ids), self.kind.index_select(0, template_ids)  # (B, K)
        piece = (base + values.gather(1, kind)).flatten()  # (B·K,)
        tokens = self.tokens.index_select(0, piece).view(*base.shape, -1)  # (B, K, L)
        lengths = self.lengths.index_select(0, piece).view(base.shape)  # (B, K)
        starts = lengths.cumsum(1) - lengths  # (B, K): where each piece begins
        offsets = torch.arange(tokens.shape[-1])  # (L,)
        position = starts[..., None] + offsets  # (B, K, L)
        # Characters past a piece's end go to a spare last column, dropped afterwards.
        position = torch.where(offsets < lengths[..., None], position, self.width)
        out = torch.full((len(template_ids), self.width + 1), PAD_ID, dtype=torch.long)
        out.scatter_(1, position.flatten(1), tokens.flatten(1))  # (B, width + 1)
        return out[:, : self.width]


class DateTask(Task):
    """Human-written dates → ISO 8601 "YYYY-MM-DD".

    Args:
        formats: templates to draw from (default: all of `FORMATS`).
        eval_fraction: share of the days held out for evaluation.
    Raises:
        ValueError: an unknown field in a template, or eval_fraction outside (0, 1).
    """

    name = "dates"
    kind = "seq2seq"
    vocab = DATE_VOCAB
    max_answer_len = len("2026-11-22") + 1  # and <eos>

    def __init__(self, formats: list[str] | None = None, eval_fraction: float = 0.1) -> None:
        if not 0.0 < eval_fraction < 1.0:
            raise ValueError(f"eval_fraction must lie in (0, 1), got {eval_fraction}")
        self.formats = list(FORMATS if formats is None else formats)
        self.eval_fraction = eval_fraction
        self._sources = _PieceTable(self.formats)
        self._iso = _PieceTable([ISO_FORMAT])
        self.src_width = self._sources.width
        ordinals = torch.arange(FIRST_DAY.toordinal(), LAST_DAY.toordinal() + 1)
        days = [dt.date.fromordinal(o) for o in ordinals.tolist()]
        self._values = torch.tensor(  # (N, 5), the columns of _KINDS
            [[0, d.day - 1, d.month - 1, d.year - FIRST_DAY.year, d.weekday()] for d in days])
        in_eval = heldout_hash(ordinals[:, None]) < 1000 * eval_fraction
        self._days = {"train": torch.nonzero(~in_eval)[:, 0], "eval": torch.nonzero(in_eval)[:, 0]}
        self.first_ordinal = FIRST_DAY.toordinal()

    def days(self, split: str) -> list[dt.date]:
        """Every date of ``split``."""
        self.check_split(split)
        return [dt.date.fromordinal(self.first_ordinal + i) for i in self._days[split].tolist()]

    def encode_source(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Typed dates → src (B, S) ids and src_mask (B, S), as the model was trained on."""
        src = self.vocab.encode_batch(texts, width=max(self.src_width, *map(len, texts)))
        return src, src != PAD_ID

    def sample(self, n: int, generator: torch.Generator, split: str = "train") -> Batch:
        self.check_split(split)
        pool = self._days[split]
        day = pool.index_select(0, torch.randint(len(pool), (n,), generator=generator))  # (B,) day indices
        template = torch.randint(len(self.formats), (n,), generator=generator)  # (B,)
        return self._batch(self._values.index_select(0, day), template)

    def encode_dates(self, days: list[dt.date], format_ids: list[int]) -> Batch:
        """The batch for given dates, each written in ``self.formats[format_ids[i]]``.

        Raises:
            ValueError: a date outside FIRST_DAY..LAST_DAY or a format id out of range.
        """
        if any(not FIRST_DAY <= d <= LAST_DAY for d in days):
            raise ValueError(f"dates must lie between {FIRST_DAY} and {LAST_DAY}")
        if any(not 0 <= f < len(self.formats) for f in format_ids):
            raise ValueError(f"format ids must lie in [0, {len(self.formats)})")
        day = torch.tensor([d.toordinal() - self.first_ordinal for d in days], dtype=torch.long)
        return self._batch(self._values.index_select(0, day), torch.tensor(format_ids, dtype=torch.long))

    def _batch(self, values: torch.Tensor, template: torch.Tensor) -> Batch:
        """(B, 5) field values and (B,) template ids → the batch."""
        src = self._sources.assemble(template, values)  # (B, S)
        iso = self._iso.assemble(torch.zeros_like(template), values)  # (B, 10)
        bos = torch.full_like(iso[:, :1], BOS_ID)
        eos = torch.full_like(iso[:, :1], EOS_ID)
        return Batch(inp=torch.cat([bos, iso], 1), target=torch.cat([iso, eos], 1), src=src, src_mask=src != PAD_ID)
