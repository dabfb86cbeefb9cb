"""Chapter 8 exercises — encoder and decoder blocks, greedy decoding with a KV cache, the 2017
learning-rate schedule, label-smoothed cross-entropy, one step of beam search.

    EncoderBlock: x = Res(x, SelfAttn(·, mask));  x = Res(x, FFN)
    DecoderBlock: x = Res(x, SelfAttn(·, causal)); x = Res(x, CrossAttn(·, memory, src pad)); x = Res(x, FFN)
    Res(x, f) = Norm(x + f(x)) (Post-Norm)  or  x + f(Norm(x)) (Pre-Norm)
    lr(step) = d_model^−0.5 · min(step^−0.5, step · warmup^−1.5)     (Vaswani et al. 2017, eq. 3)
    beam step: the K best of the K·V candidates score + log p(token | hypothesis)

The blocks are built from tfm_ref's `MultiHeadAttention`, `FeedForward` and `LayerNorm` (the
exercise is the wiring), so those are allowed; decoding drives a small random tfm_ref
`Transformer`, whose methods are allowed, while `tfm_ref.greedy_decode` is not. Each `Mistake`
is a broken version a student plausibly writes (`tests/test_exercises.py` proves each is
caught and named).

Shapes: B batch · S source positions · T target positions · D model width · H heads ·
F FFN width · L max_len (tokens to generate) · V vocabulary · K beam size. Case flags in the sizes:
``pre`` (Pre-Norm), ``both`` (a Post-Norm and a Pre-Norm block side by side).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

import tfm_ref
from tfm_ref import attention, blocks, config, feedforward, heads, kv_cache, masks, multihead, norms, positional
from tfm_ref import shapes as tfm_shapes
from tfm_ref import transformer
from tfm_ref.losses import label_smoothed_cross_entropy
from tfm_ref.schedule import noam_lr
from notebook_sandbox.building import SideBySide
from notebook_sandbox.check_models import CacheOnlyTransformer, RandomTransformer

from ..spec import Call, Case, Exercise, Mistake, randn, random_dims
from .ch07_norms import residual
from .shared import (
    PerturbedModuleAdapter,
    built_without_dropout,
    dropout_rate,
    functions_of,
    residual_always_post,
    residual_always_pre,
    residual_from_normalised,
    residual_no_residual,
    residual_norm_sublayer_only,
)

__all__ = ["ENCODER_BLOCK", "DECODER_BLOCK", "GREEDY", "NOAM", "LABEL_SMOOTHING", "BEAM_STEP", "EXERCISES", "noam_lr",
           "label_smoothed_cross_entropy", "beam_step_reference"]

BLOCK_LIBRARY = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder,
                 nn.TransformerDecoder, nn.Transformer)
# The notebook says a student's own layers of chapters 2, 6 and 7 work as well as tfm_ref's: chapter 2's calls
# the attention and head helpers that chapter gave from tfm_ref.
BUILDING_BLOCKS = (*functions_of(tfm_ref.MultiHeadAttention, tfm_ref.FeedForward, tfm_ref.LayerNorm),
                   tfm_ref.scaled_dot_product_attention, tfm_ref.split_heads, tfm_ref.merge_heads, tfm_ref.repeat_kv)

BOTH_NORMS = "both"
"""A case's flag: a Post-Norm block and a Pre-Norm block side by side, each with weights of its own, called on the
same inputs. On one block Pre- and Post-Norm swapped gives what norm_first ignored gives (always Pre-Norm in a
Post-Norm block); the two side by side tell the three apart."""


class _BlockAdapter(PerturbedModuleAdapter):
    """The blocks' adapter; with `BOTH_NORMS` it builds one block of each kind (`notebook_sandbox.building`'s pair), the
    student's checked and loaded one at a time, so a parameter message names the student's own parameters."""

    @staticmethod
    def _halves(dims):
        return ("post.", {**dims, "pre": 0}), ("pre.", {**dims, "pre": 1})

    def describe(self, name: str, dims) -> str:
        if not dims.get(BOTH_NORMS):
            return super().describe(name, dims)
        post, pre = (super(_BlockAdapter, self).describe(name, half) for _, half in self._halves(dims))
        return f"{post} and {pre}, each called on the inputs below"

    def plan(self, dims) -> dict:
        if not dims.get(BOTH_NORMS):
            return super().plan(dims)
        return {"kind": "pair", "parts": [[prefix, super(_BlockAdapter, self).plan(half)]
                                          for prefix, half in self._halves(dims)]}

    def reference(self, reference: type, dims, dtype: torch.dtype) -> nn.Module:
        if not dims.get(BOTH_NORMS):
            return super().reference(reference, dims, dtype)
        return SideBySide(*(super(_BlockAdapter, self).reference(reference, half, dtype) for _, half in self._halves(dims)))


_BLOCK_KWARGS = _BlockAdapter(lambda dims: dict(d_model=dims["D"], n_heads=dims["H"], d_ff=dims["F"],
                                                dropout=dropout_rate(dims), norm_first=bool(dims.get("pre"))))
# what each output of a `BOTH_NORMS` case is (the other cases' single output is shown as it is)
_BLOCK_OUTPUTS = ("Post-Norm output", "Pre-Norm output")


_RESIDUAL_DROPOUT = ("each sublayer's output is dropped out before it is added to the residual stream (§5.4: "
                     "\"dropout to the output of each sub-layer, before it is added to the sub-layer input\"); "
                     "yours drops only inside the attention and the FFN.",
                     "in Residual.forward: x + self.dropout(sublayer(self.norm(x))), or "
                     "self.norm(x + self.dropout(sublayer(x))) in Post-Norm.")
_DROPOUT_NOT_PASSED_ON = ("the block is built with a `dropout` rate for its attention, its FFN and both residual "
                          "branches; in training mode yours drops nothing.")


def _padding(gen: torch.Generator, batch: int, length: int) -> torch.Tensor:
    """A (B, 1, 1, S) key mask: the first row full, the others random lengths 1 … S − 1 (when S ≥ 2), so that
    a batch of two or more always has padding, and a mask that does not reach the attention shows."""
    lengths = torch.randint(1, max(length - 1, 1) + 1, (batch,), generator=gen)
    lengths[0] = length
    return tfm_ref.key_mask(tfm_ref.padding_mask(lengths, length))


def _block_sizes(pre: bool, target: bool = True):
    """Random block sizes; ``target``: with T, the target length (an encoder block has none, and a size it does not
    use would be listed with a failing input's sizes)."""
    def draw(gen: torch.Generator) -> dict[str, int]:
        h = int(torch.randint(1, 4, (1,), generator=gen))
        dims = random_dims(B=(1, 3), T=(1, 6), S=(1, 7), F=(4, 24))(gen)
        if not target:
            del dims["T"]
        return {**dims, "D": h * int(torch.randint(1, 5, (1,), generator=gen)), "H": h, **({"pre": 1} if pre else {})}
    return draw


# --------------------------------------------------------------------------- 1. EncoderBlock

def _encoder_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype), _padding(gen, dims["B"], dims["S"]))


def _encoder_no_mask(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype))


def _passed_on(mask: torch.Tensor | None, use: bool, inverted: bool) -> torch.Tensor | None:
    """The mask a broken block gives its attention: the mask, None (ignored) or its complement (inverted)."""
    if mask is None or not use:
        return None
    return ~mask if inverted else mask


def _dropped(sublayer, residual: nn.Module, on: bool = True):
    """The sublayer followed by its residual branch's dropout, as tfm_ref's Residual applies it (in training
    mode the broken blocks then draw the reference's dropout masks, and differ only by their mistake)."""
    return (lambda h: residual.dropout(sublayer(h))) if on else sublayer


def _encoder_with(connect, *, use_mask: bool = True, inverted_mask: bool = False, shared_norm: bool = False,
                  ffn_first: bool = False, residual_dropout: bool = True) -> type:
    """A tfm_ref.EncoderBlock wired with ``connect(x, sublayer, norm, norm_first)`` and one change."""
    def forward(self, x, mask=None):
        first = self.attn_residual.norm_first
        attend = lambda h: self.self_attn(h, mask=_passed_on(mask, use_mask, inverted_mask))  # noqa: E731
        steps = [(attend, self.attn_residual), (self.ffn, self.ffn_residual)]
        for sublayer, residual_of in (steps[::-1] if ffn_first else steps):
            norm = self.attn_residual.norm if shared_norm else residual_of.norm
            x = connect(x, _dropped(sublayer, residual_of, residual_dropout), norm, first)
        return x
    return type("BrokenEncoderBlock", (tfm_ref.EncoderBlock,), {"forward": forward})


