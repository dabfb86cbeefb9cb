"""Chapter 3 exercises — the look-ahead (causal) mask, the padding mask, combining them, and
shifted-right decoder inputs for teacher forcing.

One convention everywhere: a boolean mask, **True = may attend** (as in
``F.scaled_dot_product_attention``). `causal_mask` and `padding_mask` are checked against
`tfm_ref`; `attention_mask` and `shift_right` are not part of tfm_ref's contract, so their
references are written here (`attention_mask_reference`, `shift_right_reference`).
`tests/test_exercises.py` proves every check passes the reference and fails every mistake
with its hint.

Shapes: B batch · T query positions · S key positions.
"""
from __future__ import annotations

import torch

import tfm_ref

from ..spec import Call, Case, Exercise, Mistake, random_dims

__all__ = ["attention_mask_reference", "shift_right_reference", "CAUSAL_MASK", "PADDING_MASK", "ATTENTION_MASK",
           "SHIFT_RIGHT", "EXERCISES"]

# PyTorch's own look-ahead mask (a float mask, -inf above the diagonal).
TORCH_CAUSAL = (torch.nn.Transformer.generate_square_subsequent_mask,
                torch.nn.modules.transformer._generate_square_subsequent_mask)


# --------------------------------------------------------------------------- references not in tfm_ref

def attention_mask_reference(lengths: torch.Tensor, max_len: int, causal: bool = True) -> torch.Tensor:
    """The self-attention mask of a right-padded batch: padded keys blocked, and (``causal``)
    future keys blocked.

    Args:
        lengths: (B,) real tokens of each sequence.  max_len: the padded length T (= S).
        causal: add the look-ahead mask (decoder self-attention).
    Returns:
        bool (B, 1, T, T), True = may attend; broadcasts over the heads.
    """
    keys = tfm_ref.key_mask(tfm_ref.padding_mask(lengths, max_len))  # (B, 1, 1, S)
    allowed = tfm_ref.causal_mask(max_len) if causal else torch.ones(max_len, max_len, dtype=torch.bool)
    return keys & allowed  # (B, 1, T, S)


def shift_right_reference(targets: torch.Tensor, bos_id: int) -> torch.Tensor:
    """The decoder input for teacher forcing: ``<bos>`` then the targets but the last.

    Args:
        targets: (B, T) token ids.  bos_id: the id of ``<bos>``.
    Returns:
        (B, T), same dtype: position t holds target t - 1, position 0 holds ``bos_id``.
    """
    bos = targets.new_full((targets.shape[0], 1), bos_id)  # (B, 1)
    return torch.cat([bos, targets[:, :-1]], dim=1)  # (B, T)


# --------------------------------------------------------------------------- 1. causal_mask

def _square(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["T"])


def _square_both(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["T"], dims["T"])


def _rectangular(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["T"], dims["S"])


