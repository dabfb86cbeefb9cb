"""Chapter 8 exercises — encoder and decoder blocks, greedy decoding with a KV cache, the 2017
learning-rate schedule, label-smoothed cross-entropy.

    EncoderBlock: x = Res(x, SelfAttn(·, mask));  x = Res(x, FFN)
    DecoderBlock: x = Res(x, SelfAttn(·, causal)); x = Res(x, CrossAttn(·, memory, src pad)); x = Res(x, FFN)
    Res(x, f) = Norm(x + f(x)) (Post-Norm)  or  x + f(Norm(x)) (Pre-Norm)
    lr(step) = d_model^−0.5 · min(step^−0.5, step · warmup^−1.5)     (Vaswani et al. 2017, eq. 3)

The blocks are built from tfm_ref's `MultiHeadAttention`, `FeedForward` and `LayerNorm` (the
exercise is the wiring), so those are allowed; decoding drives a small random tfm_ref
`Transformer`, whose methods are allowed, while `tfm_ref.greedy_decode` is not. Each `Mistake`
is a broken version a student plausibly writes (`tests/test_exercises_ch08.py` proves each is
caught and named).

Shapes: B batch · S source positions · T target positions · D model width · H heads ·
F FFN width · L max_len (tokens to generate) · V vocabulary. Case flag in the sizes: ``pre`` (Pre-Norm).
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

from .. import wire
from ..checking import Call, Case, Exercise, Mistake, randn, random_dims
from ._modules import PerturbedModuleAdapter, functions_of
from .ch07_norms import (
    _res_always_post,
    _res_from_normalised,
    _res_no_residual,
    _res_norm_sublayer_only,
    residual,
)

__all__ = ["ENCODER_BLOCK", "DECODER_BLOCK", "GREEDY", "NOAM", "LABEL_SMOOTHING", "EXERCISES", "noam_lr",
           "label_smoothed_cross_entropy"]

BLOCK_LIBRARY = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder,
                 nn.TransformerDecoder, nn.Transformer)
BUILDING_BLOCKS = tuple(functions_of(tfm_ref.MultiHeadAttention, tfm_ref.FeedForward, tfm_ref.LayerNorm))

_BLOCK_KWARGS = PerturbedModuleAdapter(lambda dims: dict(d_model=dims["D"], n_heads=dims["H"], d_ff=dims["F"],
                                                         dropout=0.0, norm_first=bool(dims.get("pre"))))


def _padding(gen: torch.Generator, batch: int, length: int) -> torch.Tensor:
    """A (B, 1, 1, S) key mask from random lengths 1 … S (the first row is full)."""
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    lengths[0] = length
    return tfm_ref.key_mask(tfm_ref.padding_mask(lengths, length))


def _block_sizes(pre: bool):
    def draw(gen: torch.Generator) -> dict[str, int]:
        h = int(torch.randint(1, 4, (1,), generator=gen))
        dims = random_dims(B=(1, 3), T=(1, 6), S=(1, 7), F=(4, 24))(gen)
        return {**dims, "D": h * int(torch.randint(1, 5, (1,), generator=gen)), "H": h, **({"pre": 1} if pre else {})}
    return draw


# --------------------------------------------------------------------------- 1. EncoderBlock

def _encoder_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype), _padding(gen, dims["B"], dims["S"]))


def _encoder_no_mask(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype))


def _encoder_with(connect, *, use_mask: bool = True, shared_norm: bool = False, ffn_first: bool = False) -> type:
    """A tfm_ref.EncoderBlock wired with ``connect(x, sublayer, norm, norm_first)`` and one change."""
    def forward(self, x, mask=None):
        first = self.attn_residual.norm_first
        attend = lambda h: self.self_attn(h, mask=mask if use_mask else None)  # noqa: E731
        ffn_norm = self.attn_residual.norm if shared_norm else self.ffn_residual.norm
        steps = [(attend, self.attn_residual.norm), (self.ffn, ffn_norm)]
        for sublayer, norm in (steps[::-1] if ffn_first else steps):
            x = connect(x, sublayer, norm, first)
        return x
    return type("BrokenEncoderBlock", (tfm_ref.EncoderBlock,), {"forward": forward})


_BLOCK_MISTAKES = dict(
    post_only=("norm_first ignored (always Post-Norm)",
               "with norm_first=True every sublayer is x + sublayer(norm(x)) (Pre-Norm)."),
    pre_from_norm=("Pre-Norm: residual taken from the normalised input",
                   "in Pre-Norm the residual path carries x itself: x + sublayer(norm(x)), not norm(x) + …"),
    norm_inside=("Post-Norm: only the sublayer output normalised",
                 "Post-Norm normalises the sum: norm(x + sublayer(x)), not x + norm(sublayer(x))."),
    no_residual=("residual connection missing",
                 "each sublayer is wrapped in a residual connection: add its input back (x + …)."),
)


def _named(key: str, impl) -> Mistake:
    name, hint = _BLOCK_MISTAKES[key]
    return Mistake(name, impl, hint)


_ENCODER_SHAPES = [dict(B=1, S=1, D=2, H=1, F=4), dict(B=1, S=2, D=4, H=2, F=8), dict(B=2, S=3, D=8, H=2, F=16),
                   dict(B=2, S=5, D=16, H=4, F=32)]

ENCODER_BLOCK = Exercise(
    name="EncoderBlock",
    key="encoder_block",
    reference=tfm_ref.EncoderBlock,
    adapter=_BLOCK_KWARGS,
    inputs=_encoder_inputs,
    arg_names=("x", "mask"),
    shapes=_ENCODER_SHAPES,
    visible=[Case("Post-Norm block, padded batch"),
             Case("Pre-Norm block (norm_first=True)", dims=dict(B=2, S=5, D=16, H=4, F=32, pre=1))],
    hidden=[
        Case("random sizes, Post-Norm", dims=_block_sizes(False)),
        Case("random sizes, Pre-Norm", dims=_block_sizes(True)),
        Case("mask=None", inputs=_encoder_no_mask),
        Case("one position", dims=dict(B=2, S=1, D=8, H=2, F=16)),
        Case("float64 weights and inputs, Pre-Norm", dims=dict(B=2, S=4, D=8, H=2, F=16, pre=1), dtype=torch.float64),
        Case("gradients (input and every parameter), Pre-Norm", dims=dict(B=2, S=4, D=8, H=2, F=16, pre=1), grad=True),
    ],
    mistakes=[
        Mistake("padding mask ignored", _encoder_with(residual, use_mask=False),
                "pass the mask to the self-attention (self_attn(h, mask=mask)): padded positions must not be attended."),
        _named("post_only", _encoder_with(_res_always_post)),
        _named("pre_from_norm", _encoder_with(_res_from_normalised)),
        _named("norm_inside", _encoder_with(_res_norm_sublayer_only)),
        _named("no_residual", _encoder_with(_res_no_residual)),
        Mistake("one norm for both sublayers", _encoder_with(residual, shared_norm=True),
                "each sublayer has its own norm: attn_residual.norm around the attention, ffn_residual.norm "
                "around the FFN (their γ and β are learned separately)."),
        Mistake("FFN before self-attention", _encoder_with(residual, ffn_first=True),
                "the encoder block attends first, then applies the FFN to every position."),
    ],
    forbidden=BLOCK_LIBRARY,
    allowed=BUILDING_BLOCKS,
)


# --------------------------------------------------------------------------- 2. DecoderBlock

def _decoder_inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    x = randn(gen, dims["B"], dims["T"], dims["D"], dtype=dtype)
    memory = randn(gen, dims["B"], dims["S"], dims["D"], dtype=dtype)
    return Call(x, memory, tfm_ref.causal_mask(dims["T"]), _padding(gen, dims["B"], dims["S"]))


def _decoder_with(connect, *, causal: bool = True, source_mask: bool = True, cross_to_x: bool = False,
                  norm_memory: bool = False, ffn_before_cross: bool = False) -> type:
    """A tfm_ref.DecoderBlock wired with ``connect`` and one change."""
    def forward(self, x, memory=None, self_mask=None, cross_mask=None):
        first = self.self_residual.norm_first
        norm = self.cross_residual.norm

        def cross(h):
            context = h if cross_to_x else (norm(memory) if norm_memory and first else memory)
            return self.cross_attn(h, context, mask=cross_mask if source_mask else None)

        steps = [(lambda h: self.self_attn(h, mask=self_mask if causal else None), self.self_residual.norm),
                 (cross, norm), (self.ffn, self.ffn_residual.norm)]
        if ffn_before_cross:
            steps = [steps[0], steps[2], steps[1]]
        for sublayer, sub_norm in steps:
            x = connect(x, sublayer, sub_norm, first)
        return x
    return type("BrokenDecoderBlock", (tfm_ref.DecoderBlock,), {"forward": forward})


DECODER_BLOCK = Exercise(
    name="DecoderBlock",
    key="decoder_block",
    reference=tfm_ref.DecoderBlock,
    adapter=_BLOCK_KWARGS,
    inputs=_decoder_inputs,
    arg_names=("x", "memory", "self_mask", "cross_mask"),
    # T = S in the ladder, so that attending to x instead of memory gives an output, not a shape error.
    shapes=[dict(B=1, T=2, S=2, D=2, H=1, F=4), dict(B=2, T=3, S=3, D=4, H=2, F=8), dict(B=2, T=5, S=5, D=16, H=4, F=32)],
    visible=[Case("Post-Norm block: causal self-attention, padded source"),
             Case("Pre-Norm block (norm_first=True), T ≠ S", dims=dict(B=2, T=4, S=6, D=16, H=4, F=32, pre=1))],
    hidden=[
        Case("random sizes, Post-Norm", dims=_block_sizes(False)),
        Case("random sizes, Pre-Norm", dims=_block_sizes(True)),
        Case("one target position", dims=dict(B=2, T=1, S=5, D=8, H=2, F=16)),
        Case("float64 weights and inputs", dims=dict(B=2, T=3, S=4, D=8, H=2, F=16), dtype=torch.float64),
        Case("gradients (inputs, memory and every parameter), Pre-Norm", dims=dict(B=2, T=3, S=4, D=8, H=2, F=16, pre=1),
             grad=True),
    ],
    mistakes=[
        Mistake("causal mask ignored in self-attention", _decoder_with(residual, causal=False),
                "the decoder's self-attention must not see later target positions: pass self_mask to it."),
        Mistake("source padding mask ignored in cross-attention", _decoder_with(residual, source_mask=False),
                "cross-attention attends over the source, whose padding must stay masked: pass cross_mask to it."),
        Mistake("cross-attention to the decoder input instead of memory", _decoder_with(residual, cross_to_x=True),
                "in cross-attention the queries come from the decoder and the keys and values from the encoder's "
                "output: cross_attn(h, memory, mask=cross_mask)."),
        Mistake("Pre-Norm: memory normalised by the decoder's norm", _decoder_with(residual, norm_memory=True),
                "the norm applies to the decoder stream only; memory is already normalised by the encoder: "
                "x + cross_attn(norm(x), memory)."),
        Mistake("FFN before cross-attention", _decoder_with(residual, ffn_before_cross=True),
                "the order is masked self-attention, cross-attention, then FFN."),
        _named("post_only", _decoder_with(_res_always_post)),
        _named("pre_from_norm", _decoder_with(_res_from_normalised)),
        _named("norm_inside", _decoder_with(_res_norm_sublayer_only)),
        _named("no_residual", _decoder_with(_res_no_residual)),
    ],
    forbidden=BLOCK_LIBRARY,
    allowed=BUILDING_BLOCKS,
)


# --------------------------------------------------------------------------- 3. greedy decoding

BOS, PAD, VOCAB = 1, 0, 12
# Untied embeddings: with tied ones an untrained model mostly repeats its input token.
_MODEL = tfm_ref.TransformerConfig(vocab_size=VOCAB, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                   d_ff=32, dropout=0.0, max_len=64, tie_embeddings=False)
# Everything a student's decoding loop may call on the model; `tfm_ref.decoding` stays off limits.
MODEL_METHODS = tuple(functions_of(attention, blocks, config, feedforward, heads, kv_cache, masks, multihead, norms,
                                   positional, tfm_shapes, transformer))


class _RandomTransformer(tfm_ref.Transformer):
    """The checks' untrained model; its repr is one line, so a failure message stays readable."""

    def __repr__(self) -> str:
        c = self.config
        return (f"<a random tfm_ref.Transformer: d_model={c.d_model}, {c.n_encoder_layers} encoder + "
                f"{c.n_decoder_layers} decoder layers, vocabulary {c.vocab_size}>")