_BLOCK_MISTAKES = dict(
    pre_only=("norm_first ignored (always Pre-Norm)",
              "with norm_first=False (the default, the 2017 paper's Post-Norm) each sublayer's sum is normalised: "
              "norm(x + sublayer(x)); yours normalises the sublayer's input in both cases.",
              "in Residual.forward: return self.norm(x + self.dropout(sublayer(x))) unless self.norm_first."),
    swapped=("Pre- and Post-Norm swapped",
             "with norm_first=True each sublayer normalises its own input, x + sublayer(norm(x)) (Pre-Norm), and with "
             "norm_first=False (the default) the sum, norm(x + sublayer(x)) (Post-Norm); yours does each where the "
             "other belongs: its Post-Norm block normalises the inputs and its Pre-Norm block the sums.",
             "in Residual.forward: if self.norm_first: return x + self.dropout(sublayer(self.norm(x))); otherwise "
             "return self.norm(x + self.dropout(sublayer(x))) (a test of `not self.norm_first` turns the two round)."),
    post_only=("norm_first ignored (always Post-Norm)",
               "with norm_first=True every sublayer normalises its own input (Pre-Norm); yours normalise the sums.",
               "in Residual.forward: if self.norm_first: return x + self.dropout(sublayer(self.norm(x)))."),
    pre_from_norm=("Pre-Norm: residual taken from the normalised input",
                   "in Pre-Norm the residual path carries x itself, untouched; yours carries norm(x).",
                   "x + sublayer(norm(x)), not norm(x) + sublayer(norm(x))."),
    norm_inside=("Post-Norm: only the sublayer output normalised",
                 "Post-Norm normalises the sum, after the residual is added; yours normalises the sublayer's output.",
                 "norm(x + sublayer(x)), not x + norm(sublayer(x))."),
    no_residual=("residual connection missing",
                 "each sublayer sits in a residual connection; yours does not add its input back.",
                 "norm(x + sublayer(x)), or x + sublayer(norm(x)) in Pre-Norm."),
)


def _res_swapped(x, sublayer, norm, norm_first=False):
    return residual(x, sublayer, norm, not norm_first)


def _named(key: str, impl) -> Mistake:
    name, hint, fix = _BLOCK_MISTAKES[key]
    return Mistake(name, impl, hint, fix)


class _EncoderOneAddNorm(tfm_ref.EncoderBlock):
    """Both sublayers in one residual connection: the notes' list read as a single Add & Norm at the end."""

    def forward(self, x, mask=None):
        def both(h):
            return self.ffn(self.self_attn(h, mask=mask))
        return residual(x, both, self.ffn_residual.norm, self.attn_residual.norm_first)


# from D = 4: at D = 2 a LayerNorm gives ±1 in every row, and different blocks look alike
_ENCODER_SHAPES = [dict(B=1, S=1, D=4, H=1, F=8), dict(B=1, S=2, D=4, H=2, F=8), dict(B=2, S=3, D=8, H=2, F=16),
                   dict(B=2, S=5, D=16, H=4, F=32)]

ENCODER_BLOCK = Exercise(
    name="EncoderBlock",
    key="encoder_block",
    reference=tfm_ref.EncoderBlock,
    adapter=_BLOCK_KWARGS,
    inputs=_encoder_inputs,
    arg_names=("x", "mask"),
    output_names=_BLOCK_OUTPUTS,
    shapes=_ENCODER_SHAPES,
    # training mode is visible: dropout left out of the residual branches (or never passed on) fails before grading
    # a Post-Norm and a Pre-Norm block side by side: Pre- and Post-Norm swapped shows apart from norm_first ignored
    visible=[Case("a Post-Norm and a Pre-Norm block (norm_first=False and True), padded batch",
                  dims=dict(B=2, S=5, D=16, H=4, F=32, both=1)),
             Case("training mode, dropout=0.3", dims=dict(B=2, S=4, D=8, H=2, F=16, training=1))],
    hidden=[
        Case("random sizes, Post-Norm", dims=_block_sizes(False, target=False)),
        Case("random sizes, Pre-Norm", dims=_block_sizes(True, target=False)),
        Case("mask=None", inputs=_encoder_no_mask),
        Case("one position", dims=dict(B=2, S=1, D=8, H=2, F=16)),
        Case("float64 weights and inputs, Pre-Norm", dims=dict(B=2, S=4, D=8, H=2, F=16, pre=1), dtype=torch.float64),
        Case("gradients (input and every parameter), Pre-Norm", dims=dict(B=2, S=4, D=8, H=2, F=16, pre=1), grad=True),
        Case("eval mode, built with dropout=0.3: nothing drops", dims=dict(B=2, S=4, D=8, H=2, F=16, with_dropout=1)),
    ],
    mistakes=[
        Mistake("dropout not passed on", built_without_dropout(tfm_ref.EncoderBlock), _DROPOUT_NOT_PASSED_ON,
                "MultiHeadAttention(d_model, n_heads, dropout=dropout), FeedForward(d_model, d_ff, dropout=dropout) "
                "and Residual(LayerNorm(d_model), dropout, norm_first) for each sublayer."),
        Mistake("no dropout on the residual branch", _encoder_with(residual, residual_dropout=False), *_RESIDUAL_DROPOUT),
        Mistake("padding mask ignored", _encoder_with(residual, use_mask=False),
                "the mask does not reach the self-attention, so padded positions are attended.",
                "pass it on: lambda h: self.self_attn(h, mask=mask)."),
        Mistake("padding mask inverted", _encoder_with(residual, inverted_mask=True),
                "the mask is True where attending is allowed (the real tokens); inverted, every query attends to "
                "the padding only.",
                "pass the mask as it is: self.self_attn(h, mask=mask), not mask=~mask."),
        _named("post_only", _encoder_with(residual_always_post)),
        _named("pre_only", _encoder_with(residual_always_pre)),
        _named("swapped", _encoder_with(_res_swapped)),
        _named("pre_from_norm", _encoder_with(residual_from_normalised)),
        _named("norm_inside", _encoder_with(residual_norm_sublayer_only)),
        _named("no_residual", _encoder_with(residual_no_residual)),
        Mistake("one norm for both sublayers", _encoder_with(residual, shared_norm=True),
                "each sublayer has its own norm, with its own learned γ and β; yours uses one for both.",
                "attn_residual.norm around the attention, ffn_residual.norm around the FFN."),
        Mistake("one Add & Norm for the whole block", _EncoderOneAddNorm,
                "every sublayer has its own residual connection and norm — two Add & Norms in an encoder block; "
                "yours wraps attention and FFN together in one.",
                "x = self.attn_residual(x, attention); then x = self.ffn_residual(x, self.ffn)."),
        Mistake("FFN before self-attention", _encoder_with(residual, ffn_first=True),
                "the encoder block attends first, then applies the FFN to every position; yours does it the other "
                "way round.",
                "the attention's Residual first, then the FFN's."),
    ],
    forbidden=BLOCK_LIBRARY,
    allowed=BUILDING_BLOCKS,
)


# --------------------------------------------------------------------------- 2. DecoderBlock

def _decoder_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x = randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype)
    memory = randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype)
    return Call(x, memory, tfm_ref.causal_mask(dims["T"]), _padding(gen, dims["B"], dims["S"]))


class _DecoderMasksSwapped(tfm_ref.DecoderBlock):
    def forward(self, x, memory=None, self_mask=None, cross_mask=None):
        return super().forward(x, memory, cross_mask, self_mask)


def _decoder_with(connect, *, causal: bool = True, source_mask: bool = True, inverted_source_mask: bool = False,
                  cross_to_x: bool = False, norm_memory: bool = False, ffn_before_cross: bool = False,
                  queries_from_input: bool = False, residual_dropout: bool = True, arguments_swapped: bool = False,
                  self_mask_in_cross: bool = False, self_attention_to_memory: bool = False,
                  norm_memory_always: bool = False, cross_first: bool = False) -> type:
    """A tfm_ref.DecoderBlock wired with ``connect`` and one change. ``arguments_swapped``: cross_attn(memory, h),
    the queries from the source; ``self_mask_in_cross``: the look-ahead mask given to the cross-attention too;
    ``self_attention_to_memory``: the masked self-attention given memory as its context; ``norm_memory`` (Pre-Norm)
    or ``norm_memory_always``: memory passed through the cross-attention's norm."""
    def forward(self, x, memory=None, self_mask=None, cross_mask=None):
        first = self.self_residual.norm_first
        norm = self.cross_residual.norm
        block_input = x

        def cross(h):
            normed = norm_memory_always or (norm_memory and first)
            context = h if cross_to_x else (norm(memory) if normed else memory)
            queries = block_input if queries_from_input else h
            mask = self_mask if self_mask_in_cross else _passed_on(cross_mask, source_mask, inverted_source_mask)
            return self.cross_attn(context, queries, mask=mask) if arguments_swapped else \
                self.cross_attn(queries, context, mask=mask)

        def attend_to_itself(h):
            return self.self_attn(h, memory if self_attention_to_memory else None, mask=self_mask if causal else None)

        steps = [(attend_to_itself, self.self_residual),
                 (cross, self.cross_residual), (self.ffn, self.ffn_residual)]
        if ffn_before_cross:
            steps = [steps[0], steps[2], steps[1]]
        if cross_first:
            steps = [steps[1], steps[0], steps[2]]
        for sublayer, residual_of in steps:
            x = connect(x, _dropped(sublayer, residual_of, residual_dropout), residual_of.norm, first)
        return x
    return type("BrokenDecoderBlock", (tfm_ref.DecoderBlock,), {"forward": forward})