def _on_meta(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    """A rectangular mask asked for on PyTorch's meta device (shapes, no values): where a GPU's device would go."""
    return Call(dims["T"], dims["S"], device="meta")


def _ones(n_q: int, n_k: int | None) -> tuple[torch.Tensor, int]:
    n_k = n_q if n_k is None else n_k
    return torch.ones(n_q, n_k, dtype=torch.bool), n_k - n_q


def _longer_keys(gen: torch.Generator) -> dict[str, int]:
    """Random sizes with n_k ≥ n_q (the queries are the last positions)."""
    sizes = random_dims(T=(1, 8), extra=(0, 6))(gen)
    return dict(T=sizes["T"], S=sizes["T"] + sizes["extra"])


def _causal_upper(n_q, n_k=None, device=None):
    ones, offset = _ones(n_q, n_k)
    return ones.triu(diagonal=offset)


def _causal_inverted(n_q, n_k=None, device=None):
    return ~tfm_ref.causal_mask(n_q, n_k)


def _causal_no_diagonal(n_q, n_k=None, device=None):
    ones, offset = _ones(n_q, n_k)
    return ones.tril(diagonal=offset - 1)


def _causal_not_aligned(n_q, n_k=None, device=None):
    ones, _ = _ones(n_q, n_k)
    return ones.tril()


def _causal_shift_reversed(n_q, n_k=None, device=None):
    ones, offset = _ones(n_q, n_k)
    return ones.tril(diagonal=-offset)  # n_q − n_k: moved left when there are more keys


def _causal_everything(n_q, n_k=None, device=None):
    ones, offset = _ones(n_q, n_k)
    future = ones.long().triu(diagonal=offset + 1)  # 1 above the diagonal, as integers
    return (~future).bool()  # ~ on 0/1 integers gives -1/-2, both true: nothing is blocked


def _causal_float(n_q, n_k=None, device=None):
    return tfm_ref.causal_mask(n_q, n_k).float()


def _causal_on_the_cpu(n_q, n_k=None, device=None):
    return tfm_ref.causal_mask(n_q, n_k)  # device never passed on


CAUSAL_MASK = Exercise(
    name="causal_mask",
    reference=tfm_ref.causal_mask,
    inputs=_square,
    arg_names=("n_q", "n_k"),
    shapes=[dict(T=1, S=1), dict(T=1, S=2), dict(T=2, S=2), dict(T=2, S=3), dict(T=3, S=3), dict(T=3, S=6),
            dict(T=5, S=8)],
    visible=[Case("square mask (n_q = n_k = 5)"), Case("queries are the last 3 of 6 positions", dims=dict(T=3, S=6),
                                                      inputs=_rectangular),
             Case("made on the device asked for (device='meta')", dims=dict(T=3, S=6), inputs=_on_meta)],
    hidden=[
        Case("random square sizes", dims=random_dims(T=(1, 12))),
        Case("random n_k ≥ n_q", dims=_longer_keys, inputs=_rectangular),
        Case("n_k given equal to n_q", inputs=_square_both),
        Case("one query (a decoding step with a cache)", dims=dict(T=1, S=7), inputs=_rectangular),
        Case("length 1", dims=dict(T=1, S=1)),
    ],
    mistakes=[
        Mistake("upper instead of lower triangle", _causal_upper,
                "query i (row i) may see keys 0 … i, the columns at and *left* of the diagonal: a lower "
                "triangle. Yours lets each query see the future instead.",
                "torch.tril, not torch.triu; compared by position, key j is allowed when "
                "j <= i + n_k - n_q (arange(n_k)[None, :] against arange(n_q)[:, None])."),
        Mistake("polarity inverted (True = blocked)", _causal_inverted,
                "in this course True means 'may attend'; you marked the blocked (future) positions, as "
                "nn.Transformer's masks do.",
                "return the lower triangle itself, diagonal included, not its complement."),
        Mistake("diagonal excluded", _causal_no_diagonal,
                "a position may attend to itself; your mask blocks the diagonal.",
                "keep the diagonal: tril with diagonal=0 for a square mask (n_k − n_q in general)."),
        Mistake("not aligned to the end when n_k > n_q", _causal_not_aligned,
                "with n_k > n_q the queries are the *last* n_q positions (decoding with a cache), so query i "
                "sees keys 0 … i + n_k − n_q; your triangle starts at the first key.",
                "shift the triangle: tril(diagonal=n_k - n_q)."),
        Mistake("triangle shifted the wrong way (n_q − n_k)", _causal_shift_reversed,
                "with n_k > n_q the triangle must move *right* by n_k − n_q, so that the last query sees every "
                "key; tril(diagonal=n_q − n_k) moves it left, and the newest keys are hidden from every query.",
                "the offset is n_k − n_q, positive when there are more keys: tril(diagonal=n_k - n_q)."),
        Mistake("nothing blocked", _causal_everything,
                "your mask lets every query see every key. A common cause: ~ on an integer 0/1 tensor flips its "
                "bits (~0 = −1, ~1 = −2), and both are true as booleans.",
                "build the triangle as a boolean tensor (dtype=torch.bool) before any ~, or keep the lower "
                "triangle with tril directly."),
        Mistake("a float mask", _causal_float,
                "masks are boolean (True = may attend), so that ~mask and masked_fill work; yours holds floats.",
                "build it with dtype=torch.bool."),
        Mistake("made on the CPU whatever `device` says", _causal_on_the_cpu,
                "`device` is where the mask must live: the device of the scores it masks. On a GPU, a mask left "
                "on the CPU makes masked_fill or torch.where fail with 'Expected all tensors to be on the same "
                "device'.",
                "pass it on to the tensor you build: torch.ones(n_q, n_k, dtype=torch.bool, device=device) (or "
                "torch.arange(..., device=device))."),
    ],
    forbidden=TORCH_CAUSAL,
)


# --------------------------------------------------------------------------- 2. padding_mask

def _lengths(gen: torch.Generator, dims) -> torch.Tensor:
    """(B,) lengths in [0, S]; the first sequence is cut short when it can be, so padding shows."""
    lengths = torch.randint(0, dims["S"] + 1, (dims["B"],), generator=gen)
    lengths[0] = dims["S"] // 2
    return lengths


def _padding_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_lengths(gen, dims), dims["S"])