class _CacheOnlyTransformer(_RandomTransformer):
    """A Transformer that refuses to decode without the KV cache, one token per step."""

    def decode(self, tgt, memory, src_mask=None, cache=None):
        if cache is None or tgt.shape[1] != 1:
            raise ValueError("this check's model decodes only with a KV cache, one new token per call: "
                             "cache = model.new_cache(), then model.decode(out[:, -1:], memory, src_mask, cache)")
        return super().decode(tgt, memory, src_mask, cache)


for _model_class in (_RandomTransformer, _CacheOnlyTransformer):  # the checks' models travel to the sandbox
    wire.register_module(_model_class, lambda model: {"config": dataclasses.asdict(model.config)},
                         lambda config, cls=_model_class: cls(tfm_ref.TransformerConfig(**config)))


def _first_hits(trajectory: torch.Tensor, token: int) -> torch.Tensor:
    """(B,) index of the first ``token`` in each row, or L where it never appears."""
    hits = trajectory == token  # (B, L)
    return torch.where(hits.any(dim=1), hits.int().argmax(dim=1), trajectory.shape[1])


def _choose_eos(trajectory: torch.Tensor, gen: torch.Generator) -> int:
    """An end token that makes the greedy outputs informative: some rows end while others go on
    (so padding after EOS shows), and all end before ``max_len`` (so stopping early shows)."""
    batch, length = trajectory.shape
    best, best_score = PAD, -1
    for token in torch.randperm(VOCAB, generator=gen).tolist():
        if token == BOS:
            continue
        first = _first_hits(trajectory, token)
        finish = min(int(first.max()), length - 1)
        padded = any(int(first[r]) < finish and bool((trajectory[r, int(first[r]) + 1 : finish + 1] != token).any())
                     for r in range(batch))
        score = 2 * padded + (int(first.max()) < length - 1) + (int(first.min()) < length)
        if score > best_score:
            best, best_score = token, score
    return best