DECODER_BLOCK = Exercise(
    name="DecoderBlock",
    key="decoder_block",
    reference=tfm_ref.DecoderBlock,
    adapter=_BLOCK_KWARGS,
    inputs=_decoder_inputs,
    arg_names=("x", "memory", "self_mask", "cross_mask"),
    output_names=_BLOCK_OUTPUTS,
    # T = S first in the ladder and in the first case, so that attending to x instead of memory gives an output,
    # not a shape error; the T ≠ S shapes show a case with T ≠ S (memory taken as the queries) on a small input.
    shapes=[dict(B=1, T=2, S=2, D=4, H=1, F=8), dict(B=1, T=2, S=3, D=4, H=1, F=8), dict(B=2, T=3, S=3, D=4, H=2, F=8),
            dict(B=2, T=2, S=4, D=4, H=2, F=8), dict(B=2, T=5, S=5, D=16, H=4, F=32)],
    # a Post-Norm and a Pre-Norm block side by side: Pre- and Post-Norm swapped shows apart from norm_first ignored
    visible=[Case("a Post-Norm and a Pre-Norm block (norm_first=False and True): causal self-attention, padded source",
                  dims=dict(B=2, T=5, S=5, D=16, H=4, F=32, both=1)),
             Case("Pre-Norm block (norm_first=True), T ≠ S", dims=dict(B=2, T=4, S=6, D=16, H=4, F=32, pre=1)),
             Case("training mode, dropout=0.3", dims=dict(B=2, T=3, S=4, D=8, H=2, F=16, training=1))],
    hidden=[
        Case("random sizes, Post-Norm", dims=_block_sizes(False)),
        Case("random sizes, Pre-Norm", dims=_block_sizes(True)),
        Case("one target position", dims=dict(B=2, T=1, S=5, D=8, H=2, F=16)),
        Case("float64 weights and inputs", dims=dict(B=2, T=3, S=4, D=8, H=2, F=16), dtype=torch.float64),
        Case("gradients (inputs, memory and every parameter), Pre-Norm", dims=dict(B=2, T=3, S=4, D=8, H=2, F=16, pre=1),
             grad=True),
        Case("eval mode, built with dropout=0.3: nothing drops",
             dims=dict(B=2, T=3, S=4, D=8, H=2, F=16, with_dropout=1)),
    ],
    mistakes=[
        Mistake("dropout not passed on", built_without_dropout(tfm_ref.DecoderBlock), _DROPOUT_NOT_PASSED_ON,
                "dropout=dropout for both attentions and the FFN, and Residual(LayerNorm(d_model), dropout, "
                "norm_first) for each sublayer."),
        Mistake("no dropout on the residual branch", _decoder_with(residual, residual_dropout=False), *_RESIDUAL_DROPOUT),
        Mistake("self_mask and cross_mask swapped", _DecoderMasksSwapped,
                "the look-ahead self_mask (T × T) belongs to the masked self-attention, the source padding "
                "cross_mask (T × S) to the cross-attention; yours gives each attention the other's mask.",
                "self_attn(h, mask=self_mask), cross_attn(h, memory, mask=cross_mask)."),
        Mistake("causal mask ignored in self-attention", _decoder_with(residual, causal=False),
                "the decoder's self-attention must not see later target positions; self_mask does not reach it.",
                "lambda h: self.self_attn(h, mask=self_mask)."),
        Mistake("source padding mask ignored in cross-attention", _decoder_with(residual, source_mask=False),
                "cross-attention attends over the source, whose padding must stay masked; cross_mask does not "
                "reach it.",
                "lambda h: self.cross_attn(h, memory, mask=cross_mask)."),
        Mistake("source padding mask inverted in cross-attention", _decoder_with(residual, inverted_source_mask=True),
                "cross_mask is True at the real source tokens (may attend); inverted, the decoder reads the "
                "source's padding only.",
                "pass it as it is: self.cross_attn(h, memory, mask=cross_mask), not mask=~cross_mask."),
        Mistake("cross-attention to the decoder input instead of memory", _decoder_with(residual, cross_to_x=True),
                "in cross-attention the queries come from the decoder and the keys and values from the encoder's "
                "output; yours attends to the decoder's own stream.",
                "pass memory as the context: self.cross_attn(h, memory, mask=cross_mask)."),
        Mistake("cross-attention queries from the block's input", _decoder_with(residual, queries_from_input=True),
                "the queries of cross-attention come from the output of the block's masked self-attention "
                "sublayer; taken from the block's input, they skip that sublayer.",
                "chain the residuals: x = self.self_residual(x, …); then x = self.cross_residual(x, lambda h: "
                "self.cross_attn(h, memory, mask=cross_mask)), using h, the argument the wrapper passes."),
        Mistake("cross-attention's arguments swapped: queries from memory", _decoder_with(residual,
                                                                                           arguments_swapped=True),
                "cross_attn(x, context) takes the queries first: the decoder's stream asks, and memory (the "
                "source) answers with keys and values. Swapped, each source position asks the target instead.",
                "self.cross_attn(h, memory, mask=cross_mask), h first."),
        Mistake("the look-ahead mask given to cross-attention", _decoder_with(residual, self_mask_in_cross=True),
                "cross-attention may see the whole source, every real token: its mask is cross_mask, the source "
                "padding; self_mask, the look-ahead (T × T), belongs to the self-attention alone.",
                "self.cross_attn(h, memory, mask=cross_mask)."),
        Mistake("masked self-attention attends to memory", _decoder_with(residual, self_attention_to_memory=True),
                "the first sublayer is self-attention: the target attends to itself (no context argument), under "
                "the look-ahead mask; memory comes in at the second, the cross-attention.",
                "self.self_attn(h, mask=self_mask), with no context."),
        Mistake("Pre-Norm: memory normalised by the decoder's norm", _decoder_with(residual, norm_memory=True),
                "the norm applies to the decoder stream only; memory is already normalised by the encoder.",
                "x + cross_attn(norm(x), memory), with memory as it comes."),
        Mistake("memory normalised by the cross-attention's norm, Post-Norm too",
                _decoder_with(residual, norm_memory_always=True),
                "each of the block's norms acts on the decoder stream; memory comes from the encoder's stack as it "
                "is (already normalised there). In Post-Norm the norm comes after the addition, so nothing in the "
                "block touches memory; yours passes it through cross_residual.norm.",
                "self.cross_attn(h, memory, mask=cross_mask), with memory as it comes."),
        Mistake("cross-attention before self-attention", _decoder_with(residual, cross_first=True),
                "the order is masked self-attention over the target first, then cross-attention to the source "
                "(its queries are the self-attention sublayer's output), then the FFN; yours attends to the "
                "source first.",
                "self_residual, then cross_residual, then ffn_residual."),
        Mistake("FFN before cross-attention", _decoder_with(residual, ffn_before_cross=True),
                "the order is masked self-attention, cross-attention, then FFN; yours puts the FFN second.",
                "self_residual, cross_residual, then ffn_residual."),
        _named("post_only", _decoder_with(residual_always_post)),
        _named("pre_only", _decoder_with(residual_always_pre)),
        _named("swapped", _decoder_with(_res_swapped)),
        _named("pre_from_norm", _decoder_with(residual_from_normalised)),
        _named("norm_inside", _decoder_with(residual_norm_sublayer_only)),
        _named("no_residual", _decoder_with(residual_no_residual)),
    ],
    forbidden=BLOCK_LIBRARY,
    allowed=BUILDING_BLOCKS,
    # the notebook's DecoderBlock reuses the Residual written with the EncoderBlock: a failing EncoderBlock is shown
    uses=(ENCODER_BLOCK,),
)


# --------------------------------------------------------------------------- 3. greedy decoding

BOS, PAD, VOCAB = 1, 0, 12
# Untied embeddings: with tied ones an untrained model mostly repeats its input token.
_MODEL = tfm_ref.TransformerConfig(vocab_size=VOCAB, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                   d_ff=32, dropout=0.0, max_len=64, tie_embeddings=False)