def _padding_list_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_lengths(gen, dims).tolist(), dims["S"])


def _padding_past_the_longest(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    lengths = torch.randint(0, dims["S"], (dims["B"],), generator=gen)  # every one shorter than max_len
    return Call(lengths, dims["S"])


def _padding_extremes(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    lengths = torch.arange(dims["B"]) % 2 * dims["S"]  # 0, S, 0, S, …: all padding, no padding
    return Call(lengths, dims["S"])


def _padding_inverted(lengths, max_len):
    return ~tfm_ref.padding_mask(lengths, max_len)


def _padding_off_by_one(lengths, max_len):
    positions = torch.arange(max_len)  # (S,)
    return positions[None, :] <= torch.as_tensor(lengths)[:, None]  # one real token too many


def _padding_list_indexed(lengths, max_len):
    positions = torch.arange(max_len)  # (S,)
    return positions[None, :] < lengths[:, None]  # a Python list cannot be indexed with [:, None]


def _padding_on_the_left(lengths, max_len):
    positions = torch.arange(max_len)  # (S,)
    return positions[None, :] >= max_len - torch.as_tensor(lengths)[:, None]  # real tokens at the end


def _padding_to_the_longest(lengths, max_len):
    lengths = torch.as_tensor(lengths)
    return torch.arange(int(lengths.max()))[None, :] < lengths[:, None]  # as wide as the longest, not max_len


def _padding_transposed(lengths, max_len):
    return tfm_ref.padding_mask(lengths, max_len).T  # (S, B)


PADDING_MASK = Exercise(
    name="padding_mask",
    reference=tfm_ref.padding_mask,
    inputs=_padding_inputs,
    arg_names=("lengths", "max_len"),
    shapes=[dict(B=1, S=1), dict(B=1, S=2), dict(B=2, S=3), dict(B=3, S=5), dict(B=4, S=7)],
    # the notebook promises a list of ints as well as a tensor: visible, so that a list that fails shows before grading
    visible=[Case("random lengths (a tensor)"),
             Case("a batch padded past its longest sequence (every length < max_len)", inputs=_padding_past_the_longest),
             Case("lengths as a Python list", inputs=_padding_list_inputs)],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 6), S=(1, 12))),
        Case("all padding and no padding", inputs=_padding_extremes),
        Case("length-1 sequences", dims=dict(B=3, S=1)),
    ],
    mistakes=[
        Mistake("polarity inverted (True = padding)", _padding_inverted,
                "True must mark the *real* tokens (may attend); you marked the padding, the convention of "
                "nn.MultiheadAttention's key_padding_mask.",
                "compare so that True comes out at the positions below the length: positions < lengths."),
        Mistake("off by one (<= instead of <)", _padding_off_by_one,
                "a sequence of length n has real tokens at positions 0 … n − 1; yours counts position n as real "
                "too.",
                "position < n, not <= n."),
        Mistake("lengths as a list not turned into a tensor", _padding_list_indexed,
                "`lengths` may be a Python list, and a list cannot be indexed with [:, None].",
                "lengths = torch.as_tensor(lengths) first: it accepts a list and a tensor alike."),
        Mistake("as wide as the longest sequence, not max_len", _padding_to_the_longest,
                "max_len is the length the batch is padded to, which can be more than its longest sequence (a batch "
                "padded to a fixed size): the mask has max_len columns whatever the lengths.",
                "positions = torch.arange(max_len), not torch.arange(lengths.max())."),
        Mistake("transposed (S, B)", _padding_transposed,
                "the mask is (B, S), one row per sequence; yours has one row per position.",
                "compare positions[None, :] (1, S) with lengths[:, None] (B, 1)."),
        Mistake("real tokens at the end (left padding)", _padding_on_the_left,
                "the batch is right-padded: each sequence's real tokens come first, at positions 0 … length − 1, "
                "and its padding after them.",
                "positions[None, :] < lengths[:, None], with positions = torch.arange(max_len)."),
    ],
)