def _model_and_source(gen: torch.Generator, dims, model_class: type = _RandomTransformer):
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(_MODEL).eval()
    src_mask = tfm_ref.padding_mask(torch.randint(1, dims["S"] + 1, (dims["B"],), generator=gen), dims["S"])  # (B, S)
    src = torch.randint(3, VOCAB, (dims["B"], dims["S"]), generator=gen).masked_fill(~src_mask, PAD)
    return model, src, src_mask


def _decode_inputs(model_class: type = _RandomTransformer, use_mask: bool = True):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        model, src, src_mask = _model_and_source(gen, dims, model_class)
        src_mask = src_mask if use_mask else None
        trajectory = tfm_ref.greedy_decode(model, src, src_mask, bos_id=BOS, eos_id=-1, max_len=dims["L"])  # no EOS
        return Call(model, src, src_mask, bos_id=BOS, eos_id=_choose_eos(trajectory, gen), max_len=dims["L"])
    return inputs


def _greedy_variant(*, stop: bool = True, pad: bool = True, keep_bos: bool = False, start: int | None = None,
                    use_mask: bool = True, whole_prefix: bool = False,
                    no_cache_first_position: bool = False):
    """Greedy decoding with one thing done wrong (the keywords say which)."""
    @torch.no_grad()
    def greedy_decode(model, src, src_mask=None, *, bos_id, eos_id, max_len):
        src_mask = src_mask if use_mask else None
        memory = model.encode(src, src_mask)  # (B, S, D)
        out = torch.full((src.shape[0], 1), bos_id if start is None else start, dtype=torch.long)  # (B, 1)
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        cache = None if no_cache_first_position else model.new_cache()
        for _ in range(max_len):
            step_input = out if whole_prefix or cache is None else out[:, -1:]
            logits = model.decode(step_input, memory, src_mask, cache)  # (B, t, V)
            next_token = logits[:, 0 if no_cache_first_position else -1].argmax(dim=-1)  # (B,)
            if pad:
                next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
            out = torch.cat([out, next_token[:, None]], dim=1)
            finished |= next_token == eos_id
            if stop and finished.all():
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
    visible=[Case("a padded batch of 3 sources"), Case("one source", dims=dict(B=1, S=5, L=8))],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 5), S=(1, 8), L=(1, 10))),
        Case("a larger batch", dims=dict(B=6, S=7, L=10)),
        Case("src_mask=None", inputs=_decode_inputs(use_mask=False)),
        Case("max_len = 1", dims=dict(B=3, S=4, L=1)),
        Case("uses the KV cache (one new token per decode call)", inputs=_decode_inputs(_CacheOnlyTransformer)),
    ],
    mistakes=[
        Mistake("no early stop", _greedy_variant(stop=False),
                "stop as soon as every sequence has produced eos_id: the output is then shorter than max_len."),
        Mistake("finished sequences not padded with EOS", _greedy_variant(pad=False),
                "once a sequence has produced eos_id, every later token of it must be eos_id (keep a `finished` "
                "flag per row and use torch.where), even while other rows go on."),
        Mistake("output keeps the BOS", _greedy_variant(keep_bos=True),
                "return the generated tokens only, without the leading bos_id: out[:, 1:]."),
        Mistake("decoding not started from BOS", _greedy_variant(start=PAD),
                "the first decoder input is bos_id, the start token the model was trained with."),
        Mistake("source padding mask not used", _greedy_variant(use_mask=False),
                "neither the encoder nor the cross-attention may look at source padding: pass src_mask to "
                "model.encode(src, src_mask) and to model.decode(..., src_mask, cache) at every step."),
        Mistake("whole prefix fed while using the cache", _greedy_variant(whole_prefix=True),
                "with a KV cache the earlier tokens are already stored: feed only the newest token, out[:, -1:]."),
        Mistake("argmax of the first position", _greedy_variant(no_cache_first_position=True),
                "the logits are (B, t, V); the next token is predicted at the last position: logits[:, -1]."),
    ],
    allowed=MODEL_METHODS,
)