# Everything a student's decoding loop may call on the model, the checks' own models' methods too (a student's
# code calling the grader's is refused otherwise); `tfm_ref.decoding` stays off limits.
MODEL_METHODS = tuple(functions_of(RandomTransformer, CacheOnlyTransformer, attention, blocks, config, feedforward,
                                   heads, kv_cache, masks, multihead, norms, positional, tfm_shapes, transformer))


def _first_hits(trajectory: torch.Tensor, token: int) -> torch.Tensor:
    """(B,) index of the first ``token`` in each row, or L where it never appears."""
    hits = trajectory == token  # (B, L)
    return torch.where(hits.any(dim=1), hits.int().argmax(dim=1), trajectory.shape[1])


def _choose_eos(trajectory: torch.Tensor, gen: torch.Generator, goes_on: bool = False) -> tuple[int, bool, bool, bool]:
    """An end token that makes the greedy outputs informative: some rows end while others go on
    (so padding after EOS shows), and all end before ``max_len`` (so stopping early shows); whether
    padding after it shows (a row that has ended would generate something else before the last row ends);
    whether it also lets a row that has ended generate something else at the step the last row ends (so a
    `finished` flag that forgets shows: that loop goes on); and whether a row that has ended would generate
    something else before ``max_len`` (so a loop that ignores eos_id altogether, neither stopping nor padding, shows
    apart from one that only forgets to stop: in a batch of one, where no row ends before another), which
    ``goes_on`` also prefers."""
    batch, length = trajectory.shape
    best, best_score, best_flags = PAD, -1.0, (False, False, False)
    for token in torch.randperm(VOCAB, generator=gen).tolist():
        if token in (BOS, PAD):  # an end token that is PAD would hide padding mistakes
            continue
        first = _first_hits(trajectory, token)
        finish = min(int(first.max()), length - 1)
        padded = any(int(first[r]) < finish and bool((trajectory[r, int(first[r]) + 1 : finish + 1] != token).any())
                     for r in range(batch))
        restarts = int(first.max()) < length - 1 and bool((trajectory[:, finish] != token).any())
        went_on = any(bool((trajectory[r, int(first[r]) + 1:] != token).any()) for r in range(batch))
        # then, among equals, the one that comes latest: a row that ends at once hides how the loop feeds the
        # decoder (first position or last, one token or the prefix)
        score = 2 * padded + (int(first.max()) < length - 1) + restarts + (goes_on and went_on) \
            + (int(first.min()) < length) + float(first.clamp(max=length - 1).float().mean()) / length
        if score > best_score:
            best, best_score, best_flags = token, score, (padded, restarts, went_on)
    return (best, *best_flags)


def _model_and_source(gen: torch.Generator, dims, model_class: type = RandomTransformer, dropout: float = 0.0):
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(dataclasses.replace(_MODEL, dropout=dropout)).eval()
    src_mask = tfm_ref.padding_mask(torch.randint(1, dims["S"] + 1, (dims["B"],), generator=gen), dims["S"])  # (B, S)
    src = torch.randint(3, VOCAB, (dims["B"], dims["S"]), generator=gen).masked_fill(~src_mask, PAD)
    return model, src, src_mask


def _varied(trajectory: torch.Tensor) -> bool:
    """Does some row go through min(3, L) different tokens? An untrained model often repeats one token
    from the start, and on such a model a loop that feeds the decoder wrongly decodes alike."""
    return max(len(set(row.tolist())) for row in trajectory) >= min(3, trajectory.shape[1])


def _never_produced(trajectory: torch.Tensor, gen: torch.Generator) -> int:
    """An end token that no row produces within max_len (so every row runs max_len steps), VOCAB where each
    real token appears (an id the model cannot produce)."""
    absent = [t for t in torch.randperm(VOCAB, generator=gen).tolist() if t not in (BOS, PAD)
              and not bool((trajectory == t).any())]
    return absent[0] if absent else VOCAB


def _mask_uses_told_apart(model, src: torch.Tensor, src_mask: torch.Tensor, max_len: int) -> int:
    """How many of the pairs among src_mask used in the encoder and the decoder, in the encoder only, in the
    decoder only and nowhere decode differently (with no EOS; 6: each pair). On an untrained model one use of
    the mask often changes nothing, and the mistakes that leave out one, the other or both look alike."""
    outputs = [tfm_ref.greedy_decode(model, src, src_mask, bos_id=BOS, eos_id=-1, max_len=max_len)]
    outputs += [_greedy_variant(**kwargs)(model, src, src_mask, bos_id=BOS, eos_id=-1, max_len=max_len)
                for kwargs in (dict(mask_to="encode"), dict(mask_to="decode"), dict(use_mask=False))]
    return sum(not torch.equal(a, b) for i, a in enumerate(outputs) for b in outputs[i + 1:])


@torch.no_grad()
def _dropout_shows(model, src: torch.Tensor, src_mask: torch.Tensor | None, trajectory: torch.Tensor, eos: int,
                   gen: torch.Generator) -> bool:
    """Does the model, switched to training mode, decode other tokens than ``trajectory`` (its eval-mode decoding with
    no EOS) before the rows end at ``eos``, on a draw of its dropout masks?"""
    length = min(int(_first_hits(trajectory, eos).max()) + 1, trajectory.shape[1])  # the reference's output length
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        trained = tfm_ref.greedy_decode(model, src, src_mask, bos_id=BOS, eos_id=-1, max_len=trajectory.shape[1])
        model.eval()
    return not torch.equal(trained[:, :length], trajectory[:, :length])


def _decode_inputs(model_class: type = RandomTransformer, use_mask: bool = True, tries: int = 15,
                   dropout: float = 0.0, endless: bool = False, goes_on: bool = False):
    """The first of ``tries`` random models whose decoding is not one repeated token and on which each
    mistake of the catalogue shows (the end token shows the padding after it; src_mask matters in the encoder
    and in the decoder; the end token lets a forgetting `finished` flag show); failing that, the first that comes
    closest, in that order. ``endless``: eos_id is a token that no row produces, so every row runs max_len steps (the
    model is then drawn for the mask's uses alone). ``goes_on``: a row that has ended would go on generating other
    tokens before max_len, rather than a forgetting flag (a loop that ignores eos_id altogether then differs from one
    that only never stops, in a batch of one). With ``dropout``, first a model whose tokens change when its dropout is
    switched on (a loop that calls model.train() then shows)."""
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        best, best_rank = None, (False, False, -1, False)
        for attempt in range(tries):
            model, src, src_mask = _model_and_source(gen, dims, model_class, dropout)
            src_mask = src_mask if use_mask else None
            trajectory = tfm_ref.greedy_decode(model, src, src_mask, bos_id=BOS, eos_id=-1, max_len=dims["L"])
            if not _varied(trajectory):  # with no EOS, it runs max_len steps
                if best is None and attempt == tries - 1:
                    eos = _never_produced(trajectory, gen) if endless else _choose_eos(trajectory, gen, goes_on)[0]
                    best = (model, src, src_mask, eos)
                continue
            mask_uses = 6 if src_mask is None else _mask_uses_told_apart(model, src, src_mask, dims["L"])
            if endless:  # no row ends: only the mask's uses to show
                eos, padded, restarts, went_on = _never_produced(trajectory, gen), True, True, True
            else:
                eos, padded, restarts, went_on = _choose_eos(trajectory, gen, goes_on)
            one_row = dims["B"] == 1  # one row cannot end before another
            # padding after the end token first: it shows only where some rows end before others, which a
            # batch of one cannot (the mask's uses show in the visible batch of one as well)
            shows_dropout = not dropout or _dropout_shows(model, src, src_mask, trajectory, eos, gen)
            rank = (shows_dropout, padded or one_row, mask_uses, went_on if goes_on else restarts or one_row)
            if rank > best_rank:
                best, best_rank = (model, src, src_mask, eos), rank
            if rank == (True, True, 6, True):
                break
        model, src, src_mask, eos = best
        return Call(model, src, src_mask, bos_id=BOS, eos_id=eos, max_len=dims["L"])
    return inputs