# --------------------------------------------------------------------------- 3. attention_mask (combined)

def _combined_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_lengths(gen, dims), dims["S"], causal=True)


def _combined_padding_only(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_lengths(gen, dims), dims["S"], causal=False)


def _combined_empty(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    lengths = _lengths(gen, dims)
    lengths[-1] = 0  # a sequence with no real token: every row of its mask is empty
    return Call(lengths, dims["S"], causal=True)


def _mask_on_queries(lengths, max_len, causal=True):
    real = tfm_ref.padding_mask(lengths, max_len)[:, None, :, None]  # (B, 1, T, 1): blocks padded queries only
    allowed = tfm_ref.causal_mask(max_len) if causal else torch.ones(max_len, max_len, dtype=torch.bool)
    return real & allowed


def _mask_or(lengths, max_len, causal=True):
    keys = tfm_ref.key_mask(tfm_ref.padding_mask(lengths, max_len))  # (B, 1, 1, S)
    if not causal:
        return keys.expand(-1, -1, max_len, -1)
    return keys | tfm_ref.causal_mask(max_len)


def _mask_causal_only(lengths, max_len, causal=True):
    allowed = tfm_ref.causal_mask(max_len) if causal else torch.ones(max_len, max_len, dtype=torch.bool)
    return allowed.expand(len(lengths), 1, max_len, max_len)


def _mask_causal_ignored(lengths, max_len, causal=True):
    return attention_mask_reference(lengths, max_len, causal=False)


def _mask_inverted(lengths, max_len, causal=True):
    return ~attention_mask_reference(lengths, max_len, causal)


def _mask_not_expanded(lengths, max_len, causal=True):
    keys = tfm_ref.key_mask(tfm_ref.padding_mask(lengths, max_len))  # (B, 1, 1, S)
    return keys & tfm_ref.causal_mask(max_len) if causal else keys


def _mask_list_indexed(lengths, max_len, causal=True):
    keys = _padding_list_indexed(lengths, max_len)[:, None, None, :]  # exercise 2's mistake, called here
    return keys & tfm_ref.causal_mask(max_len) if causal else keys.expand(-1, 1, max_len, max_len)


def _mask_no_head_axis(lengths, max_len, causal=True):
    return attention_mask_reference(lengths, max_len, causal)[:, 0]  # (B, T, S)


ATTENTION_MASK = Exercise(
    name="attention_mask",
    reference=attention_mask_reference,
    inputs=_combined_inputs,
    arg_names=("lengths", "max_len"),
    shapes=[dict(B=1, S=1), dict(B=1, S=2), dict(B=2, S=3), dict(B=2, S=4), dict(B=3, S=5)],
    visible=[Case("causal + padding, random lengths"), Case("padding only (causal=False)",
                                                             inputs=_combined_padding_only),
             Case("lengths as a Python list",
                  inputs=lambda gen, dims, dtype: Call(_lengths(gen, dims).tolist(), dims["S"], causal=True))],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 5), S=(1, 10))),
        Case("an all-padding sequence (fully masked rows)", dims=dict(B=3, S=4), inputs=_combined_empty),
        Case("length-1 sequences", dims=dict(B=2, S=1)),
        Case("lengths as a Python list, causal=False",
             inputs=lambda gen, dims, dtype: Call(_lengths(gen, dims).tolist(), dims["S"], causal=False)),
    ],
    mistakes=[
        # Under the causal mask, padding on the queries alone and on both axes give the same mask: one entry says both.
        Mistake("padding applied to the queries", _mask_on_queries,
                "the padding mask says which *keys* are real, so it runs along the last axis S; yours blocks "
                "padded queries (rows), instead of the keys or as well as them. A padded query's row is computed "
                "like any other and ignored later.",
                "padding_mask(...)[:, None, None, :] (B, 1, 1, S), not [:, None, :, None]."),
        Mistake("masks combined with OR", _mask_or,
                "a key may be attended only if it is real AND not in the future; with OR either rule alone "
                "lets it through.",
                "combine with &, not |."),
        Mistake("polarity inverted (True = blocked)", _mask_inverted,
                "in this course True means 'may attend'; your mask is True where attending is forbidden.",
                "build it from the padding mask (True = real) and the causal mask (True = may attend) with &, "
                "and do not negate the result."),
        Mistake("padding mask missing", _mask_causal_only,
                "padded keys must be blocked too; your mask blocks only the future.",
                "& the causal mask with the padding mask of the keys, (B, 1, 1, S)."),
        Mistake("causal mask missing", _mask_causal_ignored,
                "with causal=True future keys must be blocked as well; your mask blocks only the padding. (A "
                "triangle negated with ~ while it holds integers blocks nothing: ~0 = −1 and ~1 = −2 are both "
                "true.)",
                "& the padding mask with causal_mask(max_len)."),
        Mistake("not expanded to (B, 1, T, T) when causal=False", _mask_not_expanded,
                "without the causal mask your result keeps the padding mask's (B, 1, 1, S) shape; the exercise "
                "asks for (B, 1, T, T) either way.",
                "keys.expand(-1, 1, max_len, max_len) when causal is False."),
        Mistake("no head axis: (B, T, S)", _mask_no_head_axis,
                "the mask must broadcast over the heads of (B, H, T, S) scores; yours has no head axis.",
                "return (B, 1, T, S): keep the axis of size 1 after the batch."),
        Mistake("lengths as a list not turned into a tensor (in padding_mask)", _mask_list_indexed,
                "`lengths` may be a Python list, and your padding_mask indexes it with [:, None], which a list "
                "does not allow.",
                "torch.as_tensor(lengths) at the start of padding_mask (exercise 2)."),
    ],
    forbidden=(attention_mask_reference, *TORCH_CAUSAL),
    allowed=(tfm_ref.causal_mask, tfm_ref.padding_mask, tfm_ref.key_mask),
    uses=(CAUSAL_MASK, PADDING_MASK),
)


