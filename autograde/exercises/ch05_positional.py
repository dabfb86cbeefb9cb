"""Chapter 5 exercises — token embeddings, sinusoidal and learned positional encodings, RoPE.

    PE[p, 2i] = sin(p / 10000^(2i/D)),  PE[p, 2i+1] = cos(p / 10000^(2i/D))   (Vaswani et al. 2017, §3.5)
    X = Embedding(ids) · √D + PE                                                (§3.4)
    RoPE: rotate feature j with feature j + Dh/2 by p · base^(−2j/Dh)           (Su et al. 2021, rotate-half)

Each exercise is checked against `tfm_ref`; each `Mistake` is a broken version a student
plausibly writes, with the hint its failure gives (`tests/test_exercises.py` proves it).

Shapes: B batch · H heads · T positions · P table positions · D model width · Dh head width ·
V vocabulary · O offset (positions already decoded) · S spare rows of the learned table past the input
(max_len = O + T + S).

O and S are not on the shrink ladders but are named by every case that uses them: a failing input is
shrunk in its sizes only, so it keeps the place its case's label describes (offset 0, the end of the table).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

import tfm_ref

from ..spec import Call, Case, Exercise, FunctionAdapter, Mistake, ModuleAdapter, randn

__all__ = ["SINUSOIDAL", "TOKEN_EMBEDDING", "LEARNED", "ROPE", "EXERCISES"]


# --------------------------------------------------------------------------- 1. sinusoidal table

class _RaisesForOddWidth(FunctionAdapter):
    """For an odd ``D`` the outcome compared is whether the function raises ValueError.

    The framework compares outputs, and an exception is a failure; this adapter turns the
    outcome of an odd width into a word, so "no ValueError" is a comparable (and nameable) answer.
    """

    def plan(self, dims) -> dict:
        if dims["D"] % 2 == 0:
            return super().plan(dims)
        return {"kind": "raises", "error": "ValueError", "raised": "raises ValueError", "returned": "returns a table"}


def _table_size(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["P"], dims["D"])


def _even_sizes(gen: torch.Generator) -> dict[str, int]:
    return {"P": int(torch.randint(1, 65, (1,), generator=gen)), "D": 2 * int(torch.randint(1, 17, (1,), generator=gen))}


def _sinusoid(n_positions: int, d_model: int, *, base: float = 10000.0, sine_base: float | None = None,
              exponent: Callable[[torch.Tensor, int], torch.Tensor] = lambda two_i, d: two_i / d,
              own_exponents: bool = False, degrees: bool = False, sin_first: bool = True, interleave: bool = True,
              first_position: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The table with one of its ingredients changed, as the keywords say (what the broken versions share).

    ``sine_base``: another base for the sines only; ``own_exponents``: feature 2i + 1 takes the exponent
    (2i + 1)/d instead of sharing its pair's; ``degrees``: the angles read as degrees; ``first_position``: the
    position of row 0.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {d_model}")
    position = torch.arange(first_position, first_position + n_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    unit = math.pi / 180 if degrees else 1.0
    sin_angle = unit * position / (sine_base or base) ** exponent(two_i, d_model)  # (P, D/2)
    cos_angle = unit * position / base ** exponent(two_i + 1 if own_exponents else two_i, d_model)  # (P, D/2)
    first, second = (sin_angle.sin(), cos_angle.cos()) if sin_first else (cos_angle.cos(), sin_angle.sin())
    if interleave:
        pe = torch.stack([first, second], dim=-1).reshape(n_positions, -1)  # (P, D/2, 2) → (P, D)
    else:
        pe = torch.cat([first, second], dim=-1)  # (P, D): all sines, then all cosines
    return pe.to(dtype)


def _pe_swapped(n_positions, d_model):
    return _sinusoid(n_positions, d_model, sin_first=False)


def _pe_base_1000(n_positions, d_model):
    return _sinusoid(n_positions, d_model, base=1000.0)


def _pe_notes_bases(n_positions, d_model):
    return _sinusoid(n_positions, d_model, sine_base=1000.0)  # the data-flow notes' formula


def _pe_exponent_i(n_positions, d_model):
    return _sinusoid(n_positions, d_model, exponent=lambda two_i, d: two_i / 2 / d)


def _pe_exponent_4i(n_positions, d_model):
    return _sinusoid(n_positions, d_model, exponent=lambda two_i, d: 2 * two_i / d)


def _pe_from_position_1(n_positions, d_model):
    return _sinusoid(n_positions, d_model, first_position=1)


def _pe_multiplied(n_positions, d_model):
    return _sinusoid(n_positions, d_model, exponent=lambda two_i, d: -two_i / d)  # pos · 10000^(2i/d)


def _pe_own_exponents(n_positions, d_model):
    return _sinusoid(n_positions, d_model, own_exponents=True)


def _pe_degrees(n_positions, d_model):
    return _sinusoid(n_positions, d_model, degrees=True)


def _pe_halves(n_positions, d_model):
    return _sinusoid(n_positions, d_model, interleave=False)


def _pe_float64(n_positions, d_model):
    return _sinusoid(n_positions, d_model, dtype=torch.float64)


def _pe_no_odd_check(n_positions, d_model):
    even = d_model + d_model % 2  # builds a table for the next even width and cuts it
    return _sinusoid(n_positions, even)[:, :d_model]


SINUSOIDAL = Exercise(
    name="sinusoidal_positional_encoding",
    key="sinusoidal",
    reference=tfm_ref.sinusoidal_positional_encoding,
    inputs=_table_size,
    arg_names=("n_positions", "d_model"),
    adapter=_RaisesForOddWidth(),
    shapes=[dict(P=1, D=2), dict(P=2, D=2), dict(P=3, D=4), dict(P=4, D=6), dict(P=50, D=16)],
    # the small table first: a wrong formula is diagnosed there, where its angles stay small enough that float32
    # and float64 versions of it agree (multiplied by 10000^(2i/d), a 50 × 16 table reaches 10⁵ radians)
    # the notebook asks for a ValueError on an odd d_model
    visible=[Case("the notes' example: pos 0…2, d_model = 4", dims=dict(P=3, D=4)), Case("a 50 × 16 table"),
             Case("odd d_model raises ValueError", dims=dict(P=4, D=5))],
    hidden=[
        Case("random sizes", dims=_even_sizes),
        Case("one position", dims=dict(P=1, D=8)),
        Case("d_model = 2 (one sin/cos pair)", dims=dict(P=20, D=2)),
        Case("far positions, wide model", dims=dict(P=200, D=64)),
        Case("odd d_model raises ValueError", dims=dict(P=4, D=5)),
    ],
    mistakes=[
        Mistake("sin and cos swapped", _pe_swapped,
                "sin goes on the even features (0, 2, 4, …) and cos on the odd ones; yours are the other way "
                "round.",
                "PE[p, 2i] = sin(…) and PE[p, 2i+1] = cos(…): pe[:, 0::2] = sin, pe[:, 1::2] = cos."),
        Mistake("wrong base (1000)", _pe_base_1000,
                "the wavelengths grow geometrically up to 10000·2π; with 1000 they stop ten times too soon.",
                "the base is 10000: position / 10000 ** (2i / d_model)."),
        Mistake("the notes' formula: base 1000 in the sine, 10000 in the cosine", _pe_notes_bases,
                "the sine and the cosine of a pair must share one frequency (so that PE(pos + k) is a rotation "
                "of PE(pos)); with two bases they do not.",
                "the same base, 10000, in both: sin(pos / 10000^(2i/d)) and cos(pos / 10000^(2i/d))."),
        Mistake("positions counted from 1", _pe_from_position_1,
                "row p of the table is position p, and the first token is at position 0: row 0 is sin 0 = 0 on "
                "the even features and cos 0 = 1 on the odd ones. Your rows start at position 1.",
                "position = torch.arange(n_positions), not torch.arange(1, n_positions + 1)."),
        Mistake("multiplied by 10000^(2i/d) instead of divided", _pe_multiplied,
                "the frequencies fall from 1 (pair 0) to nearly 1/10000 (the last pair), so the wavelengths grow "
                "from 2π to about 10000·2π. Multiplying makes the frequencies grow instead: the last pairs turn "
                "by hundreds or thousands of radians per position.",
                "angle = position / 10000 ** (2i / d_model); in the exp form, "
                "torch.exp(two_i * (-math.log(10000.0) / d_model)), with the minus sign."),
        Mistake("exponent i/d instead of 2i/d", _pe_exponent_i,
                "for the pair (2i, 2i+1) the exponent is 2i/d_model, the index of its even feature over d_model; "
                "you divided the pair's index i by d_model.",
                "10000 ** (2 * i / d_model) with i = 0 … d/2 − 1 (or torch.arange(0, d_model, 2) / d_model)."),
        Mistake("exponent 4i/d instead of 2i/d", _pe_exponent_4i,
                "for the pair (2i, 2i+1) the exponent is 2i/d_model; you doubled an index that already counts "
                "in steps of 2 (torch.arange(0, d_model, 2) is 2i, not i).",
                "10000 ** (torch.arange(0, d_model, 2) / d_model), without a second factor 2."),
        Mistake("each feature its own exponent: (2i+1)/d for the cosine", _pe_own_exponents,
                "the two features of a pair share one frequency: the cosine at feature 2i + 1 uses the exponent "
                "2i/d of its pair, not (2i + 1)/d.",
                "compute one angle per pair, pos / 10000^(2i/d), and take its sin and its cos."),
        Mistake("angles in degrees", _pe_degrees,
                "the angles are in radians: sin 2 = 0.9093, not sin 2° = 0.0349.",
                "pass pos / 10000^(2i/d) to torch.sin and torch.cos as it is, without a factor π/180."),
        Mistake("all sines first, then all cosines", _pe_halves,
                "that is another valid layout (tensor2tensor's), but the paper and tfm_ref interleave: sin on "
                "the even features, cos on the odd ones.",
                "pe[:, 0::2] = sines and pe[:, 1::2] = cosines, instead of concatenating the two halves."),
        Mistake("table left in float64", _pe_float64,
                "the exercise asks for a float32 table (the dtype of the model's embeddings); yours is float64.",
                "compute in float64 if you like, and return pe.float()."),
        Mistake("no ValueError for odd d_model", _pe_no_odd_check,
                "sin and cos come in pairs, so an odd d_model has no valid table; yours returns one.",
                "if d_model % 2: raise ValueError(...)."),
    ],
    atol=5e-5,  # float32 angles of far positions differ by ~1e-5 between correct formulas
)


# --------------------------------------------------------------------------- 2. token embedding × √D

def _ids(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(torch.randint(0, dims["V"], (dims["B"], dims["T"]), generator=gen))


class _EmbeddingUnscaled(tfm_ref.TokenEmbedding):
    def forward(self, ids):
        return self.weight[ids]


class _EmbeddingDividedByRoot(tfm_ref.TokenEmbedding):
    def forward(self, ids):
        return self.weight[ids] / math.sqrt(self.weight.shape[1])


class _EmbeddingTimesWidth(tfm_ref.TokenEmbedding):
    def forward(self, ids):
        return self.weight[ids] * self.weight.shape[1]


class _EmbeddingRootOfVocabulary(tfm_ref.TokenEmbedding):
    def forward(self, ids):
        return self.weight[ids] * math.sqrt(self.weight.shape[0])


TOKEN_EMBEDDING = Exercise(
    name="TokenEmbedding",
    key="token_embedding",
    reference=tfm_ref.TokenEmbedding,
    adapter=ModuleAdapter(lambda dims: dict(vocab_size=dims["V"], d_model=dims["D"])),
    inputs=_ids,
    arg_names=("ids",),
    shapes=[dict(B=1, T=1, V=3, D=2), dict(B=1, T=3, V=5, D=4), dict(B=2, T=5, V=11, D=16)],
    visible=[Case("ids (B, T) → vectors (B, T, D)")],
    hidden=[
        Case("one token", dims=dict(B=1, T=1, V=7, D=8)),
        Case("wide model (√D = 16)", dims=dict(B=2, T=3, V=9, D=256)),
        Case("gradients reach the table", grad=True),
    ],
    mistakes=[
        Mistake("embedding not scaled by √d_model", _EmbeddingUnscaled,
                "the paper multiplies the looked-up vectors by √d_model (§3.4): the table's entries are small, "
                "and without the factor the positional encoding drowns the token. Scaling the table in "
                "__init__ does not count: the check loads tfm_ref's table into `weight`, as a checkpoint would.",
                "in forward: return self.weight[ids] * math.sqrt(d_model)."),
        Mistake("divided by √d_model instead of multiplied", _EmbeddingDividedByRoot,
                "the paper multiplies the embedding by √d_model; you divided.",
                "* math.sqrt(d_model), not / math.sqrt(d_model)."),
        Mistake("scaled by d_model instead of √d_model", _EmbeddingTimesWidth,
                "the factor is the square root of d_model, not d_model itself.",
                "* math.sqrt(d_model)."),
        Mistake("scaled by √vocab_size instead of √d_model", _EmbeddingRootOfVocabulary,
                "the factor is the square root of the model width d_model, the length of each vector (§3.4); "
                "the vocabulary size is the number of rows of the table and has nothing to do with it.",
                "* math.sqrt(d_model), the second argument of __init__ (keep it: self.scale = math.sqrt(d_model))."),
    ],
)


# --------------------------------------------------------------------------- 3. learned positional encoding

def _embedded(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype), dims["O"])


def _max_len(dims) -> int:
    """The table holds the O positions already decoded, the T of the input and S spare ones."""
    return dims["O"] + dims["T"] + dims["S"]


class _LearnedNoOffset(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        return x + self.weight[: x.shape[-2]].to(x.dtype)


class _LearnedReplaces(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        return self.weight[offset : offset + x.shape[-2]].to(x.dtype).expand_as(x)


class _LearnedRowsShifted(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        return x + self.weight[offset + 1 : offset + x.shape[-2] + 1].to(x.dtype)


class _LearnedSliceEndsAtT(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        return x + self.weight[offset : x.shape[-2]].to(x.dtype)  # T − offset rows: one broadcasts, none is empty


class _LearnedRowPerSequence(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        rows = self.weight[offset : offset + x.shape[0]].to(x.dtype)  # (B, D): one row per sequence
        return x + rows[:, None, :]  # the same vector at every position of a sequence


_LEARNED_LARGEST = dict(B=2, T=3, D=4)


LEARNED = Exercise(
    name="LearnedPositionalEncoding",
    key="learned",
    reference=tfm_ref.LearnedPositionalEncoding,
    adapter=ModuleAdapter(lambda dims: dict(d_model=dims["D"], max_len=_max_len(dims))),
    inputs=_embedded,
    arg_names=("x", "offset"),
    shapes=[dict(B=1, T=1, D=2), dict(B=1, T=2, D=2), _LEARNED_LARGEST],
    visible=[Case("offset 0: positions 0 … T-1", dims={**_LEARNED_LARGEST, "O": 0, "S": 5}),
             # T = 4 > offset + 1: a slice that ends at T (not offset + T) still adds one row, and is compared
             Case("offset 3: decoding continues at position 3", dims=dict(B=2, T=4, D=4, O=3, S=1))],
    hidden=[
        Case("one position at the end of the table", dims=dict(B=2, T=1, D=8, O=5, S=0)),
        Case("the whole table", dims=dict(B=1, T=7, D=4, O=0, S=0)),
        Case("float64", dims={**_LEARNED_LARGEST, "O": 3, "S": 2}, dtype=torch.float64),
        Case("gradients reach the table", dims={**_LEARNED_LARGEST, "O": 3, "S": 2}, grad=True),
    ],
    mistakes=[
        Mistake("offset ignored", _LearnedNoOffset,
                "with offset = k the T inputs sit at positions k … k + T − 1; you added the rows of positions "
                "0 … T − 1.",
                "add self.weight[offset : offset + T]."),
        Mistake("the encoding replaces x instead of being added", _LearnedReplaces,
                "the positional encoding is added to the token vectors; you returned the encoding alone.",
                "return x + self.weight[offset : offset + T]."),
        Mistake("rows shifted by one (position p reads row p + 1)", _LearnedRowsShifted,
                "row p of the table is the vector of position p, counted from 0: the T inputs take rows offset … "
                "offset + T − 1. Yours take the rows one further on (and run past the end of a full table).",
                "self.weight[offset : offset + T], with no + 1 on either end."),
        Mistake("slice ends at T instead of offset + T", _LearnedSliceEndsAtT,
                "the slice's end is an index into the table, like its start: the rows of positions offset … "
                "offset + T − 1 end at offset + T. Ending at T leaves T − offset rows (none once offset ≥ T), "
                "which is right only at offset 0.",
                "self.weight[offset : offset + T], not self.weight[offset : T]."),
        Mistake("one row per sequence: rows counted along the batch axis", _LearnedRowPerSequence,
                "x is (B, T, D): the positions are axis 1 (or −2), axis 0 is the batch. Rows taken by x.shape[0] "
                "give each sequence one vector, the same at all its positions, so nothing tells the positions "
                "apart.",
                "T = x.shape[-2]; add self.weight[offset : offset + T], (T, D), which broadcasts over the batch."),
    ],
)


# --------------------------------------------------------------------------- 4. RoPE

def _rope_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x = randn(gen, dims["B"], dims["H"], dims["T"], dims["Dh"], dtype=dtype)
    return Call(x, torch.arange(dims["O"], dims["O"] + dims["T"]))


def _rope_unbatched(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    """One head of one sequence, (T, Dh): the exercise promises (…, T, Dh), not four axes."""
    x, positions = _rope_inputs(gen, dims, dtype).args
    return Call(x[0, 0], positions)


def _rope_base_500(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*_rope_inputs(gen, dims, dtype).args, base=500.0)


def _rope_base_500000(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(*_rope_inputs(gen, dims, dtype).args, base=500000.0)  # Llama 3's setting


def _rope_scattered(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x = randn(gen, dims["B"], dims["H"], dims["T"], dims["Dh"], dtype=dtype)
    return Call(x, torch.randperm(40, generator=gen)[: dims["T"]].sort().values)


def _rope_sizes(gen: torch.Generator) -> dict[str, int]:
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=gen))  # noqa: E731
    return {"B": draw(1, 3), "H": draw(1, 4), "T": draw(1, 9), "Dh": 2 * draw(1, 8), "O": draw(0, 20)}


def _angles(positions: torch.Tensor, head_dim: int, base: float, two: int = 2) -> torch.Tensor:
    inv_freq = base ** (-two * torch.arange(head_dim // 2, dtype=torch.float32) / head_dim)  # (Dh/2,)
    return positions.float()[:, None] * inv_freq  # (T, Dh/2)


def _rotate_halves(x: torch.Tensor, angle: torch.Tensor, sign: float = 1.0) -> torch.Tensor:
    first, second = x.float().chunk(2, dim=-1)  # (…, T, Dh/2) each
    cos, sin = angle.cos(), sign * angle.sin()
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).to(x.dtype)


def _rope_interleaved(x, positions, base=10000.0):
    angle = _angles(positions, x.shape[-1], base)  # (T, Dh/2)
    pairs = x.float().unflatten(-1, (-1, 2))  # (…, T, Dh/2, 2): features (2j, 2j+1)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack([even * angle.cos() - odd * angle.sin(), odd * angle.cos() + even * angle.sin()], -1)
    return rotated.flatten(-2).to(x.dtype)  # (…, T, Dh)


def _rope_angles_repeated_per_pair(x, positions, base=10000.0):
    """θ0, θ0, θ1, θ1, … (the interleaved layout's angles) with the rotate-half pairing."""
    angle = _angles(positions, x.shape[-1], base).repeat_interleave(2, dim=-1)  # (T, Dh)
    first, second = x.float().chunk(2, dim=-1)
    rotated = torch.cat([-second, first], dim=-1)
    return (x.float() * angle.cos() + rotated * angle.sin()).to(x.dtype)


def _rope_wrong_sign(x, positions, base=10000.0):
    return _rotate_halves(x, _angles(positions, x.shape[-1], base), sign=-1.0)


def _rope_positions_ignored(x, positions, base=10000.0):
    return _rotate_halves(x, _angles(torch.arange(x.shape[-2]), x.shape[-1], base))


def _rope_exponent_j(x, positions, base=10000.0):
    return _rotate_halves(x, _angles(positions, x.shape[-1], base, two=1))


def _rope_exponent_positive(x, positions, base=10000.0):
    return _rotate_halves(x, _angles(positions, x.shape[-1], base, two=-2))  # base^(+2j/Dh)


def _rope_positions_plus_one(x, positions, base=10000.0):
    return _rotate_halves(x, _angles(positions + 1, x.shape[-1], base))


def _rope_base_ignored(x, positions, base=10000.0):
    return _rotate_halves(x, _angles(positions, x.shape[-1], 10000.0))  # whatever the caller passed


def _rope_table_transposed(x, positions, base=10000.0):
    """The angle table built (Dh/2, T): it broadcasts against x only where T = Dh/2 (and gives wrong angles
    there); elsewhere it raises, with the message the usual x·cos + rotate_half(x)·sin gives."""
    head_dim = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (Dh/2,)
    angle = inv_freq[:, None] * positions.float()[None, :]  # (Dh/2, T)
    angle = torch.cat([angle, angle], dim=-1)  # (Dh/2, 2T)
    xf = x.float()
    first, second = xf.chunk(2, dim=-1)
    return (xf * angle.cos() + torch.cat([-second, first], dim=-1) * angle.sin()).to(x.dtype)


_ROPE_LARGEST = dict(B=2, H=2, T=4, Dh=8)
_ROPE_FROM_5 = {**_ROPE_LARGEST, "O": 5}


ROPE = Exercise(
    name="apply_rope",
    key="rope",
    reference=tfm_ref.apply_rope,
    inputs=_rope_inputs,
    arg_names=("x", "positions"),
    shapes=[dict(B=1, H=1, T=1, Dh=2), dict(B=1, H=1, T=2, Dh=2), dict(B=1, H=1, T=2, Dh=4), _ROPE_LARGEST],
    # T = Dh/2 in the first case and not in the second: an angle table built (Dh/2, T) gives wrong values in the
    # first (which name the mistake), and a table sized by T where Dh/2 belongs fails the second. The first is
    # small (angles below 10³ radians even with growing frequencies), so float32 versions of a wrong formula
    # computed in other ways agree with its catalogued version there. The third passes another base, so a base
    # written in as 10000 shows before grading (the hidden "base = 500" case tries a smaller one).
    visible=[Case("queries (B, H, T, Dh) from position 5", dims=dict(B=2, H=2, T=2, Dh=4, O=5)),
             Case("keys of a prompt, from position 0", dims=dict(B=1, H=2, T=6, Dh=8, O=0)),
             Case("base = 500000 (Llama 3's setting)", dims=dict(B=1, H=2, T=3, Dh=8, O=4), inputs=_rope_base_500000)],
    hidden=[
        Case("random sizes and offsets", dims=_rope_sizes),
        Case("one position", dims=dict(B=2, H=3, T=1, Dh=8, O=7)),
        Case("x (T, Dh) with no batch or head axes", dims=_ROPE_FROM_5, inputs=_rope_unbatched),
        Case("base = 500", dims=_ROPE_FROM_5, inputs=_rope_base_500),
        Case("scattered positions", inputs=_rope_scattered, dims=dict(B=1, H=2, T=6, Dh=16, O=0)),
        Case("float64", dims=_ROPE_FROM_5, dtype=torch.float64),
        Case("gradients", dims=_ROPE_FROM_5, grad=True),
    ],
    mistakes=[
        Mistake("interleaved pairs instead of rotate-half", _rope_interleaved,
                "tfm_ref (like Llama's Hugging Face code and GPT-NeoX) pairs feature j with feature j + Dh/2; "
                "you paired feature 2j with 2j + 1 (the RoFormer layout).",
                "split x into halves, x1, x2 = x.chunk(2, dim=-1), and rotate with cat([-x2, x1], dim=-1)."),
        Mistake("angles of the interleaved layout with rotate-half pairs", _rope_angles_repeated_per_pair,
                "rotate-half pairs feature j with feature j + Dh/2, so those two share the angle θ_j: the angles "
                "run θ0 … θ(Dh/2−1) twice over. Yours run θ0, θ0, θ1, θ1, …, the RoFormer layout's, where "
                "features 2j and 2j + 1 are the pair.",
                "angle = torch.cat([angle, angle], dim=-1), not angle.repeat_interleave(2, dim=-1)."),
        Mistake("rotation by −θ (wrong sign)", _rope_wrong_sign,
                "your rotation turns the other way: the first half must get x₁cos θ − x₂sin θ and the second "
                "x₂cos θ + x₁sin θ.",
                "x·cos θ + rotate_half(x)·sin θ with rotate_half(x) = cat([-x2, x1], dim=-1)."),
        Mistake("positions ignored (always 0 … T-1)", _rope_positions_ignored,
                "with a KV cache the new tokens sit at positions past the cached ones; you rotated them as if "
                "they were at 0 … T − 1.",
                "angle = positions.float()[:, None] * inv_freq[None, :], from the `positions` argument."),
        Mistake("frequencies base^(−j/Dh) instead of base^(−2j/Dh)", _rope_exponent_j,
                "pair j turns at θ_j = base^(−2j/Dh), j = 0 … Dh/2 − 1 (the frequencies of the sinusoidal "
                "table); yours turn too slowly.",
                "inv_freq = base ** (-torch.arange(0, Dh, 2) / Dh)."),
        Mistake("frequencies base^(+2j/Dh) instead of base^(−2j/Dh)", _rope_exponent_positive,
                "the frequencies fall from 1 (pair 0) towards 1/base, as in the sinusoidal table; with a "
                "positive exponent they grow instead, and the last pairs spin by hundreds of radians or more per "
                "position.",
                "inv_freq = base ** (-torch.arange(0, Dh, 2) / Dh) (or 1.0 / base ** (torch.arange(0, Dh, 2) / Dh))."),
        Mistake("positions shifted by one", _rope_positions_plus_one,
                "the token at position p turns by p · θ_j, and the first position is 0 (no rotation); yours "
                "turn by (p + 1) · θ_j. The `positions` argument already holds each token's position.",
                "angle = positions.float()[:, None] * inv_freq[None, :], with the positions as given."),
        Mistake("base argument ignored (always 10000)", _rope_base_ignored,
                "the caller chooses the base (this case passes base=500000, as Llama 3 does), and yours uses "
                "10000 whatever it is given, so every pair but the first turns at the wrong speed.",
                "use the parameter: inv_freq = base ** (-torch.arange(0, Dh, 2) / Dh), with no number written in "
                "place of base."),
        Mistake("angle table transposed: (Dh/2, T) instead of (T, Dh/2)", _rope_table_transposed,
                "the angle of position t and pair j belongs at row t, column j, a (T, Dh/2) table that "
                "broadcasts over x's (…, T, Dh). Yours is (Dh/2, T): it broadcasts only when T = Dh/2, and then "
                "puts each angle in the other's place.",
                "angle = positions.float()[:, None] * inv_freq[None, :] (positions down, frequencies across)."),
    ],
    atol=1e-4,  # angles of tens of radians carry float32 rounding of ~1e-5
    rtol=1e-4,
)

EXERCISES = (SINUSOIDAL, TOKEN_EMBEDDING, LEARNED, ROPE)