def _greedy_variant(*, stop: bool = True, pad: bool = True, keep_bos: bool = False, start: int | None = None,
                    use_mask: bool = True, invert_mask: bool = False, whole_prefix: bool = False,
                    no_cache_first_position: bool = False, newest_only_uncached: bool = False,
                    training_mode: bool = False, max_len_counts_bos: bool = False, stop_at_first_end: bool = False,
                    pad_id: int | None = None, mask_to: str = "both", bos_every_step: bool = False,
                    extra_step: bool = False, stop_before_append: bool = False, finished_overwritten: bool = False):
    """Greedy decoding with one thing done wrong (the keywords say which). ``stop_at_first_end``: breaks when any
    sequence has ended; ``pad_id``: finished sequences padded with it instead of eos_id; ``mask_to``: src_mask given
    to "encode" or "decode" only; ``bos_every_step``: out[:, :1] fed each time; ``extra_step``: max_len + 1 steps;
    ``stop_before_append``: the step where every row gives eos_id breaks before appending it; ``finished_overwritten``:
    finished = (next_token == eos_id), not accumulated."""
    @torch.no_grad()
    def greedy_decode(model, src, src_mask=None, *, bos_id, eos_id, max_len):
        if training_mode:
            model.train()
        src_mask = src_mask if use_mask else None
        if invert_mask and src_mask is not None:
            src_mask = ~src_mask
        memory = model.encode(src, src_mask if mask_to != "decode" else None)  # (B, S, D)
        decode_mask = src_mask if mask_to != "encode" else None
        out = torch.full((src.shape[0], 1), bos_id if start is None else start, dtype=torch.long)  # (B, 1)
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        cache = None if no_cache_first_position or newest_only_uncached else model.new_cache()
        steps = max_len - 1 if max_len_counts_bos else max_len + 1 if extra_step else max_len
        for _ in range(steps):
            step_input = out if whole_prefix or cache is None and not newest_only_uncached else \
                out[:, :1] if bos_every_step else out[:, -1:]
            logits = model.decode(step_input, memory, decode_mask, cache)  # (B, t, V)
            next_token = logits[:, 0 if no_cache_first_position else -1].argmax(dim=-1)  # (B,)
            if finished_overwritten:
                finished = next_token == eos_id
            if pad:
                next_token = torch.where(finished, torch.full_like(next_token, eos_id if pad_id is None else pad_id),
                                         next_token)
            if stop_before_append and bool((next_token == eos_id).all()):
                break
            out = torch.cat([out, next_token[:, None]], dim=1)
            if not finished_overwritten:
                finished |= next_token == eos_id
            if stop and (finished.any() if stop_at_first_end else finished.all()):
                break
        return out if keep_bos else out[:, 1:]
    return greedy_decode


GREEDY = Exercise(
    name="greedy_decode",
    key="greedy",
    reference=tfm_ref.greedy_decode,
    inputs=_decode_inputs(),
    arg_names=("model", "src", "src_mask"),
    shapes=[dict(B=2, S=3, L=5), dict(B=3, S=6, L=8)],
    # the first source's row ends before max_len and would go on after its end token: a loop that ignores eos_id
    # altogether fails there, where a `finished` flag that forgets cannot (one row ends when all do), and no mistake
    # of the mask can (there is none); the batch of 3 is drawn so that its rows end at different steps (padding after
    # EOS shows); the source of one is decoded by a model built with dropout (in eval mode): a loop that switches
    # dropout on shows; the endless case shows the number of steps, which rows that all end early hide
    visible=[Case("one source without padding (src_mask=None) that ends before max_len", dims=dict(B=1, S=5, L=8),
                  inputs=_decode_inputs(use_mask=False, goes_on=True)),
             Case("a padded batch of 3 sources"),
             Case("one source, a model built with dropout 0.3 (in eval mode)", dims=dict(B=1, S=5, L=8),
                  inputs=_decode_inputs(dropout=0.3)),
             Case("no sequence ends: max_len tokens each", dims=dict(B=3, S=5, L=6), inputs=_decode_inputs(endless=True))],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 5), S=(1, 8), L=(1, 10))),
        Case("a larger batch", dims=dict(B=6, S=7, L=10)),
        Case("src_mask=None", inputs=_decode_inputs(use_mask=False)),
        Case("max_len = 1", dims=dict(B=3, S=4, L=1)),
        Case("a model built with dropout 0.3, in eval mode: nothing random", inputs=_decode_inputs(dropout=0.3)),
        Case("uses the KV cache (one new token per decode call)", inputs=_decode_inputs(CacheOnlyTransformer)),
    ],
    mistakes=[
        Mistake("no early stop", _greedy_variant(stop=False),
                "decoding must stop as soon as every sequence has produced eos_id; yours always runs max_len steps.",
                "after each step: if finished.all(): break."),
        Mistake("finished sequences not padded with EOS", _greedy_variant(pad=False),
                "once a sequence has produced eos_id, every later token of it must be eos_id, even while other "
                "rows go on; yours keeps generating after the end.",
                "keep a (B,) `finished` flag: next_token = torch.where(finished, eos_id, next_token), then "
                "finished |= next_token == eos_id."),
        Mistake("stopped when the first sequence ends (any instead of all)", _greedy_variant(stop_at_first_end=True),
                "decoding goes on until *every* sequence has produced eos_id; yours stops as soon as one has, and "
                "the others are cut off mid-sentence.",
                "if finished.all(): break."),
        Mistake("`finished` overwritten each step instead of accumulated", _greedy_variant(finished_overwritten=True),
                "a sequence that has ended stays ended: `finished` must remember every earlier eos_id; set anew "
                "from each step's token, it forgets them, so an ended row generates again and the loop stops only "
                "when all rows give eos_id at the same step.",
                "finished |= next_token == eos_id, after the torch.where."),
        Mistake("eos_id ignored: no early stop and no padding", _greedy_variant(stop=False, pad=False),
                "eos_id ends a sequence: once a row has produced it, every later token of that row is eos_id, and "
                "decoding stops as soon as every row has ended; yours never looks at eos_id, so it runs max_len "
                "steps and rows go on generating after their end.",
                "keep a (B,) `finished` flag: next_token = torch.where(finished, eos_id, next_token); append it; "
                "finished |= next_token == eos_id; if finished.all(): break."),
        Mistake("finished sequences padded with PAD instead of EOS", _greedy_variant(pad_id=PAD),
                "in this course a sequence that has ended keeps producing eos_id (tfm_ref.greedy_decode, "
                "beam_search and the notebook's instructions); yours fills the rest of the row with another id.",
                "torch.where(finished, eos_id, next_token)."),
        Mistake("the step where every row ends not appended", _greedy_variant(stop_before_append=True),
                "the eos_id that ends the last sequences is part of the output; yours breaks out of the loop "
                "before appending that step's tokens.",
                "append first, then test: out = torch.cat([out, next_token[:, None]], dim=1); finished |= …; "
                "if finished.all(): break."),
        Mistake("one token too many (max_len + 1 steps)", _greedy_variant(extra_step=True),
                "max_len is the number of tokens generated; yours generates one more when no EOS comes first.",
                "for _ in range(max_len)."),
        Mistake("max_len counts the BOS", _greedy_variant(max_len_counts_bos=True),
                "max_len is the number of tokens generated, the BOS not counted; yours stops one token short when "
                "no EOS comes first.",
                "for _ in range(max_len): one new token each time round."),
        Mistake("output keeps the BOS", _greedy_variant(keep_bos=True),
                "the result holds the generated tokens only; yours starts with the bos_id it was fed.",
                "return out[:, 1:]."),
        Mistake("decoding not started from BOS", _greedy_variant(start=PAD),
                "the first decoder input is bos_id, the start token the model was trained with.",
                "out = torch.full((B, 1), bos_id)."),
        Mistake("source padding mask not used", _greedy_variant(use_mask=False),
                "neither the encoder nor the cross-attention may look at source padding; yours does.",
                "pass src_mask to model.encode(src, src_mask) and to model.decode(..., src_mask, cache) at every "
                "step."),
        Mistake("source padding mask inverted", _greedy_variant(invert_mask=True),
                "src_mask is True at the real tokens (the course's convention); inverted, the model attends to the "
                "padding and to nothing else.",
                "pass src_mask as it is to model.encode and model.decode."),
        Mistake("src_mask given to the encoder only", _greedy_variant(mask_to="encode"),
                "the source padding must be masked in two places, the encoder's self-attention and the decoder's "
                "cross-attention at every step; yours masks it in the encoder only, so the decoder still reads "
                "the padding's memory.",
                "pass src_mask to model.decode at every step as well as to model.encode."),
        Mistake("src_mask given to the decoder only", _greedy_variant(mask_to="decode"),
                "the source padding must be masked in two places, the encoder's self-attention and the decoder's "
                "cross-attention; yours masks it in the decoder only, so the encoder mixes the padding into the "
                "real tokens' memory.",
                "memory = model.encode(src, src_mask)."),
        Mistake("the BOS fed to the cache at every step", _greedy_variant(bos_every_step=True),
                "each step feeds the token generated last, out[:, -1:]; yours feeds the first, the BOS, every "
                "time, so the model never sees what it generated.",
                "model.decode(out[:, -1:], memory, src_mask, cache)."),
        Mistake("whole prefix fed while using the cache", _greedy_variant(whole_prefix=True),
                "with a KV cache the earlier tokens are already stored; feeding them again stores them twice.",
                "feed only the newest token: model.decode(out[:, -1:], memory, src_mask, cache)."),
        Mistake("only the newest token fed, and nothing kept of the rest", _greedy_variant(newest_only_uncached=True),
                "the decoder sees only what it is given and what a KV cache keeps: fed the newest token alone, "
                "with no cache (or a new one every step), it predicts from that one token at position 0, blind to "
                "the tokens before it.",
                "one cache for the whole loop, cache = model.new_cache() before it, and "
                "model.decode(out[:, -1:], memory, src_mask, cache); or, with no cache, the whole prefix `out`."),
        Mistake("dropout switched on while decoding", _greedy_variant(training_mode=True),
                "the model comes in eval mode and decoding must leave it so: model.train() switches dropout back "
                "on, and the same source would decode differently from one call to the next.",
                "no model.train() in greedy_decode (the training loop calls it); model.eval() before decoding, "
                "under torch.no_grad()."),
        Mistake("argmax of the first position", _greedy_variant(no_cache_first_position=True),
                "the logits are (B, t, V) and the next token is predicted at the last position; you took the "
                "first.",
                "logits[:, -1].argmax(dim=-1)."),
    ],
    allowed=MODEL_METHODS,
)