# --------------------------------------------------------------------------- 4. shift_right

def _targets(gen: torch.Generator, dims, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(3, 50, (dims["B"], dims["T"]), generator=gen).to(dtype)  # ids ≥ 3: not pad/bos/eos


def _shift_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_targets(gen, dims), 1)


def _shift_int32(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(_targets(gen, dims, torch.int32), 2)


def _shift_padded(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    targets = _targets(gen, dims)
    targets[:, dims["T"] // 2:] = 0  # right padding (pad id 0) is shifted like any token
    return Call(targets, 1)


def _shift_left(targets, bos_id):
    return torch.cat([targets[:, 1:], targets.new_full((targets.shape[0], 1), bos_id)], dim=1)


def _shift_drop_first(targets, bos_id):
    return torch.cat([targets.new_full((targets.shape[0], 1), bos_id), targets[:, 1:]], dim=1)


def _shift_keep_all(targets, bos_id):
    return torch.cat([targets.new_full((targets.shape[0], 1), bos_id), targets], dim=1)  # (B, T + 1)


def _shift_roll(targets, bos_id):
    return targets.roll(1, dims=1)  # the last target wraps round to position 0


def _shift_float_bos(targets, bos_id):
    bos = torch.zeros(targets.shape[0], 1) + bos_id  # float32: cat makes the whole input float
    return torch.cat([bos, targets[:, :-1]], dim=1)


def _shift_bos_int64(targets, bos_id):
    bos = torch.full((targets.shape[0], 1), bos_id)  # int64 whatever the targets' dtype
    return torch.cat([bos, targets[:, :-1]], dim=1)


def _shift_time_axis(targets, bos_id):
    return torch.cat([targets.new_full((1, targets.shape[1]), bos_id), targets[:-1]], dim=0)  # shifted the batch


SHIFT_RIGHT = Exercise(
    name="shift_right",
    reference=shift_right_reference,
    inputs=_shift_inputs,
    arg_names=("targets", "bos_id"),
    shapes=[dict(B=1, T=1), dict(B=1, T=2), dict(B=2, T=3), dict(B=3, T=5)],
    # "keep the dtype of targets": int32 ids are visible, so that an int64 <bos> column fails before grading
    visible=[Case("random targets, bos_id = 1"), Case("int32 ids, bos_id = 2", inputs=_shift_int32)],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 6), T=(1, 12))),
        Case("right-padded targets", dims=dict(B=3, T=6), inputs=_shift_padded),
        Case("length-1 targets", dims=dict(B=3, T=1)),
        Case("one sequence", dims=dict(B=1, T=6)),
    ],
    mistakes=[
        Mistake("shifted left", _shift_left,
                "the decoder input at step t is the *previous* target, t − 1; yours is the next one, the very "
                "token the model must predict.",
                "put <bos> in front and drop the last target: cat([bos, targets[:, :-1]], dim=1)."),
        Mistake("dropped the first target instead of the last", _shift_drop_first,
                "after <bos> come targets 0 … T − 2; yours has targets 1 … T − 1 after it: target 0 is gone and "
                "the last one kept.",
                "prepend <bos> to targets[:, :-1]; slicing targets[:, 1:], or writing <bos> over position 0 of "
                "the targets, loses target 0."),
        Mistake("nothing dropped (length T + 1)", _shift_keep_all,
                "the input must keep the targets' length T; prepending <bos> without dropping a target makes it "
                "T + 1 long.",
                "drop the last target after prepending <bos>: targets[:, :-1]."),
        Mistake("torch.roll without <bos>", _shift_roll,
                "roll wraps the last target round to position 0, so the model would see the answer's end; "
                "position 0 must be bos_id.",
                "cat([targets.new_full((B, 1), bos_id), targets[:, :-1]], dim=1) instead of roll."),
        Mistake("shifted along the batch axis", _shift_time_axis,
                "targets are (B, T): you shifted the sequences of the batch, not the positions in time.",
                "shift along dim 1: cat([...], dim=1), and slice targets[:, :-1]."),
        Mistake("<bos> column of the wrong dtype", _shift_bos_int64,
                "torch.full makes int64 by default, and cat promotes the int32 targets to it: the result is not "
                "in the targets' dtype.",
                "build the <bos> column with the targets' dtype: targets.new_full((B, 1), bos_id)."),
        Mistake("a float <bos> column: the ids become floats", _shift_float_bos,
                "torch.zeros, torch.ones and a float fill make float32, and cat promotes the integer targets to "
                "it: token ids must stay integers, in the targets' dtype, to index the embedding.",
                "build the <bos> column from the targets: targets.new_full((B, 1), bos_id)."),
    ],
    forbidden=(shift_right_reference,),
)

EXERCISES = (CAUSAL_MASK, PADDING_MASK, ATTENTION_MASK, SHIFT_RIGHT)
