"""Chapter 10 checks beyond tests/test_exercises.py (where the notebook's own solutions pass): answers written
another way pass too, the checks' inputs are never trained in place, the check's training run is one in which a
model learns, a whole tfm_ref model is refused at once (it is withheld when grading), and the guided full
run keeps and averages the checkpoints it says it does.
"""
import re

import jupytext
import pytest
import torch
from torch import nn

import tfm_ref
from autograde import check
from autograde.checking import CheckFailed
from editions.assignments import source_markdown
from autograde.exercises import ch10_capstone as chapter
from autograde.exercises.ch08_encoder_decoder import _greedy_variant
from exercise_proofs import assert_named_in_both_languages
from tfm_ref.losses import label_smoothed_cross_entropy
from tfm_ref.schedule import noam_lr
from tfm_lab.tasks import PAD_ID


pytestmark = pytest.mark.usefixtures("checks_on_one_thread")


def _hand_written_step(model, optimizer, batch, step, *, d_model, warmup, factor=1.0, smoothing=0.1):
    """A step whose loss and schedule are written out, not taken from tfm_ref: other float roundings."""
    model.train()
    tgt = batch["tgt"]
    log_probs = model(batch["src"], tgt[:, :-1], batch["src_mask"]).log_softmax(-1)  # (B, T, V)
    target = tgt[:, 1:]
    per_position = -(1 - smoothing) * log_probs.gather(-1, target[..., None])[..., 0] - smoothing * log_probs.mean(-1)
    real = target != PAD_ID
    loss = (per_position * real).sum() / real.sum()
    s = step + 1
    lr = factor * d_model**-0.5 * min(s**-0.5, s * warmup**-1.5)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss), lr  # the notebook asks for a Python float: float() as well as .item()


def _hand_written_fit(model, batches, *, d_model, warmup, factor=1.0, smoothing=0.1):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, foreach=True)
    return [_hand_written_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor,
                               smoothing=smoothing)[0] for step, batch in enumerate(batches)]


@pytest.mark.parametrize("seed", range(4))
def test_a_step_and_a_loop_written_another_way_pass(seed):
    assert chapter.TRAIN_STEP.run(_hand_written_step, hidden=True, seed=seed).passed
    assert chapter.FIT.run(_hand_written_fit, hidden=True, seed=seed).passed


@pytest.mark.parametrize("exercise", [chapter.TRAIN_STEP, chapter.FIT], ids=lambda e: e.key)
def test_the_checks_model_is_not_trained_in_place(exercise):
    call = exercise.inputs(torch.Generator().manual_seed(0), exercise.shapes[-1], torch.float32)
    model = call.args[0]
    before = {name: value.clone() for name, value in model.state_dict().items()}
    exercise.adapter.reference(exercise.reference, exercise.shapes[-1], torch.float32)(*call.args, **call.kwargs)
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())


@pytest.mark.parametrize("case", [*chapter.FIT.visible, *chapter.FIT.hidden], ids=lambda c: c.label)
def test_the_checks_training_run_halves_the_loss(case):
    dims = case.dims or chapter.FIT.shapes[-1]
    call = (case.inputs or chapter.FIT.inputs)(torch.Generator().manual_seed(0), dims, torch.float32)
    losses, optimizer = chapter.FIT.adapter.reference(chapter.fit, dims, torch.float32)(*call.args, **call.kwargs)
    assert losses[-3:].mean() < 0.6 * losses[0]
    assert optimizer == "Adam(betas=(0.9, 0.98), eps=1e-09, weight_decay=0)"  # the paper's, §5.3


def test_the_steps_are_those_of_the_schedule_and_dropout_is_on():
    call = chapter.TRAIN_STEP.inputs(torch.Generator().manual_seed(0), chapter.TRAIN_STEP.shapes[-1], torch.float32)
    assert not call.args[0].training  # the model reaches the step as after an evaluation
    losses, rates, updates = chapter.TRAIN_STEP.adapter.reference(chapter.train_step, {}, torch.float32)(
        *call.args, **call.kwargs)
    first, warmup = call.kwargs["first_step"], call.kwargs["warmup"]
    expected = [noam_lr(first + 1 + i, call.kwargs["d_model"], warmup) for i in range(len(rates))]
    assert torch.allclose(rates, torch.tensor(expected))
    assert (updates > 0).all()
    with torch.no_grad():  # the same batch in eval mode scores differently: the step trained with dropout
        tgt = call.args[3][0]
        logits = call.args[0].eval()(call.args[1][0], tgt[:, :-1], call.args[2][0])
        eval_loss = label_smoothed_cross_entropy(logits, tgt[:, 1:], 0.1, PAD_ID)
    assert not torch.isclose(eval_loss, losses[0])