# --------------------------------------------------------------------------- 4. the 2017 learning-rate schedule

def _schedule(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["step"], dims["D"], dims["W"])


def _noam_max(step, d_model, warmup):
    return d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)


def _noam_step_plus_one(step, d_model, warmup):
    step = step + 1  # as if the step counted from 0
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def _noam_no_width(step, d_model, warmup):
    return min(step**-0.5, step * warmup**-1.5)


def _noam_width_up(step, d_model, warmup):
    return d_model**0.5 * min(step**-0.5, step * warmup**-1.5)


def _noam_warmup_root(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-0.5)


NOAM = Exercise(
    name="noam_lr",
    key="noam",
    reference=noam_lr,
    inputs=_schedule,
    arg_names=("step", "d_model", "warmup"),
    shapes=[dict(step=1, D=4, W=2), dict(step=100, D=512, W=4000)],
    visible=[Case("after warmup: step 100 000", dims=dict(step=100_000, D=512, W=4000)),
             Case("during warmup: step 100 of 4000", dims=dict(step=100, D=512, W=4000))],
    hidden=[
        Case("the peak: step = warmup", dims=dict(step=4000, D=512, W=4000)),
        Case("step 1", dims=dict(step=1, D=1024, W=8000)),
        Case("random steps and widths", dims=random_dims(step=(1, 20000), D=(16, 2048), W=(10, 10000))),
        Case("random, after warmup", dims=random_dims(step=(5000, 90000), D=(16, 2048), W=(10, 4000))),
    ],
    mistakes=[
        Mistake("warmup^−0.5 instead of warmup^−1.5", _noam_warmup_root,
                "the warmup line must meet the decay step^−0.5 exactly at step = warmup; with warmup^−0.5 it does "
                "not.",
                "step * warmup ** -1.5."),
        # step ** 0.5 in the decay gives the same rates: it stays above the warmup line, which min then picks
        Mistake("the rate stays on the warmup line (max instead of min, or step^+0.5)", _noam_max,
                "after warmup the rate decays as step^−0.5; yours keeps rising on the warmup line. Either the two "
                "terms are combined with max (the schedule is the smaller of them), or the decay is written "
                "step^0.5, which grows and so is never the smaller.",
                "min(step ** -0.5, step * warmup ** -1.5), with the minus sign in step ** -0.5."),
        Mistake("step counted from 0 (step + 1)", _noam_step_plus_one,
                "step already counts from 1, the first update; adding 1 moves the whole schedule one step on.",
                "use step as it is given."),
        Mistake("missing d_model^−0.5", _noam_no_width,
                "the whole schedule is scaled by d_model^−0.5 (smaller steps for wider models); yours is not.",
                "multiply by d_model ** -0.5."),
        Mistake("d_model^0.5 instead of d_model^−0.5", _noam_width_up,
                "the width factor shrinks the rate for wider models: its exponent is negative.",
                "d_model ** -0.5, not d_model ** 0.5."),
    ],
)


# --------------------------------------------------------------------------- 5. label-smoothed cross-entropy

LOSS_LIBRARY = (F.cross_entropy, F.nll_loss, nn.CrossEntropyLoss, nn.NLLLoss, F.kl_div, nn.KLDivLoss,
                F.binary_cross_entropy, torch._C._nn.cross_entropy_loss, torch._C._nn.nll_loss, torch._C._nn.nll_loss_nd,
                torch._C._nn.nll_loss2d)


def _loss_inputs(gen: torch.Generator, dims, dtype: torch.dtype, smoothing: float = 0.1,
                 pad_last: bool = False, confident: float = 0.0) -> Call:
    """Padded targets, PAD (0) ignored; with ``pad_last`` the padding id is V − 1 instead. The first row is
    full, the others end before T (when T ≥ 2), so a batch of two or more always has padding. ``confident``:
    added to the target's logit, a model that predicts well (then the smoothed target's ε/V and an ε spread
    some other way give clearly different losses; on random logits their difference averages out)."""
    logits = randn(gen, dims["B"], dims["T"], dims["V"], dtype=dtype) * 2
    pad = dims["V"] - 1 if pad_last else PAD
    target = torch.randint(0 if pad_last else 1, dims["V"] - 1 if pad_last else dims["V"], (dims["B"], dims["T"]),
                           generator=gen)
    lengths = torch.randint(1, max(dims["T"] - 1, 1) + 1, (dims["B"],), generator=gen)
    lengths[0] = dims["T"]
    if confident:
        logits = logits.scatter_add(-1, target[..., None], torch.full_like(logits[..., :1], confident))
    target = target.masked_fill(~tfm_ref.padding_mask(lengths, dims["T"]), pad)  # padded targets: ignored
    return Call(logits, target, smoothing=smoothing, ignore_index=pad)


def _smoothed_terms(logits, target, smoothing, ignore_index, off_value=None, log_probs=None):
    """Per-position loss against the smoothed target and the mask of real positions (broken versions share it)."""
    log_probs = logits.log_softmax(dim=-1) if log_probs is None else log_probs  # (B, T, V)
    n_classes = logits.shape[-1]
    off = smoothing / n_classes if off_value is None else off_value
    on = 1 - smoothing + (smoothing / n_classes if off_value is None else 0.0)
    dist = torch.full_like(log_probs, off).scatter(-1, target[..., None], on)  # (B, T, V): the smoothed target
    return -(dist * log_probs).sum(-1), target != ignore_index  # (B, T), (B, T)


def _loss_wrong_off_value(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index, off_value=smoothing / (logits.shape[-1] - 1))
    return loss[real].mean()


def _loss_padding_counted(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, _ = _smoothed_terms(logits, target, smoothing, ignore_index)
    return loss.mean()


def _loss_mean_over_all(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index)
    return (loss * real).sum() / target.numel()


def _loss_sum(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index)
    return loss[real].sum()


def _loss_smoothing_summed(logits, target, smoothing=0.1, ignore_index=PAD):
    log_probs = logits.log_softmax(dim=-1)  # (B, T, V)
    nll = -log_probs.gather(-1, target[..., None])[..., 0]  # (B, T)
    loss = (1 - smoothing) * nll - smoothing * log_probs.sum(dim=-1)  # ε · Σ_v, not ε · mean_v
    return loss[target != ignore_index].mean()


def _loss_per_sequence(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index)
    return loss[real].sum() / target.shape[0]


def _loss_fixed_smoothing(logits, target, smoothing=0.1, ignore_index=PAD):
    return label_smoothed_cross_entropy(logits, target, 0.1, ignore_index)  # the argument never read


def _loss_no_smoothing(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, 0.0, ignore_index)
    return loss[real].mean()


def _loss_annotated_transformer(logits, target, smoothing=0.1, ignore_index=PAD):
    # The Annotated Transformer's target: ε/(V − 2) on the classes that are neither correct nor padding
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index, off_value=smoothing / (logits.shape[-1] - 2))
    log_probs = logits.log_softmax(dim=-1)
    loss = loss + smoothing / (logits.shape[-1] - 2) * log_probs[..., ignore_index]  # its padding column zeroed
    return loss[real].mean()


def _loss_raw_logits(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index, log_probs=logits)
    return loss[real].mean()


def _loss_log_of_softmax(logits, target, smoothing=0.1, ignore_index=PAD):
    probs = tfm_ref.softmax(logits, dim=-1)  # (B, T, V); underflows to 0 for very unlikely classes
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index, log_probs=torch.log(probs))
    return loss[real].mean()


def _loss_log_of_naive_softmax(logits, target, smoothing=0.1, ignore_index=PAD):
    exps = torch.exp(logits)  # overflows to inf for a logit above about 88 (float32): inf / inf = NaN
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index,
                                 log_probs=torch.log(exps / exps.sum(dim=-1, keepdim=True)))
    return loss[real].mean()


