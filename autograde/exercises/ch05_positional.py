"""Chapter 5 exercises — token embeddings, sinusoidal and learned positional encodings, RoPE.

    PE[p, 2i] = sin(p / 10000^(2i/D)),  PE[p, 2i+1] = cos(p / 10000^(2i/D))   (Vaswani et al. 2017, §3.5)
    X = Embedding(ids) · √D + PE                                                (§3.4)
    RoPE: rotate feature j with feature j + Dh/2 by p · base^(−2j/Dh)           (Su et al. 2021, rotate-half)

Each exercise is checked against `tfm_ref`; each `Mistake` is a broken version a student
plausibly writes, with the hint its failure gives (`tests/test_exercises.py` proves it).

Shapes: B batch · H heads · T positions · P table positions · D model width · Dh head width ·
V vocabulary · M max_len · O offset (positions already decoded).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

import tfm_ref

from ..checking import Call, Case, Exercise, FunctionAdapter, Mistake, ModuleAdapter, randn

__all__ = ["SINUSOIDAL", "TOKEN_EMBEDDING", "LEARNED", "ROPE", "EXERCISES"]


# --------------------------------------------------------------------------- 1. sinusoidal table

class _RaisesForOddWidth(FunctionAdapter):
    """For an odd ``D`` the outcome compared is whether the function raises ValueError.

    The framework compares outputs, and an exception is a failure; this adapter turns the
    outcome of an odd width into a word, so "no ValueError" is a comparable (and nameable) answer.
    """

    def reference(self, reference: Callable, dims, dtype: torch.dtype) -> Callable:
        return self._outcome(reference, dims)

    def candidate(self, candidate: Callable, dims, weights: None, dtype: torch.dtype) -> Callable:
        return self._outcome(candidate, dims)

    @staticmethod
    def _outcome(fn: Callable, dims) -> Callable:
        if dims["D"] % 2 == 0:
            return fn

        def outcome(*args, **kwargs) -> str:
            try:
                fn(*args, **kwargs)
            except ValueError:
                return "raises ValueError"
            return "returns a table"
        return outcome


def _table_size(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["P"], dims["D"])


def _even_sizes(gen: torch.Generator) -> dict[str, int]:
    return {"P": int(torch.randint(1, 65, (1,), generator=gen)), "D": 2 * int(torch.randint(1, 17, (1,), generator=gen))}


def _sinusoid(n_positions: int, d_model: int, *, base: float = 10000.0, sine_base: float | None = None,
              exponent: Callable[[torch.Tensor, int], torch.Tensor] = lambda two_i, d: two_i / d,
              own_exponents: bool = False, degrees: bool = False, sin_first: bool = True, interleave: bool = True,
              dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The table with one of its ingredients changed, as the keywords say (what the broken versions share).

    ``sine_base``: another base for the sines only; ``own_exponents``: feature 2i + 1 takes the exponent
    (2i + 1)/d instead of sharing its pair's; ``degrees``: the angles read as degrees.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {d_model}")
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (P, 1)
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
    visible=[Case("a 50 × 16 table"), Case("the notes' example: pos 0…2, d_model = 4", dims=dict(P=3, D=4))],
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
    ],
)


# --------------------------------------------------------------------------- 3. learned positional encoding

def _embedded(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype), dims["O"])


class _LearnedNoOffset(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        return x + self.weight[: x.shape[-2]].to(x.dtype)


class _LearnedReplaces(tfm_ref.LearnedPositionalEncoding):
    def forward(self, x, offset=0):
        return self.weight[offset : offset + x.shape[-2]].to(x.dtype).expand_as(x)


LEARNED = Exercise(
    name="LearnedPositionalEncoding",
    key="learned",
    reference=tfm_ref.LearnedPositionalEncoding,
    adapter=ModuleAdapter(lambda dims: dict(d_model=dims["D"], max_len=dims["M"])),
    inputs=_embedded,
    arg_names=("x", "offset"),
    shapes=[dict(B=1, T=1, D=2, M=3, O=1), dict(B=1, T=2, D=2, M=4, O=2), dict(B=2, T=3, D=4, M=8, O=3)],
    offsets=("O",),
    visible=[Case("offset 0: positions 0 … T-1", dims=dict(B=2, T=3, D=4, M=8, O=0)),
             Case("offset 3: decoding continues at position 3")],
    hidden=[
        Case("one position at the end of the table", dims=dict(B=2, T=1, D=8, M=6, O=5)),
        Case("the whole table", dims=dict(B=1, T=7, D=4, M=7, O=0)),
        Case("float64", dtype=torch.float64),
        Case("gradients reach the table", grad=True),
    ],
    mistakes=[
        Mistake("offset ignored", _LearnedNoOffset,
                "with offset = k the T inputs sit at positions k … k + T − 1; you added the rows of positions "
                "0 … T − 1.",
                "add self.weight[offset : offset + T]."),
        Mistake("the encoding replaces x instead of being added", _LearnedReplaces,
                "the positional encoding is added to the token vectors; you returned the encoding alone.",
                "return x + self.weight[offset : offset + T]."),
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


ROPE = Exercise(
    name="apply_rope",
    key="rope",
    reference=tfm_ref.apply_rope,
    inputs=_rope_inputs,
    arg_names=("x", "positions"),
    shapes=[dict(B=1, H=1, T=1, Dh=2, O=1), dict(B=1, H=1, T=2, Dh=2, O=1), dict(B=1, H=1, T=2, Dh=4, O=3),
            dict(B=2, H=2, T=4, Dh=8, O=5)],
    offsets=("O",),
    visible=[Case("queries (B, H, T, Dh) at positions 5 … 8")],
    hidden=[
        Case("random sizes and offsets", dims=_rope_sizes),
        Case("one position", dims=dict(B=2, H=3, T=1, Dh=8, O=7)),
        Case("x (T, Dh) with no batch or head axes", inputs=_rope_unbatched),
        Case("base = 500", inputs=_rope_base_500),
        Case("scattered positions", inputs=_rope_scattered, dims=dict(B=1, H=2, T=6, Dh=16, O=0)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
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
    ],
    atol=1e-4,  # angles of tens of radians carry float32 rounding of ~1e-5
    rtol=1e-4,
)

EXERCISES = (SINUSOIDAL, TOKEN_EMBEDDING, LEARNED, ROPE)