def test_wrapping_tfm_refs_whole_model_earns_nothing():
    class Transformer(nn.Module):
        def __init__(self, vocab_size, d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                     dropout=0.1, norm_first=False, max_len=512):
            super().__init__()
            whole = tfm_ref.Transformer(tfm_ref.TransformerConfig(
                vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_encoder_layers=n_encoder_layers,
                n_decoder_layers=n_decoder_layers, dropout=dropout, norm_first=norm_first, max_len=max_len))
            self.__dict__["whole"] = whole  # not a submodule: the parameter names stay tfm_ref's
            self._modules.update(whole._modules)

        def forward(self, src, tgt, src_mask=None):
            return self.whole(src, tgt, src_mask)

    with pytest.raises(CheckFailed, match="tfm_ref's `Transformer`"):
        check("ch10_capstone.transformer", Transformer)


def test_the_decoding_hints_and_fixes_speak_of_no_cache():
    assert all("cache" not in mistake.hint + mistake.fix for mistake in chapter.GREEDY.mistakes)


FULL_RUN = "steps, batch_size, checkpoint_every, checkpoints_averaged = 800, 128, 50, 4"


def _guided_full_run(namespace: dict, fit_around) -> None:
    """The notebook's own code cells, checks and the attention view left out, with the run shrunk to
    8 steps of 4 dates, a checkpoint every 2 steps, the last 2 averaged; the full run trains with
    ``fit_around(the notebook's fit)``."""
    cells = [cell.source for cell in jupytext.read(source_markdown("ch10_capstone")).cells
             if cell.cell_type == "code" and "check(" not in cell.source and "alignment_view(" not in cell.source]
    assert sum(FULL_RUN in source for source in cells) == 1, "the full run's cell was not found"
    for source in cells:
        if FULL_RUN in source:
            source = source.replace(FULL_RUN, "steps, batch_size, checkpoint_every, checkpoints_averaged = 8, 4, 2, 2")
            namespace["fit"] = fit_around(namespace["fit"])
        exec(source, namespace)


@pytest.mark.slow
def test_the_guided_full_run_scores_the_average_of_its_last_checkpoints(capsys):
    namespace: dict = {}
    after: list[dict] = []  # the weights after each step, as the notebook's fit leaves them

    def recording(fit):
        def recording_fit(model, batches, **kwargs):
            def recorded():
                for batch in batches:
                    yield batch
                    after.append({name: value.clone() for name, value in model.state_dict().items()})
            return fit(model, recorded(), **kwargs)
        return recording_fit

    _guided_full_run(namespace, recording)
    kept = namespace["checkpoints"]
    last, averaged = namespace["model"].state_dict(), namespace["averaged"].state_dict()
    assert len(kept) == 2
    for checkpoint, step in zip(kept, (6, 8)):
        assert all(torch.equal(checkpoint[name], after[step - 1][name]) for name in checkpoint)
    assert all(torch.equal(last[name], after[-1][name]) for name in last)
    assert all(torch.allclose(averaged[name], (kept[0][name] + kept[1][name]) / 2) for name in averaged)
    assert not all(torch.equal(averaged[name], last[name]) for name in last)
    printed = capsys.readouterr().out
    assert "exact match of the last weights" in printed and "average of the last 2 checkpoints" in printed


@pytest.mark.slow
def test_a_fit_that_reads_every_batch_before_training_is_named_in_the_guided_run():
    def eager(fit):
        return lambda model, batches, **kwargs: fit(model, list(batches), **kwargs)

    with pytest.raises(RuntimeError, match=r"read the batches before it trained"):
        _guided_full_run({}, eager)


def test_a_fit_that_returns_something_else_than_the_losses_is_told_what_to_return():
    def mean_loss(model, batches, *, d_model, warmup, factor=1.0, smoothing=0.1):
        losses = chapter.fit(model, batches, d_model=d_model, warmup=warmup, factor=factor, smoothing=smoothing)
        return sum(losses) / len(losses)

    report = chapter.FIT.run(mean_loss, seed=0)
    assert "fit should return a list of 5 losses, one number per step; got float" in report.message