LABEL_SMOOTHING = Exercise(
    name="label_smoothed_cross_entropy",
    key="label_smoothing",
    reference=label_smoothed_cross_entropy,
    inputs=_loss_inputs,
    arg_names=("logits", "target"),
    shapes=[dict(B=1, T=1, V=3), dict(B=2, T=2, V=3), dict(B=2, T=3, V=5), dict(B=3, T=5, V=11)],
    # a confident model and huge logits are visible: an ε spread another way, and log(softmax), fail before grading
    visible=[Case("padded targets, ε = 0.1"),
             # ε ≠ 0.1 (the default): a loss that does not use the `smoothing` it is given fails the visible check
             Case("a model that predicts well (the target's logit 5 above), ε = 0.2",
                  inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype, 0.2, confident=5.0)),
             Case("huge logits", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype).scaled(1e3))],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 8), V=(2, 30))),
        Case("ε = 0 (plain cross-entropy)", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype, 0.0)),
        Case("ε = 0.3", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype, 0.3)),
        Case("ignore_index = V − 1, not 0", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype, pad_last=True)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("ε/(V−1) on the other classes", _loss_wrong_off_value,
                "in this course (and in PyTorch's label_smoothing) ε/V goes to every class, the correct one "
                "included; you spread ε over the V − 1 others.",
                "q = (1 − ε)·one-hot + ε/V: the correct class gets 1 − ε + ε/V."),
        Mistake("ε/(V−2) with the padding class zeroed (The Annotated Transformer)", _loss_annotated_transformer,
                "The Annotated Transformer spreads ε over the V − 2 classes that are neither correct nor padding, "
                "and gives the padding class 0; here, as in PyTorch's label_smoothing, ε/V goes to every class, "
                "the correct one and the padding class included.",
                "q = (1 − ε)·one-hot + ε/V over all V classes; ignore_index only drops whole positions from the "
                "mean."),
        Mistake("raw logits instead of log-probabilities", _loss_raw_logits,
                "cross-entropy weighs the log-probabilities, log_softmax of the logits; with the logits themselves "
                "the loss can even come out negative, which a cross-entropy never is.",
                "log_probs = logits.log_softmax(dim=-1), then −(q · log_probs).sum(-1)."),
        Mistake("padding positions counted", _loss_padding_counted,
                "positions whose target is ignore_index (padding) add nothing to the loss; yours count them.",
                "real = target != ignore_index; average the loss over the real positions only."),
        Mistake("averaged over all positions, padding included", _loss_mean_over_all,
                "the mean is over the real positions; dividing by B·T counts the padding in the denominator.",
                "(loss * real).sum() / real.sum()."),
        Mistake("summed instead of averaged", _loss_sum,
                "the loss is the mean over the real positions (F.cross_entropy's default reduction), not the sum.",
                "divide the sum by real.sum()."),
        Mistake("divided by the batch size", _loss_per_sequence,
                "the mean is over the real target tokens, not over the sequences: divided by the batch size, the "
                "loss is per sequence and grows with the length.",
                "loss[real].mean(), that is loss.sum() over the real positions / real.sum()."),
        Mistake("smoothing term summed over the classes, not averaged", _loss_smoothing_summed,
                "each class gets ε/V of the target, so the smoothing term is ε · mean_v(−log p_v): ε spread over "
                "the V classes. Summing −log p_v over the classes gives every class ε, V times too much smoothing.",
                "(1 − ε)·(−log p_y) + ε·(−log_probs).mean(dim=-1)."),
        Mistake("smoothing ignored", _loss_no_smoothing,
                "the `smoothing` argument ε is not used: your target is the plain one-hot.",
                "the target puts 1 − ε + ε/V on the correct class and ε/V elsewhere: "
                "(1 − ε)·(−log p_y) + ε·mean_v(−log p_v)."),
        Mistake("ε fixed at 0.1 instead of the `smoothing` given", _loss_fixed_smoothing,
                "the loss smooths with ε = 0.1 whatever `smoothing` it is given: 0.1 is the 2017 paper's choice and "
                "the argument's default, but the caller chooses ε.",
                "use the argument: (1 − smoothing)·(−log p_y) + smoothing·mean_v(−log p_v)."),
        Mistake("log of softmax instead of log_softmax", _loss_log_of_softmax,
                "softmax underflows to 0 for very unlikely classes and log(0) = −inf, which smoothing multiplies "
                "by ε/V > 0 (a log-sum-exp written without subtracting the maximum overflows the other way).",
                "logits.log_softmax(dim=-1) (x − logsumexp(x)) stays finite."),
        Mistake("log of exp(logits) / sum, without subtracting the maximum", _loss_log_of_naive_softmax,
                "exp of a large logit overflows (exp(89) is inf in float32), and inf / inf is NaN; and where it "
                "does not, a softmax that underflows to 0 gives log(0) = −inf, which smoothing multiplies by "
                "ε/V > 0. Logits of a trained model are often that large.",
                "logits.log_softmax(dim=-1), which computes x − max − log Σ exp(x − max) and stays finite."),
    ],
    forbidden=LOSS_LIBRARY,
)

# --------------------------------------------------------------------------- 6. one step of beam search