# --------------------------------------------------------------------------- 4. the 2017 learning-rate schedule

def noam_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^−0.5 · min(step^−0.5, step · warmup^−1.5): linear warmup, then decay as 1/√step.

    Raises:
        ValueError: step < 1 (the paper counts steps from 1).
    """
    if step < 1:
        raise ValueError(f"step counts from 1, got {step}")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def _schedule(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
    return Call(dims["step"], dims["D"], dims["W"])


def _noam_max(step, d_model, warmup):
    return d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)


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
    forbidden=(noam_lr,),  # written here, not in tfm_ref, so not forbidden by default
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
                "the warmup line is step · warmup^−1.5, so that both arguments of the min meet at step = warmup."),
        Mistake("max instead of min", _noam_max,
                "the schedule is the smaller of the two: the warmup line step·warmup^−1.5 while step < warmup, "
                "then the decay step^−0.5."),
        Mistake("missing d_model^−0.5", _noam_no_width,
                "the whole schedule is scaled by d_model^−0.5 (smaller steps for wider models)."),
        Mistake("d_model^0.5 instead of d_model^−0.5", _noam_width_up,
                "the width factor is d_model ** -0.5 (a negative exponent)."),
    ],
)


# --------------------------------------------------------------------------- 5. label-smoothed cross-entropy

LOSS_LIBRARY = (F.cross_entropy, F.nll_loss, nn.CrossEntropyLoss, nn.NLLLoss, F.kl_div, nn.KLDivLoss,
                F.binary_cross_entropy)


def label_smoothed_cross_entropy(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1,
                                 ignore_index: int = PAD) -> torch.Tensor:
    """Mean over the non-ignored positions of the cross-entropy against (1 − ε)·one-hot + ε/V,
    as ``F.cross_entropy(..., label_smoothing=ε, ignore_index=...)`` computes it.

    Shapes: logits (B, T, V), target (B, T) ids → a scalar.
    """
    return F.cross_entropy(logits.flatten(0, -2), target.flatten(), ignore_index=ignore_index,
                           label_smoothing=smoothing)  # (B·T, V) and (B·T,)


def _loss_inputs(gen: torch.Generator, dims, dtype: torch.dtype, smoothing: float = 0.1) -> Call:
    logits = randn(gen, dims["B"], dims["T"], dims["V"], dtype=dtype) * 2
    target = torch.randint(1, dims["V"], (dims["B"], dims["T"]), generator=gen)
    lengths = torch.randint(1, dims["T"] + 1, (dims["B"],), generator=gen)
    lengths[0] = dims["T"]
    target = target.masked_fill(~tfm_ref.padding_mask(lengths, dims["T"]), PAD)  # padded targets: ignored
    return Call(logits, target, smoothing=smoothing, ignore_index=PAD)


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


def _loss_no_smoothing(logits, target, smoothing=0.1, ignore_index=PAD):
    loss, real = _smoothed_terms(logits, target, 0.0, ignore_index)
    return loss[real].mean()


def _loss_log_of_softmax(logits, target, smoothing=0.1, ignore_index=PAD):
    probs = tfm_ref.softmax(logits, dim=-1)  # (B, T, V); underflows to 0 for very unlikely classes
    loss, real = _smoothed_terms(logits, target, smoothing, ignore_index, log_probs=torch.log(probs))
    return loss[real].mean()


LABEL_SMOOTHING = Exercise(
    name="label_smoothed_cross_entropy",
    key="label_smoothing",
    reference=label_smoothed_cross_entropy,
    inputs=_loss_inputs,
    arg_names=("logits", "target"),
    shapes=[dict(B=1, T=1, V=3), dict(B=2, T=2, V=3), dict(B=2, T=3, V=5), dict(B=3, T=5, V=11)],
    visible=[Case("padded targets, ε = 0.1")],
    hidden=[
        Case("random sizes", dims=random_dims(B=(1, 4), T=(1, 8), V=(2, 30))),
        Case("ε = 0 (plain cross-entropy)", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype, 0.0)),
        Case("ε = 0.3", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype, 0.3)),
        Case("huge logits", inputs=lambda gen, dims, dtype: _loss_inputs(gen, dims, dtype).scaled(1e3)),
        Case("float64", dtype=torch.float64),
        Case("gradients", grad=True),
    ],
    mistakes=[
        Mistake("ε/(V−1) on the other classes", _loss_wrong_off_value,
                "in this course (and in PyTorch's label_smoothing) the target is (1 − ε)·one-hot + ε/V on every "
                "class, the correct one included: the correct class gets 1 − ε + ε/V."),
        Mistake("padding positions counted", _loss_padding_counted,
                "positions whose target is ignore_index (padding) add nothing: average over the real positions only."),
        Mistake("averaged over all positions, padding included", _loss_mean_over_all,
                "divide by the number of real (non-ignored) positions, not by B·T."),
        Mistake("summed instead of averaged", _loss_sum,
                "return the mean over the real positions (F.cross_entropy's default reduction)."),
        Mistake("smoothing ignored", _loss_no_smoothing,
                "use the `smoothing` argument ε: the target puts 1 − ε + ε/V on the correct class and ε/V elsewhere."),
        Mistake("log of softmax instead of log_softmax", _loss_log_of_softmax,
                "softmax underflows to 0 for very unlikely classes and log(0) = −inf, which smoothing multiplies "
                "by ε/V > 0; use logits.log_softmax(-1) (x − logsumexp(x)), which stays finite."),
    ],
    forbidden=LOSS_LIBRARY,
)

EXERCISES = (ENCODER_BLOCK, DECODER_BLOCK, GREEDY, NOAM, LABEL_SMOOTHING)
