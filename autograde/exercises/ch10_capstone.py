"""Chapter 10 exercises — the capstone: the whole encoder–decoder Transformer, its training step,
its training loop, and greedy decoding without a cache.

    memory = Encoder(Emb(src)·√D + PE, src pad)
    logits = Linear(Decoder(Emb(tgt)·√D + PE, memory, causal, src pad))
    one step:  inp, target = tgt[:, :-1], tgt[:, 1:]          (teacher forcing: the target shifted right)
               loss = label-smoothed cross-entropy over the non-PAD targets
               lr = factor · d_model^−0.5 · min(s^−0.5, s · warmup^−1.5), s = step + 1   (Vaswani et al. 2017, eq. 3)
               zero_grad → backward → optimizer step
    the loop:  Adam(β = (0.9, 0.98), ε = 1e-9), one step per batch, steps numbered 0, 1, …

The model is checked like chapter 8's blocks: tfm_ref's weights are loaded into the student's
module (its parameter names are `tfm_ref.Transformer`'s) and outputs and gradients compared.
The training step and the loop are checked on a small random `tfm_ref.Transformer` that travels
to the sandbox (chapter 8's registered `RandomTransformer`): an adapter wraps the student's
function into what the check compares — plain tensors of the losses, learning rates and update
sizes — so the optimizer, which cannot travel, is made on the student's side. The references
are written here in tfm_ref's terms (`train_step`, `fit`). Each `Mistake` is a broken version a
student plausibly writes (`tests/test_exercises.py` proves each is caught and named).

Shapes: B batch · S source positions · T target positions · V vocabulary · D model width · H heads ·
F FFN width · E encoder layers · L decoder layers · K training steps. Case flag in the sizes: ``pre``
(Pre-Norm).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

import tfm_ref
from tfm_ref import losses, schedule
from tfm_ref.blocks import Residual
from tfm_ref.losses import label_smoothed_cross_entropy
from tfm_ref.schedule import noam_lr
from tfm_ref.training import PAPER_ADAM, fit, train_step
from tfm_lab.tasks import BOS_ID, DATE_VOCAB, EOS_ID, PAD_ID, DateTask
from notebook_sandbox.check_models import RandomTransformer

from ..adapters import TRAINING, DriverAdapter
from ..spec import Call, Case, Exercise, Mistake, random_dims
from .ch08_encoder_decoder import GREEDY as CACHED_GREEDY
from .ch08_encoder_decoder import MODEL_METHODS
from .shared import WITH_DROPOUT, PerturbedModuleAdapter, built_without_dropout, dropout_rate, functions_of

__all__ = ["TRANSFORMER", "TRAIN_STEP", "FIT", "GREEDY", "EXERCISES", "transformer", "train_step", "fit"]

WHOLE_MODELS = (tfm_ref.Transformer, tfm_ref.Encoder, tfm_ref.Decoder, tfm_ref.EncoderDecoderCore,
                nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder)
# The pieces of chapters 1–8 the notebook's setup cell imports (a student may paste their own instead).
# Their modules' forward is reached through nn.Module.__call__, so each is listed (Residual: inside the blocks).
PIECES = (*functions_of(tfm_ref.MultiHeadAttention, tfm_ref.FeedForward, tfm_ref.LayerNorm, tfm_ref.EncoderBlock,
                        tfm_ref.DecoderBlock, Residual),
          tfm_ref.sinusoidal_positional_encoding, tfm_ref.causal_mask, tfm_ref.padding_mask, tfm_ref.key_mask)
# What a training step may call: the model's own methods, and chapter 8's loss and schedule.
TRAINING_PIECES = (*MODEL_METHODS, *functions_of(losses, schedule))


# --------------------------------------------------------------------------- 1. the whole model

def _config(vocab_size: int, d_model: int = 512, n_heads: int = 8, d_ff: int = 2048, n_encoder_layers: int = 6,
            n_decoder_layers: int = 6, dropout: float = 0.1, norm_first: bool = False,
            max_len: int = 512) -> tfm_ref.TransformerConfig:
    """The notebook's constructor arguments as a tfm_ref config (tied embeddings, sinusoidal
    positions, LayerNorm, ReLU: the defaults)."""
    return tfm_ref.TransformerConfig(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                                     n_encoder_layers=n_encoder_layers, n_decoder_layers=n_decoder_layers,
                                     dropout=dropout, norm_first=norm_first, max_len=max_len)


def transformer(*args, **kwargs) -> tfm_ref.Transformer:
    """The reference: `tfm_ref.Transformer` built from the notebook's constructor arguments."""
    return tfm_ref.Transformer(_config(*args, **kwargs))


INIT = "init"
"""A case's flag: the student's model, as it is built, starts its shared matrix with std d_model^−0.5."""
INIT_TOLERANCE = 0.15  # relative; a matrix of 4096 entries estimates its std to about 1 %