def test_a_fit_that_reads_every_batch_before_training_fails_its_check_with_the_reason():
    def eager(model, batches, **kwargs):
        return chapter.fit(model, list(batches), **kwargs)

    report = chapter.FIT.run(eager, seed=0)
    assert not report.passed and "fit asked for batch 1 before it trained on batch 0" in report.message
    assert "not list(batches) first" in report.message


def test_a_step_that_returns_its_loss_as_a_tensor_is_told_to_return_a_float():
    def tensor_loss(*args, **kwargs):
        loss, lr = chapter.train_step(*args, **kwargs)
        return torch.tensor(loss), lr

    report = chapter.TRAIN_STEP.run(tensor_loss, seed=0)
    assert not report.passed
    assert "should return the loss as a Python float (loss.item()), got tensor of shape ()" in report.message


@pytest.mark.slow
def test_a_loop_that_feeds_the_decoder_only_its_newest_token_fails_on_every_seed():
    newest_only = _greedy_variant(newest_only_uncached=True)  # on a model that repeats one token, it passed
    for seed in range(40):
        report = chapter.GREEDY.run(newest_only, hidden=True, seed=seed)
        assert report.mistake == "only the newest token fed, and nothing kept of the rest", (seed, report.message)


def test_a_failing_step_says_how_the_stacked_batches_reach_train_step():
    def never_sets_the_rate(model, optimizer, batch, step, *, d_model, warmup, factor=1.0, smoothing=0.1):
        return chapter._step_with(set_lr="never")(model, optimizer, batch, step, d_model=d_model, warmup=warmup,
                                                  factor=factor, smoothing=smoothing)

    message = chapter.TRAIN_STEP.run(never_sets_the_rate, seed=0).message
    assert "(called once for each batch i, as train_step(model, optimizer, {'src': src[i]," in message


def test_one_block_repeated_in_a_stack_is_told_it_is_one_module_with_the_fix():
    def repeated(*args, **kwargs):
        model = chapter.transformer(*args, **kwargs)
        model.encoder.layers = nn.ModuleList([model.encoder.layers[0]] * len(model.encoder.layers))
        return model

    message = chapter.TRANSFORMER.run(repeated, seed=0).message
    assert "your `encoder.layers.0` and `encoder.layers.1` are one and the same module, where tfm_ref has one each" \
           in message and "`[Block(...)] * n` repeats one object" in message


@pytest.mark.parametrize("init, std", [(torch.nn.init.normal_, 1.0), (torch.nn.init.xavier_uniform_, None)])
def test_a_model_whose_shared_matrix_starts_elsewhere_than_d_model_to_the_minus_half_is_told(init, std):
    def built_with_another_init(*args, **kwargs):
        model = chapter.transformer(*args, **kwargs)
        init(model.src_embed.weight)  # nn.Embedding's own init, or Xavier's
        return model

    report = chapter.TRANSFORMER.run(built_with_another_init, hidden=True, seed=0)
    assert not report.passed and "as built, the shared matrix starts with std d_model^−0.5" in report.message
    said = float(re.search(r"your shared embedding matrix has standard deviation ([0-9.]+);", report.message)[1])
    assert std is None or abs(said - std) < 0.1  # what it measured: nn.Embedding's N(0, 1)
    assert "nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)" in report.message