def beam_step_reference(scores: torch.Tensor, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of beam search: the K most likely one-token extensions of K hypotheses (the step
    inside `tfm_ref.beam_search`).

    Args:
        scores: (B, K) log-probability of each hypothesis so far (−inf for a slot not in use).
        log_probs: (B, K, V) log-probability of every next token after each hypothesis.
    Returns:
        the new scores (B, K), best first; the hypothesis each one extends, ``parent`` (B, K) in
        0 … K − 1; and the token it appends, ``token`` (B, K).
    """
    batch, k, vocab = log_probs.shape
    candidates = (scores[:, :, None] + log_probs).reshape(batch, k * vocab)  # (B, K·V): hypothesis-major
    best, index = candidates.topk(k, dim=-1)  # (B, K) each, best first
    return best, index // vocab, index % vocab


def _beam_inputs(first_step: bool = False, finished: bool = False, offset: float = 0.0, leader: bool = False):
    """Running scores (B, K) and next-token log-probabilities (B, K, V). ``first_step``: only hypothesis
    0 is live (the others are −inf); ``finished``: hypothesis 0 has ended, so only <eos> may follow, at no cost;
    ``offset``: added to every score (long hypotheses have scores far below 0); ``leader``: in each row one
    random hypothesis is 6 ahead of the others, so that the K best all extend it (on close scores they often
    come one per hypothesis, where K greedy searches side by side pick them too)."""
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        # Close scores and flat distributions: the K best often include two tokens after one hypothesis.
        scores = offset - torch.rand(dims["B"], dims["K"], generator=gen).to(dtype)  # (B, K)
        log_probs = randn(gen, dims["B"], dims["K"], dims["V"], dtype=dtype).log_softmax(dim=-1)  # (B, K, V)
        if leader:
            ahead = torch.randint(0, dims["K"], (dims["B"], 1), generator=gen)
            scores = scores - 6.0 + torch.zeros_like(scores).scatter(1, ahead, 6.0)
        if first_step:
            scores[:, 1:] = float("-inf")
        if finished:
            eos = int(torch.randint(0, dims["V"], (1,), generator=gen))  # any token id may be <eos>
            log_probs[:, 0] = float("-inf")
            log_probs[:, 0, eos] = 0.0
        return Call(scores, log_probs)
    return inputs


def _beam_each_own_best(scores, log_probs):
    best, token = log_probs.max(dim=-1)  # (B, K): every hypothesis extended by its own best token only
    new, parent = (scores + best).sort(dim=-1, descending=True)
    return new, parent, token.gather(1, parent)


def _beam_best_per_token(scores, log_probs):
    best, parent = (scores[:, :, None] + log_probs).max(dim=1)  # (B, V): each token after its best hypothesis
    new, token = best.topk(scores.shape[1], dim=-1)
    return new, parent.gather(1, token), token


def _beam_step_only(scores, log_probs):
    return beam_step_reference(torch.zeros_like(scores), log_probs)


def _beam_multiplied(scores, log_probs):
    batch, k, vocab = log_probs.shape
    best, index = (scores[:, :, None] * log_probs).reshape(batch, k * vocab).topk(k, dim=-1)
    return best, index // vocab, index % vocab


def _beam_index_transposed(scores, log_probs):
    best, parent, token = beam_step_reference(scores, log_probs)
    index = parent * log_probs.shape[-1] + token  # the flat index, read as if it were token-major
    return best, index % log_probs.shape[1], index // log_probs.shape[1]


def _beam_lowest(scores, log_probs):
    batch, k, vocab = log_probs.shape
    best, index = (scores[:, :, None] + log_probs).reshape(batch, k * vocab).topk(k, dim=-1, largest=False)
    return best, index // vocab, index % vocab


def _beam_flat(scores, log_probs):
    """The reference's candidates (B, K·V): their best values and flat indices, and (K, V)."""
    batch, k, vocab = log_probs.shape
    best, index = (scores[:, :, None] + log_probs).reshape(batch, k * vocab).topk(k, dim=-1)
    return best, index, k, vocab


def _beam_index_by_k(scores, log_probs):
    best, index, k, _ = _beam_flat(scores, log_probs)
    return best, index // k, index % k


def _beam_parent_by_k(scores, log_probs):
    best, index, k, vocab = _beam_flat(scores, log_probs)
    return best, index // k, index % vocab


def _beam_parent_token_swapped(scores, log_probs):
    best, index, _, vocab = _beam_flat(scores, log_probs)
    return best, index % vocab, index // vocab


def _beam_own_best_unsorted(scores, log_probs):
    best, token = log_probs.max(dim=-1)  # (B, K): each hypothesis's best token, in hypothesis order
    return scores + best, torch.arange(scores.shape[1]).expand_as(token), token


def _beam_first_hypothesis_only(scores, log_probs):
    best, token = (scores[:, :1, None] + log_probs[:, :1]).reshape(scores.shape[0], -1).topk(scores.shape[1], dim=-1)
    return best, torch.zeros_like(token), token


def _beam_best_last(scores, log_probs):
    batch, k, vocab = log_probs.shape
    candidates = (scores[:, :, None] + log_probs).reshape(batch, k * vocab)
    index = candidates.argsort(dim=-1)[:, -k:]  # the K best, ascending: the best last
    return candidates.gather(1, index), index // vocab, index % vocab


def _beam_token_score_returned(scores, log_probs):
    _, index, k, vocab = _beam_flat(scores, log_probs)
    return log_probs.reshape(scores.shape[0], k * vocab).gather(1, index), index // vocab, index % vocab


def _beam_probabilities_added(scores, log_probs):
    batch, k, vocab = log_probs.shape
    best, index = (scores[:, :, None] + log_probs.exp()).reshape(batch, k * vocab).topk(k, dim=-1)
    return best, index // vocab, index % vocab


def _beam_ranked_by_token(scores, log_probs):
    batch, k, vocab = log_probs.shape
    _, index = log_probs.reshape(batch, k * vocab).topk(k, dim=-1)  # ranked by the new token alone
    return (scores[:, :, None] + log_probs).reshape(batch, k * vocab).gather(1, index), index // vocab, index % vocab


BEAM_STEP = Exercise(
    output_names=("scores", "parents", "tokens"),
    name="beam_step",
    reference=beam_step_reference,
    inputs=_beam_inputs(),
    arg_names=("scores", "log_probs"),
    shapes=[dict(B=1, K=2, V=3), dict(B=2, K=2, V=4), dict(B=2, K=3, V=7)],
    visible=[Case("3 hypotheses per source, 7 tokens"),
             Case("one hypothesis far ahead: the K best may all extend it", inputs=_beam_inputs(leader=True))],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), K=(1, 5), V=(5, 12))),
        Case("the first step: only hypothesis 0 is live", inputs=_beam_inputs(first_step=True)),
        Case("a finished hypothesis: only <eos>, at no cost", dims=dict(B=3, K=4, V=9), inputs=_beam_inputs(finished=True)),
        Case("beam size 1 (greedy)", dims=dict(B=3, K=1, V=6)),
        Case("long hypotheses: scores near −120 (their probabilities underflow in float32)",
             inputs=_beam_inputs(offset=-120.0)),
        Case("float64", dtype=torch.float64),
    ],
    mistakes=[
        Mistake("each hypothesis extended by its own best token only", _beam_each_own_best,
                "that is K greedy searches side by side: the K best extensions may all come from one hypothesis, "
                "so the K·V candidates must compete together.",
                "add scores[:, :, None] to log_probs, flatten the last two axes to (B, K·V), and take topk(K)."),
        Mistake("each token extended from its best hypothesis only", _beam_best_per_token,
                "the best K extensions may put one token after two different hypotheses; keeping each token's best "
                "hypothesis first drops the second.",
                "flatten the K·V candidates, (scores[:, :, None] + log_probs).reshape(B, K * V), and take topk(K) "
                "over all of them."),
        Mistake("running score not added", _beam_step_only,
                "a hypothesis is ranked by the log-probability of the whole sequence, its score so far plus the "
                "new token's; yours ranks the new token alone.",
                "candidates = scores[:, :, None] + log_probs, (B, K, V)."),
        # before "… own best token, in hypothesis order": where the K best new tokens are one per hypothesis, the
        # two agree, and only this one is wrong on other inputs too
        Mistake("ranked by the new token alone, the running score added afterwards", _beam_ranked_by_token,
                "a hypothesis is ranked by the log-probability of the whole sequence, its score so far plus the "
                "new token's; yours picks the K best new tokens first and adds the running score only to the "
                "values it returns.",
                "rank the sums: candidates = scores[:, :, None] + log_probs, flattened, then topk(K) of those."),
        Mistake("log-probabilities multiplied instead of added", _beam_multiplied,
                "probabilities multiply, so log-probabilities add: log(p·q) = log p + log q.",
                "scores[:, :, None] + log_probs, not scores[:, :, None] * log_probs."),
        Mistake("flat index decoded as (token, hypothesis)", _beam_index_transposed,
                "flattening (B, K, V) puts hypothesis k's candidates at k·V … k·V + V − 1, so the flat index is "
                "hypothesis-major; you read it the other way round.",
                "parent = index // V, token = index % V (V = log_probs.shape[-1])."),
        Mistake("flat index decoded with K instead of V", _beam_index_by_k,
                "hypothesis k's V candidates sit at k·V … k·V + V − 1 of the flat (B, K·V) row, so the row is cut "
                "into blocks of V, the vocabulary size; dividing by K, the beam size, cuts it into blocks of the "
                "wrong length, and the parents and tokens come out wrong.",
                "parent = index // V, token = index % V, with V = log_probs.shape[-1]."),
        Mistake("parent decoded with K instead of V (the token right)", _beam_parent_by_k,
                "hypothesis k's V candidates sit at k·V … k·V + V − 1 of the flat row, so the parent is the flat "
                "index divided by V, the vocabulary size, as the token is the remainder by V; dividing by K, the "
                "beam size, gives parents past the beam or the wrong one.",
                "parent = index // V, with V = log_probs.shape[-1], as for token = index % V."),
        Mistake("parent and token swapped", _beam_parent_token_swapped,
                "in the flat index k·V + v, the quotient by V is the hypothesis and the remainder the token; yours "
                "returns the remainder as the parent and the quotient as the token.",
                "parent = index // V, token = index % V."),
        Mistake("each hypothesis extended by its own best token, in hypothesis order", _beam_own_best_unsorted,
                "that is K greedy searches side by side: the K best extensions may all come from one hypothesis, "
                "so the K·V candidates must compete together; and the survivors come best first, not in the "
                "order of the hypotheses they extend.",
                "add scores[:, :, None] to log_probs, flatten the last two axes to (B, K·V), and take topk(K)."),
        Mistake("only hypothesis 0 extended", _beam_first_hypothesis_only,
                "all K live hypotheses are extended, and their K·V candidates compete together; yours takes "
                "the K best tokens after hypothesis 0 alone (right only at the first step, where the others are "
                "−inf).",
                "scores[:, :, None] + log_probs over every hypothesis, flattened to (B, K·V), then topk(K)."),
        Mistake("the K best kept, but the best last", _beam_best_last,
                "the K survivors are the right ones, but they must come best first (slot 0 is the best "
                "hypothesis); argsort sorts ascending, so its last K put the best at the end.",
                "topk(K, dim=-1), which returns the largest first; or argsort(descending=True)[:, :K]."),
        Mistake("the new token's log-probability returned as the score", _beam_token_score_returned,
                "the survivors are right, but the score a hypothesis carries on is the log-probability of its "
                "whole sequence, its old score plus the new token's; yours returns the new token's alone, so the "
                "next step ranks by one token.",
                "return the candidates' values themselves: best, from candidates.topk(K)."),
        Mistake("probabilities added to the log-probability score", _beam_probabilities_added,
                "a score is a log-probability, so the new token's log-probability is what adds to it; yours adds "
                "its probability, exp(log p) (or softmax of log_probs, the same thing), which mixes two scales.",
                "scores[:, :, None] + log_probs, with log_probs as they come."),
        Mistake("the K lowest scores kept", _beam_lowest,
                "a higher log-probability is a likelier sequence; you kept the least likely candidates.",
                "topk(K) keeps the largest (largest=True is its default; argsort sorts ascending)."),
    ],
    forbidden=(beam_step_reference,),
    withheld=(tfm_ref.beam_search,),  # the step is inside it
)

EXERCISES = (ENCODER_BLOCK, DECODER_BLOCK, GREEDY, NOAM, LABEL_SMOOTHING, BEAM_STEP)