class _ModelAdapter(PerturbedModuleAdapter):
    """The model exercise's adapter: in a case flagged `INIT` the model, as the student builds it, must
    start with the initialisation the notebook prescribes (the weights compared are tfm_ref's, loaded
    after: an initialisation never shows in outputs)."""

    def plan(self, dims) -> dict:
        plan = super().plan(dims)
        if dims.get(INIT):  # a vocabulary large enough to estimate the std, at any size the check shrinks to
            expected = dims["D"] ** -0.5
            plan["init"] = {
                "kwargs": {"vocab_size": max(self.kwargs(dims)["vocab_size"], 4096 // dims["D"])},
                "tensor": "src_embed.weight", "std": expected, "tolerance": INIT_TOLERANCE,
                "message": "as built, your shared embedding matrix has standard deviation {std:.3g}; "
                           f"the notebook asks for d_model^−0.5 = {expected:.3g} (d_model = {dims['D']}), as tfm_ref "
                           "does. nn.Embedding starts at 1 and nn.Linear at about 0.58 · d_model^−0.5: with the "
                           "output layer tied, the logits then start large and the first steps are spent undoing "
                           "them. Initialise after tying: nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)"}
        return plan


_MODEL_KWARGS = _ModelAdapter(lambda dims: dict(
    vocab_size=dims["V"], d_model=dims["D"], n_heads=dims["H"], d_ff=dims["F"], n_encoder_layers=dims["E"],
    n_decoder_layers=dims["L"], norm_first=bool(dims.get("pre")), max_len=16, dropout=dropout_rate(dims)))


def _source(gen: torch.Generator, batch: int, length: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """src (B, S) ids, PAD after random lengths 1 … S (the first row full), and its mask (B, S), True = real."""
    lengths = torch.randint(1, length + 1, (batch,), generator=gen)
    lengths[0] = length
    src_mask = tfm_ref.padding_mask(lengths, length)  # (B, S)
    return torch.randint(3, vocab, (batch, length), generator=gen).masked_fill(~src_mask, PAD_ID), src_mask


def _model_inputs(gen: torch.Generator, dims, dtype: torch.dtype, with_mask: bool = True) -> Call:
    src, src_mask = _source(gen, dims["B"], dims["S"], dims["V"])
    tgt = torch.randint(3, dims["V"], (dims["B"], dims["T"]), generator=gen)
    tgt[:, 0] = BOS_ID  # a decoder input starts with BOS
    return Call(src, tgt, src_mask) if with_mask else Call(src, tgt)


@dataclasses.dataclass(frozen=True)
class _Wrong:
    """What a broken model does differently (every field False: exactly tfm_ref's model)."""

    unscaled: bool = False
    no_positions: bool = False
    source_positions_only: bool = False
    inverted_mask: bool = False
    encoder_unmasked: bool = False
    cross_unmasked: bool = False
    not_causal: bool = False
    no_final_norm: bool = False
    softmax: bool = False
    no_embed_dropout: bool = False
    masks_swapped: bool = False
    scaled_by_d_model: bool = False
    positions_twice: bool = False
    causal_inverted: bool = False
    log_softmax: bool = False
    positions_of_batch: bool = False


class _WrittenOut(tfm_ref.Transformer):
    """tfm_ref's Transformer with its forward written out from the blocks, as a student writes it,
    with the mistakes of `_Wrong` switchable."""

    wrong = _Wrong()

    def _embedded(self, ids: torch.Tensor, positions: bool) -> torch.Tensor:
        x = F.embedding(ids, self.src_embed.weight)  # (B, T, D)
        d_model = self.config.d_model
        x = x if self.wrong.unscaled else x * (d_model if self.wrong.scaled_by_d_model else math.sqrt(d_model))
        pe = self.positional.pe[: ids.shape[0 if self.wrong.positions_of_batch else 1]].to(x.dtype)  # (T, D)
        x = x + (2 * pe if self.wrong.positions_twice else pe) if positions else x
        return x if self.wrong.no_embed_dropout else self.embed_dropout(x)  # as tfm_ref draws it, in training mode

    def forward(self, src, tgt, src_mask=None):
        wrong = self.wrong
        keys = None if src_mask is None else tfm_ref.key_mask(~src_mask if wrong.inverted_mask else src_mask)
        x = self._embedded(src, not wrong.no_positions)  # (B, S, D)
        for layer in self.encoder.layers:
            x = layer(x, None if wrong.encoder_unmasked else keys)
        final = self.encoder.final_norm
        memory = x if final is None or wrong.no_final_norm else final(x)
        y = self._embedded(tgt, not (wrong.no_positions or wrong.source_positions_only))  # (B, T, D)
        causal = None if wrong.not_causal else tfm_ref.causal_mask(tgt.shape[1])
        causal = ~causal if wrong.causal_inverted else causal
        cross = None if wrong.cross_unmasked else keys
        for layer in self.decoder.layers:
            y = layer(y, memory, cross, causal) if wrong.masks_swapped else layer(y, memory, causal, cross)
        final = self.decoder.final_norm
        logits = self.lm_head(y if final is None or wrong.no_final_norm else final(y))  # (B, T, V)
        if wrong.softmax or wrong.log_softmax:
            return logits.log_softmax(-1) if wrong.log_softmax else logits.softmax(-1)
        return logits


def _written_out(tied: bool = True, **wrong: bool):
    """A constructor with the notebook's signature for a model that makes the ``wrong`` mistakes
    (and, untied, embeds both sides with ``src_embed``: ``tgt_embed`` is a second, unused matrix)."""
    cls = type("BrokenTransformer", (_WrittenOut,), {"wrong": _Wrong(**wrong)})
    return lambda *args, **kwargs: cls(dataclasses.replace(_config(*args, **kwargs), tie_embeddings=tied))


def _untied(*, shared_embedding: bool = False, output_tied_to_target: bool = False):
    """Three matrices instead of one; or (``shared_embedding``) one embedding and a separate output layer; or
    (``output_tied_to_target``) two embeddings, the output layer sharing the target's."""
    def build(*args, **kwargs):
        model = tfm_ref.Transformer(dataclasses.replace(_config(*args, **kwargs), tie_embeddings=False))
        if shared_embedding:
            model.tgt_embed = model.src_embed
        if output_tied_to_target:
            model.lm_head.weight = model.tgt_embed.weight
        return model
    return build


_UNTIED = (("the 2017 model shares one matrix between the source embedding, the target embedding and the output "
            "layer (§3.4): the outputs agree, but the shared matrix's gradient is the sum over all three uses."),
           "self.tgt_embed = self.src_embed; self.lm_head.weight = self.src_embed.weight")


def _blocks_post_norm(*args, **kwargs):
    model = transformer(*args, **kwargs)
    for module in model.modules():
        if isinstance(module, Residual):
            module.norm_first = False  # the final norms are there, the blocks are Post-Norm
    return model


def _model_sizes(pre: bool):
    def draw(gen: torch.Generator) -> dict[str, int]:
        h = int(torch.randint(1, 4, (1,), generator=gen))
        dims = random_dims(B=(1, 3), S=(1, 7), T=(1, 6), V=(4, 13), F=(4, 24), E=(1, 2), L=(1, 2))(gen)
        width = 2 * h * int(torch.randint(1, 3, (1,), generator=gen))  # even (sinusoidal table), H divides it
        return {**dims, "D": width, "H": h, **({"pre": 1} if pre else {})}
    return draw


_SMALL_MODEL = dict(B=2, S=5, T=4, V=11, D=8, H=2, F=16, E=1, L=1)

TRANSFORMER = Exercise(
    name="Transformer",
    key="transformer",
    reference=transformer,
    adapter=_MODEL_KWARGS,
    inputs=_model_inputs,
    arg_names=("src", "tgt", "src_mask"),
    # D ≥ 4: a LayerNorm over 2 features outputs ±1 whatever its input, and lets almost no gradient through.
    shapes=[dict(B=1, S=2, T=2, V=5, D=4, H=1, F=4, E=1, L=1), dict(B=2, S=3, T=3, V=7, D=4, H=2, F=8, E=1, L=1),
            dict(B=2, S=5, T=4, V=11, D=8, H=2, F=16, E=2, L=2)],
    # training mode and the initialisation are visible: the embeddings' dropout and their std, which the notebook
    # asks for and no eval-mode output shows, fail before grading
    visible=[Case("Post-Norm, 2 + 2 layers, padded sources"),
             Case("Pre-Norm (norm_first=True), 1 + 1 layers, with gradients", dims={**_SMALL_MODEL, "pre": 1},
                  grad=True),
             Case("training mode, dropout=0.3: it drops where tfm_ref does", dims={**_SMALL_MODEL, TRAINING: 1}),
             Case("as built, the shared matrix starts with std d_model^−0.5", dims={**_SMALL_MODEL, "V": 64, "D": 32,
                                                                                      INIT: 1})],
    hidden=[
        Case("random sizes, Post-Norm", dims=_model_sizes(False)),
        Case("random sizes, Pre-Norm", dims=_model_sizes(True)),
        Case("src_mask=None", inputs=functools.partial(_model_inputs, with_mask=False)),
        Case("one target position", dims={**_SMALL_MODEL, "T": 1}),
        Case("float64 weights", dims={**_SMALL_MODEL, "pre": 1}, dtype=torch.float64),
        Case("gradients of every parameter, Post-Norm, 2 + 2 layers", grad=True),
        Case("eval mode, built with dropout=0.3: nothing drops", dims={**_SMALL_MODEL, WITH_DROPOUT: 1}),
    ],
    mistakes=[
        Mistake("embeddings not scaled by √d_model", _written_out(unscaled=True),
                "the token embeddings are multiplied by √d_model before the positions are added (§3.4); unscaled, "
                "the tied embedding rows (norm ≈ 1) are drowned by the positional encoding (norm √(d_model/2)).",
                "x = self.src_embed(ids) * math.sqrt(d_model) + self.pe[: ids.shape[1]]"),
        Mistake("no positional encoding", _written_out(no_positions=True),
                "attention is blind to order: without positions, a date and its characters shuffled look alike to "
                "the model. Source and target both get the sinusoidal table added to their scaled embeddings.",
                "x = self.src_embed(ids) * math.sqrt(d_model) + self.pe[: ids.shape[1]]"),
        Mistake("positions added to the source only", _written_out(source_positions_only=True),
                "the decoder needs positions too: without them it cannot tell the 3rd output character from the "
                "8th. The target is embedded exactly like the source.",
                "embed tgt with the same code as src: scaled embedding + self.pe[: tgt.shape[1]]"),
        Mistake("padding mask inverted", _written_out(inverted_mask=True),
                "src_mask is True for real tokens, and tfm_ref's masks say True = may attend, so it is used as it "
                "is; inverted, every query attends to the padding only.",
                "mask = key_mask(src_mask)  # (B, 1, 1, S), not key_mask(~src_mask)"),
        Mistake("source padding not masked in the encoder", _written_out(encoder_unmasked=True),
                "the encoder's self-attention attends to the source's padding too: the encoded real tokens then "
                "depend on how much padding the batch added.",
                "x = block(x, key_mask(src_mask)) for every encoder block"),
        Mistake("source padding not masked in cross-attention", _written_out(cross_unmasked=True),
                "the decoder's cross-attention reads the encoder's output at the padded positions too: the "
                "translation then depends on how much padding the batch added.",
                "x = block(x, memory, causal_mask(T), key_mask(src_mask)) for every decoder block"),
        Mistake("no causal mask in the decoder", _written_out(not_causal=True),
                "under teacher forcing the decoder gets the whole target at once; without the causal mask each "
                "position sees the very token it is asked to predict.",
                "x = block(x, memory, causal_mask(tgt.shape[1]), cross_mask)"),
        Mistake("final norm not applied (Pre-Norm)", _written_out(no_final_norm=True),
                "a Pre-Norm stack ends on the un-normalised residual stream: its final norm is part of the model "
                "(Post-Norm blocks end normalised and need none).",
                "memory = self.encoder.final_norm(x); logits = self.lm_head(self.decoder.final_norm(y))"),
        Mistake("norm_first not passed to the blocks", _blocks_post_norm,
                "the final norms of a Pre-Norm model are there, but the blocks themselves are Post-Norm.",
                "EncoderBlock(d_model, n_heads, d_ff, dropout, norm_first=norm_first), and the same for DecoderBlock"),
        Mistake("dropout argument ignored", built_without_dropout(transformer),
                "the model is built with a `dropout` rate, for the dropout after the embeddings and inside every "
                "block; in training mode yours drops nothing.",
                "self.embed_dropout = nn.Dropout(dropout), and dropout=dropout for every EncoderBlock and "
                "DecoderBlock"),
        Mistake("the source's mask where the target's goes", _written_out(masks_swapped=True),
                "a source key mask (B, 1, 1, S) met the target's T × T scores. The encoder reads src with "
                "key_mask(src_mask); the decoder's self-attention takes the causal mask (T, T) and its "
                "cross-attention key_mask(src_mask). Either the decoder's two masks are swapped, or src and tgt "
                "are (the target went through the encoder).",
                "memory = self.encode(src, src_mask); then in the decoder layer(y, memory, causal_mask(T, "
                "device=tgt.device), key_mask(src_mask)): self-attention's mask first"),
        Mistake("no dropout after the embeddings", _written_out(no_embed_dropout=True),
                "the 2017 model drops out the sum of the embeddings and the positions, on both sides, before the "
                "first block (§5.4); yours drops only inside the blocks.",
                "self.embed_dropout = nn.Dropout(dropout), then x = self.embed_dropout(self.src_embed(ids) * "
                "math.sqrt(d_model) + self.pe[:T]), and the same for the target"),
        Mistake("embeddings scaled by d_model, not √d_model", _written_out(scaled_by_d_model=True),
                "the embeddings are multiplied by √d_model (§3.4), which brings the tied rows (norm ≈ 1) to the "
                "scale of the positional encoding; d_model makes them √d_model times too large, and the positions "
                "are drowned instead.",
                "x = self.src_embed(ids) * math.sqrt(d_model) + self.pe[: ids.shape[1]]"),
        Mistake("positions sliced by the batch size (pe[:B]) instead of the length", _written_out(
                    positions_of_batch=True),
                "ids is (B, T): the positional table is sliced by the sequence length, ids.shape[1], one row per "
                "position. Sliced by ids.shape[0], the batch size, it has B rows, which do not line up with the T "
                "positions of (B, T, D) (and with one sequence, B = 1, every position gets position 0's row).",
                "x = self.src_embed(ids) * math.sqrt(d_model) + self.pe[: ids.shape[1]]"),
        Mistake("positional encoding added twice", _written_out(positions_twice=True),
                "the positions are added once, when a sequence is embedded; yours adds them twice (in embed and "
                "again in encode or decode, say).",
                "add self.pe[: T] in one place only: embed"),
        Mistake("causal mask inverted", _written_out(causal_inverted=True),
                "True means 'may attend': causal_mask(T) already is the lower triangle a query may see; ~ on it "
                "lets each position see only its future (and the last none at all).",
                "pass causal_mask(T, device=tgt.device) as it is, without ~"),
        Mistake("log-softmax applied to the logits", _written_out(log_softmax=True),
                "the model returns logits: the loss applies log-softmax itself (a second one changes nothing for "
                "argmax, but the smoothed loss and the logits the checks compare differ).",
                "return self.lm_head(x)  # no log_softmax"),
        Mistake("softmax applied to the logits", _written_out(softmax=True),
                "the model returns logits, not probabilities: the loss applies log-softmax itself, and greedy "
                "decoding needs only the argmax.", "return self.lm_head(x)  # no softmax"),
        Mistake("embeddings not tied", _untied(), *_UNTIED),
        Mistake("output layer not tied to the embedding", _untied(shared_embedding=True), *_UNTIED),
        Mistake("source and target embeddings separate", _untied(output_tied_to_target=True), *_UNTIED),
        Mistake("embeddings not tied (tgt_embed a second, unused matrix)", _written_out(tied=False), *_UNTIED),
    ],
    forbidden=WHOLE_MODELS,
    allowed=PIECES,
)


# --------------------------------------------------------------------------- 2. the training step

# The checks' models travel to the sandbox as a state dict loaded with assign=True, which unties tied
# matrices there: untied from the start, they are the same model on both sides.
_STEP_MODEL = tfm_ref.TransformerConfig(vocab_size=12, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
                                        d_ff=32, dropout=0.1, max_len=32, tie_embeddings=False)


def _random_model(gen: torch.Generator, config: tfm_ref.TransformerConfig) -> nn.Module:
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return RandomTransformer(config)


def _targets(gen: torch.Generator, batch: int, length: int, vocab: int) -> torch.Tensor:
    """(B, T) = BOS, 1 … T − 2 random tokens, EOS, then PAD (the first row uses every position)."""
    n = torch.randint(1, length - 1, (batch,), generator=gen)
    n[0] = length - 2
    position = torch.arange(length)  # (T,)
    tgt = torch.randint(3, vocab, (batch, length), generator=gen)
    tgt = torch.where(position == n[:, None] + 1, EOS_ID, tgt)
    tgt = tgt.masked_fill(position > n[:, None] + 1, PAD_ID)
    tgt[:, 0] = BOS_ID
    return tgt


def _step_inputs(first_step: int, warmup: int, factor: float = 1.0, smoothing: float = 0.1):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        model = _random_model(gen, _STEP_MODEL).eval()  # as after an evaluation: the step must switch dropout on
        sources = [_source(gen, dims["B"], dims["S"], _STEP_MODEL.vocab_size) for _ in range(dims["K"])]
        src, src_mask = (torch.stack(parts) for parts in zip(*sources))  # (K, B, S) each
        tgt = torch.stack([_targets(gen, dims["B"], dims["T"], _STEP_MODEL.vocab_size) for _ in range(dims["K"])])
        return Call(model, src, src_mask, tgt, first_step=first_step, d_model=_STEP_MODEL.d_model, warmup=warmup,
                    factor=factor, smoothing=smoothing)
    return inputs


def _step_with(*, shift: str = "right", ignore_pad: bool = True, smoothing_on_pad: bool = False,
               smoothed: bool = True, annotated_smoothing: bool = False, from_one: bool = True, set_lr: str = "before", zero_grad: str = "before",
               train_mode: bool = True, use_factor: bool = True, summed: bool = False, warmup_power: float = 1.5,
               clip: float | None = None, default_smoothing: bool = False):
    """A training step with one thing done wrong (the keywords say which). ``set_lr``: the rate given to
    the optimizer "before" its step (right), "after" it, or "never"; ``zero_grad``: "before" backward
    (right), "between" backward and the step, or "never"; ``warmup_power``: the power of warmup in the
    schedule's rising term (1.5 is right); ``clip``: a gradient-norm clip before the step;
    ``annotated_smoothing``: The Annotated Transformer's smoothing (ε/(V − 2) on the other tokens, none on PAD,
    a KL divergence summed and divided by the real positions); ``default_smoothing``: the loss's own default ε = 0.1
    instead of the ``smoothing`` the step is given."""
    def step_fn(model, optimizer, batch, step, *, d_model, warmup, factor=1.0, smoothing=0.1):
        if train_mode:
            model.train()
        tgt = batch["tgt"]
        inp, target = {"right": (tgt[:, :-1], tgt[:, 1:]), "none": (tgt, tgt), "cut": (tgt[:, :-1], tgt[:, :-1]),
                       "uncut": (tgt[:, 1:], tgt[:, 1:]),
                       "left": (tgt[:, 1:], tgt[:, :-1]), "whole": (tgt, tgt[:, 1:])}[shift]
        logits = model(batch["src"], inp, batch["src_mask"])  # (B, T, V)
        if shift == "whole":
            logits = logits[:, :-1]  # the last position's prediction, past EOS, dropped
        epsilon = (0.1 if default_smoothing else smoothing) if smoothed else 0.0
        if annotated_smoothing:
            log_probs = logits.log_softmax(-1).flatten(0, 1)  # (B·T, V)
            true_dist = torch.full_like(log_probs, epsilon / (log_probs.shape[-1] - 2))
            true_dist.scatter_(1, target.flatten()[:, None], 1 - epsilon)
            true_dist[:, PAD_ID] = 0
            true_dist[target.flatten() == PAD_ID] = 0
            loss = F.kl_div(log_probs, true_dist, reduction="sum") / (target != PAD_ID).sum()
        elif smoothing_on_pad:  # the smoothing term averaged over every position, padding included
            log_probs = logits.log_softmax(-1)  # (B, T, V)
            nll = F.nll_loss(log_probs.flatten(0, 1), target.flatten(), ignore_index=PAD_ID)
            loss = (1 - epsilon) * nll + epsilon * -log_probs.mean()
        else:
            loss = label_smoothed_cross_entropy(logits, target, epsilon, PAD_ID if ignore_pad else -100)
        if summed:  # over the real positions, not their mean
            loss = loss * (target != PAD_ID).sum()
        s = step + 1 if from_one else step
        lr = (factor if use_factor else 1.0) * (noam_lr(s, d_model, warmup) if warmup_power == 1.5 else
                                                d_model**-0.5 * min(s**-0.5, s * warmup**-warmup_power))

        def give_the_rate():
            for group in optimizer.param_groups:
                group["lr"] = lr

        if set_lr == "before":
            give_the_rate()
        if zero_grad == "before":
            optimizer.zero_grad()
        loss.backward()
        if zero_grad == "between":
            optimizer.zero_grad()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if set_lr == "after":
            give_the_rate()
        return loss.item(), lr
    return step_fn


TRAIN_STEP = Exercise(
    name="train_step",
    key="train_step",
    reference=train_step,
    adapter=DriverAdapter("train_steps"),
    inputs=_step_inputs(first_step=3, warmup=8),
    arg_names=("model", "src", "src_mask", "tgt"),
    shapes=[dict(K=2, B=1, S=2, T=3), dict(K=2, B=2, S=4, T=5), dict(K=2, B=4, S=6, T=7)],
    visible=[Case("steps 3 and 4 (warmup 8), padded targets"),
             Case("the first two steps, step = 0 and 1, ε = 0.2",
                  inputs=_step_inputs(first_step=0, warmup=8, smoothing=0.2)),
             # the rate is factor times the paper's: a factor other than 1 shows a step that leaves it out
             Case("random sizes, three steps after warmup, factor 2, ε = 0.2",
                  dims=random_dims(K=(3, 3), B=(1, 5), S=(1, 8), T=(3, 8)),
                  inputs=_step_inputs(first_step=20, warmup=4, factor=2.0, smoothing=0.2))],
    hidden=[
        Case("random sizes, three steps after warmup, factor 2, ε = 0.2",
             dims=random_dims(K=(3, 3), B=(1, 5), S=(1, 8), T=(3, 8)),
             inputs=_step_inputs(first_step=20, warmup=4, factor=2.0, smoothing=0.2)),
        Case("ε = 0 (plain cross-entropy)", inputs=_step_inputs(first_step=5, warmup=4, smoothing=0.0)),
        Case("one answer token between BOS and EOS", dims=dict(K=2, B=3, S=4, T=3),
             inputs=_step_inputs(first_step=1, warmup=2, factor=0.5)),
    ],
    mistakes=[
        *(Mistake(name, _step_with(shift=shift),
                  "teacher forcing shifts the target right: the decoder reads the target without its last token "
                  "(BOS first), and position t is scored against the next token. Scored against its own input, the "
                  "decoder only learns to copy.", "inp, target = tgt[:, :-1], tgt[:, 1:]")
          for name, shift in (("target not shifted", "none"), ("target not shifted (both cut at the end)", "cut"),
                              ("target not shifted (both without BOS)", "uncut"))),
        Mistake("the whole target fed, the last position's logits dropped", _step_with(shift="whole"),
                "under the causal mask that gives the same logits in eval mode, but the check trains with dropout "
                "on, and dropout draws its masks for the shape the decoder is given: one position longer than "
                "the decoder input the task defines.",
                "inp, target = tgt[:, :-1], tgt[:, 1:], and the logits of model(src, inp, src_mask) as they are"),
        Mistake("shifted the wrong way", _step_with(shift="left"),
                "the decoder input starts with BOS and the target is one token ahead of it; the other way round, "
                "the model learns to predict the previous token.", "inp, target = tgt[:, :-1], tgt[:, 1:]"),
        Mistake("padding not ignored in the loss", _step_with(ignore_pad=False),
                "positions whose target is PAD are not part of the answer: they count neither in the loss nor in "
                "the mean, or short answers are trained to end in padding.",
                "loss = label_smoothed_cross_entropy(logits, target, smoothing, ignore_index=PAD_ID)"),
        Mistake("label smoothing over the padding", _step_with(smoothing_on_pad=True),
                "the smoothing term ε·mean_v(−log p_v) belongs to each real position's loss, so it is averaged over "
                "the same non-PAD positions as the rest, not over the padding too.",
                "per_position = (1 - smoothing) * nll + smoothing * uniform  # (B, T); "
                "loss = per_position[target != PAD_ID].mean()"),
        Mistake("loss summed, not averaged", _step_with(summed=True),
                "the loss is the mean over the real (non-PAD) target positions; a sum grows with the batch and "
                "the answers' lengths, and so does every step the schedule's rate was chosen for.",
                "loss = label_smoothed_cross_entropy(logits, target, smoothing, PAD_ID)  # a mean already"),
        Mistake("warmup to the power −0.5 in the schedule", _step_with(warmup_power=0.5),
                "the rising term is step · warmup^−1.5, so that it meets step^−0.5 at step = warmup; with "
                "warmup^−0.5 the rate climbs warmup times too steeply.",
                "lr = factor * d_model**-0.5 * min(s**-0.5, s * warmup**-1.5), s = step + 1"),
        Mistake("gradients clipped", _step_with(clip=1.0),
                "the step the notebook asks for is the 2017 recipe's plain one: no gradient clipping, which "
                "shrinks the large early steps the check compares.",
                "loss.backward(); optimizer.step(), with nothing between them"),
        Mistake("The Annotated Transformer's label smoothing", _step_with(annotated_smoothing=True),
                "that smoothing (a KL divergence with 1 − ε on the right token, ε/(V − 2) on the others and none on "
                "PAD) is another loss than the one asked for: cross-entropy with the target 1 − ε + ε/V on the right "
                "token and ε/V on every token, PAD included, averaged over the real positions.",
                "loss = label_smoothed_cross_entropy(logits, target, smoothing, PAD_ID), as the notebook gives it"),
        Mistake("label smoothing left out", _step_with(smoothed=False),
                "the target distribution is smoothed: 1 − ε + ε/V on the right token and ε/V on every token, "
                "with ε the `smoothing` argument.",
                "label_smoothed_cross_entropy(logits, target, smoothing, PAD_ID)  # smoothing, not 0"),
        Mistake("ε not passed on to the loss", _step_with(default_smoothing=True),
                "`smoothing` is an argument of train_step: the loss used its own default ε = 0.1 instead of the ε "
                "the step is given.",
                "label_smoothed_cross_entropy(logits, target, smoothing, PAD_ID)  # the step's smoothing"),
        Mistake("learning rate of the wrong step (counted from 0)", _step_with(from_one=False),
                "`step` counts the steps before this one (0 for the first) while the schedule counts from 1, so "
                "each step got the previous step's rate.", "lr = factor * noam_lr(step + 1, d_model, warmup)"),
        Mistake("factor ignored", _step_with(use_factor=False),
                "the schedule is scaled by `factor`: the rate is factor times the paper's.",
                "lr = factor * noam_lr(step + 1, d_model, warmup)"),
        Mistake("learning rate not given to the optimizer", _step_with(set_lr="never"),
                "computing the rate changes nothing until the optimizer uses it; yours kept its own (the check's "
                "optimizer starts at lr = 1.0).", "for group in optimizer.param_groups: group['lr'] = lr"),
        Mistake("learning rate given after the step", _step_with(set_lr="after"),
                "optimizer.step() uses the rate its param_groups hold when it runs; set after it, each step takes "
                "the previous step's rate, and the first the optimizer's own (the check's starts at lr = 1.0).",
                "for group in optimizer.param_groups: group['lr'] = lr, before optimizer.step()"),
        Mistake("optimizer.zero_grad() forgotten", _step_with(zero_grad="never"),
                "backward() adds to the gradients already there: without clearing them, each step also applies "
                "the gradients of every earlier step (the first step is right, the second is not).",
                "optimizer.zero_grad() before loss.backward()"),
        Mistake("the step taken with no gradients", _step_with(zero_grad="between"),
                "optimizer.step() found no gradients, so it moved nothing: either zero_grad() came between "
                "backward() and step(), throwing away the gradients just computed, or step() came before "
                "backward(), when there were none yet.",
                "optimizer.zero_grad(); loss.backward(); optimizer.step()  # in this order"),
        Mistake("model left in eval mode", _step_with(train_mode=False),
                "the model may come from an evaluation, with dropout off; training needs dropout on, so the step "
                "switches the model to training mode itself.", "model.train() at the start of train_step"),
    ],
    forbidden=(train_step,),  # written here, not in tfm_ref, so not forbidden by default
    allowed=TRAINING_PIECES,
    output_names=("loss of each step", "learning rate of each step", "size of each step's update ‖Δθ‖"),
    input_note="called once for each batch i, as train_step(model, optimizer, {'src': src[i], 'src_mask': "
               "src_mask[i], 'tgt': tgt[i]}, first_step + i, …), with an SGD optimizer at lr = 1.0",
)


# --------------------------------------------------------------------------- 3. the training loop

@functools.cache
def _date_task() -> DateTask:
    return DateTask()  # builds its tables once (a few seconds); the grader's process keeps it


def _fit_config() -> tfm_ref.TransformerConfig:
    # The date model's layout (Pre-Norm), small enough for a few dozen steps in a second; untied, as above.
    return tfm_ref.TransformerConfig(vocab_size=len(DATE_VOCAB), d_model=32, n_heads=2, n_encoder_layers=1,
                                     n_decoder_layers=1, d_ff=64, dropout=0.0, norm_first=True, max_len=64,
                                     tie_embeddings=False)


def _fit_inputs(warmup: int, factor: float, smoothing: float = 0.1):
    def inputs(gen: torch.Generator, dims, dtype: torch.dtype) -> Call:
        config = _fit_config()
        model = _random_model(gen, config)
        data = _date_task().sample(dims["K"] * dims["B"], gen)  # date strings → ISO, from the training days
        tgt = torch.cat([data.inp[:, :1], data.target], dim=1)  # (K·B, T + 1): BOS, the ISO date, EOS

        def stacked(t):
            return t.view(dims["K"], dims["B"], -1)  # (K, B, …)

        return Call(model, stacked(data.src), stacked(data.src_mask), stacked(tgt), d_model=config.d_model,
                    warmup=warmup, factor=factor, smoothing=smoothing)
    return inputs


def _fit_with(*, optimizer_each_step: bool = False, step_of=lambda step: step, optimizer=torch.optim.Adam,
              adam: dict = PAPER_ADAM, pass_smoothing: bool = True, pass_factor: bool = True):
    """A training loop with one thing done wrong (the keywords say which)."""
    def fit_fn(model, batches, *, d_model, warmup, factor=1.0, smoothing=0.1):
        history, made = [], optimizer(model.parameters(), **adam)
        for step, batch in enumerate(batches):
            if optimizer_each_step:
                made = optimizer(model.parameters(), **adam)
            passed = {**({"factor": factor} if pass_factor else {}),
                      **({"smoothing": smoothing} if pass_smoothing else {})}
            loss, _ = train_step(model, made, batch, step_of(step), d_model=d_model, warmup=warmup, **passed)
            history.append(loss)
        return history
    return fit_fn


FIT = Exercise(
    name="fit",
    key="fit",
    reference=fit,
    adapter=DriverAdapter("fit_losses"),
    # Peak rates of 0.03 at most: higher, the losses of two correct loops part by more than float noise.
    inputs=_fit_inputs(warmup=10, factor=0.5),
    arg_names=("model", "src", "src_mask", "tgt"),
    # 14 steps: a failing check trains about a dozen times (each mistake, the smaller input), in seconds
    shapes=[dict(K=5, B=4), dict(K=14, B=8)],
    # ε ≠ 0.1, train_step's default: a loop that does not pass its `smoothing` on fails the visible check
    visible=[Case("14 steps on the date task (warmup 10, factor 0.5, ε = 0.05)",
                  inputs=_fit_inputs(warmup=10, factor=0.5, smoothing=0.05))],
    hidden=[Case("16 steps, warmup 6, factor 0.3, ε = 0.05", dims=dict(K=16, B=8),
                 inputs=_fit_inputs(warmup=6, factor=0.3, smoothing=0.05))],
    mistakes=[
        Mistake("a new optimizer every step", _fit_with(optimizer_each_step=True),
                "Adam keeps running averages of each parameter's gradient and squared gradient; made anew every "
                "step, they restart from zero, so every update is a first update.",
                "optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)  # before the loop"),
        Mistake("the step number never advances", _fit_with(step_of=lambda step: 0),
                "every call of train_step got the same step number, so the learning rate stayed at its first, tiny "
                "warmup value.", "for step, batch in enumerate(batches): train_step(model, optimizer, batch, step, …)"),
        Mistake("steps numbered from 1 in the loop", _fit_with(step_of=lambda step: step + 1),
                "train_step takes the number of steps before this one (0 for the first) and adds 1 for the schedule "
                "itself; numbered from 1 in the loop, every rate is one step ahead.",
                "enumerate(batches), not enumerate(batches, 1)"),
        Mistake("Adam's default settings", _fit_with(adam={}),
                "the paper's Adam uses β₂ = 0.98 and ε = 1e-9 (§5.3), not PyTorch's defaults (0.999, 1e-8).",
                "torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)"),
        Mistake("Adam's default ε", _fit_with(adam=dict(betas=PAPER_ADAM["betas"])),
                "the paper's Adam uses ε = 1e-9 (§5.3), not PyTorch's default 1e-8; β₂ = 0.98 is right.",
                "torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)"),
        Mistake("AdamW instead of Adam", _fit_with(optimizer=torch.optim.AdamW),
                "AdamW decays every weight towards 0 by default (weight_decay=0.01); the paper trains with Adam, "
                "which has no weight decay.",
                "torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)"),
        Mistake("smoothing not passed to train_step", _fit_with(pass_smoothing=False),
                "fit's `smoothing` is the ε of the label smoothing; left out of the call, train_step uses its own "
                "default, 0.1, whatever fit was given.",
                "train_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor, "
                "smoothing=smoothing)"),
        Mistake("factor not passed to train_step", _fit_with(pass_factor=False),
                "fit's `factor` scales the learning-rate schedule; left out of the call, train_step uses its own "
                "default, 1.0, whatever fit was given.",
                "train_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor, "
                "smoothing=smoothing)"),
    ],
    forbidden=(fit, train_step),
    allowed=TRAINING_PIECES,
    uses=(TRAIN_STEP,),
    output_names=("loss of each step", "optimizer"),
    input_note="called as fit(model, batches, …), batch i being {'src': src[i], 'src_mask': src_mask[i], "
               "'tgt': tgt[i]}",
    rtol=1e-3,  # the losses of a few dozen Adam steps; tiny float differences grow a little along the way
    atol=1e-4,
)


# --------------------------------------------------------------------------- 4. greedy decoding without a cache

def _uncached(mistake: Mistake) -> Mistake:
    """Chapter 8's decoding mistakes, their fixes said without the KV cache the capstone's model lacks."""
    if mistake.name == "source padding mask not used":
        return dataclasses.replace(mistake, fix="pass src_mask to model.encode(src, src_mask) and to "
                                   "model.decode(out, memory, src_mask) at every step.")
    if mistake.name == "only the newest token fed, and nothing kept of the rest":
        return dataclasses.replace(
            mistake, hint="the decoder sees only the tokens it is given: fed the newest token alone, it predicts "
            "from that one token at position 0, blind to the tokens before it.",
            fix="feed the whole prefix every step, model.decode(out, memory, src_mask), and take the logits of "
            "its last position.")
    return mistake


GREEDY = dataclasses.replace(
    CACHED_GREEDY,
    key="greedy",
    # tfm_ref's decoding uses its cache; without one, feeding the whole prefix every step gives the same tokens.
    hidden=[case for case in CACHED_GREEDY.hidden if "KV cache" not in case.label],
    mistakes=[_uncached(m) for m in CACHED_GREEDY.mistakes if "cache" not in m.name],
)

EXERCISES = (TRANSFORMER, TRAIN_STEP, FIT, GREEDY)