def _student_transformer(*, embed_dropout=True, init=True, length_axis=1):
    """A student's model, written out as the notebook's answer is (tied embeddings, Stack of blocks);
    ``embed_dropout``: the dropout after the embeddings, ``init``: the shared matrix started at d_model^−0.5,
    ``length_axis``: the axis of ids whose size slices the positional table (1 is right)."""
    class Stack(nn.Module):
        def __init__(self, layers, final_norm):
            super().__init__()
            self.layers, self.final_norm = nn.ModuleList(layers), final_norm

        def forward(self, x, *args):
            for layer in self.layers:
                x = layer(x, *args)
            return x if self.final_norm is None else self.final_norm(x)

    class Transformer(nn.Module):
        def __init__(self, vocab_size, d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                     dropout=0.1, norm_first=False, max_len=512):
            super().__init__()
            self.d_model = d_model
            self.src_embed = nn.Embedding(vocab_size, d_model)
            if init:
                nn.init.normal_(self.src_embed.weight, std=d_model**-0.5)
            self.tgt_embed = self.src_embed
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
            self.lm_head.weight = self.src_embed.weight
            self.register_buffer("pe", tfm_ref.sinusoidal_positional_encoding(max_len, d_model), persistent=False)
            self.dropout = nn.Dropout(dropout)
            norm = (lambda: tfm_ref.LayerNorm(d_model)) if norm_first else (lambda: None)
            self.encoder = Stack([tfm_ref.EncoderBlock(d_model, n_heads, d_ff, dropout, norm_first=norm_first)
                                  for _ in range(n_encoder_layers)], norm())
            self.decoder = Stack([tfm_ref.DecoderBlock(d_model, n_heads, d_ff, dropout, norm_first=norm_first)
                                  for _ in range(n_decoder_layers)], norm())

        def embed(self, ids):
            x = self.src_embed(ids) * self.d_model**0.5 + self.pe[: ids.shape[length_axis]]
            return self.dropout(x) if embed_dropout else x

        def forward(self, src, tgt, src_mask=None):
            keys = None if src_mask is None else tfm_ref.key_mask(src_mask)
            memory = self.encoder(self.embed(src), keys)
            causal = tfm_ref.causal_mask(tgt.shape[1], device=tgt.device)
            return self.lm_head(self.decoder(self.embed(tgt), memory, causal, keys))
    return Transformer


def test_the_embeddings_dropout_and_initialisation_are_checked_by_the_visible_check():
    """Training mode and the initialisation are visible cases: a model without the embeddings' dropout, or with
    nn.Embedding's N(0, 1), passed the visible check every time."""
    assert chapter.TRANSFORMER.run(_student_transformer(), hidden=True, seed=0).passed
    for seed in range(3):
        report = chapter.TRANSFORMER.run(_student_transformer(embed_dropout=False), seed=seed)
        assert report.mistake == "no dropout after the embeddings", (seed, report.message)
        report = chapter.TRANSFORMER.run(_student_transformer(init=False), seed=seed)
        assert "'as built, the shared matrix starts with std d_model^−0.5' failed" in report.message, report.message
        said = float(re.search(r"your shared embedding matrix has standard deviation ([0-9.]+);", report.message)[1])
        assert abs(said - 1) < 0.1, report.message  # nn.Embedding's N(0, 1)


def test_positions_sliced_by_the_batch_size_are_named_in_english_and_chinese():
    """pe[:B] for pe[:T] got a hint about keepdim (a student audit): the broadcasting error is the batch size's."""
    assert_named_in_both_languages(chapter.TRANSFORMER, _student_transformer(length_axis=0),
                                   "positions sliced by the batch size (pe[:B]) instead of the length", range(3))


@torch.no_grad()
def _greedy_without_eos(model, src, src_mask=None, *, bos_id, eos_id, max_len):
    """A student's loop that never looks at eos_id: the whole prefix every step, max_len steps."""
    memory = model.encode(src, src_mask)
    out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        next_token = model.decode(out, memory, src_mask)[:, -1].argmax(dim=-1)
        out = torch.cat([out, next_token[:, None]], dim=1)
    return out[:, 1:]


def test_greedy_decoding_without_eos_handling_is_named_the_same_way_on_every_seed():
    """A student audit saw it named on one run and only "shape (2, 5), expected (2, 4)" on the next."""
    assert_named_in_both_languages(chapter.GREEDY, _greedy_without_eos, "eos_id ignored: no early stop and no padding",
                                   range(8))


def test_a_fit_that_does_not_pass_its_smoothing_on_is_named_by_the_visible_check():
    """The visible case trained with ε = 0.1, train_step's default: leaving `smoothing` out passed until graded."""
    def fit(model, batches, *, d_model, warmup, factor=1.0, smoothing=0.1):
        optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
        return [_hand_written_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup, factor=factor)[0]
                for step, batch in enumerate(batches)]

    assert_named_in_both_languages(chapter.FIT, fit, "smoothing not passed to train_step", range(2))


def test_a_fit_that_does_not_pass_its_factor_on_is_named_in_english_and_chinese():
    """A student audit found this failing with only "the loss of each step differs"."""
    def fit(model, batches, *, d_model, warmup, factor=1.0, smoothing=0.1):
        optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
        return [_hand_written_step(model, optimizer, batch, step, d_model=d_model, warmup=warmup,
                                   smoothing=smoothing)[0] for step, batch in enumerate(batches)]

    assert_named_in_both_languages(chapter.FIT, fit, "factor not passed to train_step", range(2))
