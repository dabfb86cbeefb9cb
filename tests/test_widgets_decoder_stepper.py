import pytest
import torch

from tfm_ref import Transformer, TransformerConfig, greedy_decode
from tfm_lab.tasks import DateTask
from tfm_widgets.decoder_stepper import decode_steps, decoder_stepper, stepper_figure


@pytest.fixture(scope="module")
def date_setup():
    task = DateTask()
    torch.manual_seed(0)
    config = TransformerConfig(len(task.vocab), d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2,
                               d_ff=64, max_len=64, dropout=0.0)
    return Transformer(config).eval(), task


def test_decoder_stepper_builds_and_its_snapshot_holds_a_figure(date_setup):
    model, task = date_setup
    assert "data:image/png;base64," in decoder_stepper(model=model, task=task).snapshot_html()


def test_decoder_stepper_uses_the_plugged_in_decoding_rule(date_setup):
    model, task = date_setup
    picked = []

    def always_eos(logits):
        picked.append(logits.shape)
        return task.vocab.eos_id

    decoder_stepper(always_eos, model=model, task=task)
    assert picked and picked[0] == (len(task.vocab),)


def test_stepwise_decoding_matches_greedy_decode(date_setup):
    model, task = date_setup
    src, src_mask = task.encode_source(["Nov 22, 2026"])
    steps = decode_steps(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id, max_len=8)
    expected = greedy_decode(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id, max_len=8)
    assert [s.token for s in steps] == expected[0, : len(steps)].tolist()


def test_recorded_attention_rows_are_distributions_over_visible_keys(date_setup):
    model, task = date_setup
    src, src_mask = task.encode_source(["2026年11月22日"])
    steps = decode_steps(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id, max_len=5)
    for t, step in enumerate(steps):
        assert step.self_weights.shape[-1] == t + 1  # the new token sees itself and the earlier ones
        torch.testing.assert_close(step.self_weights.sum(-1), torch.ones(step.self_weights.shape[0]))
        assert step.cross_weights[:, ~src_mask[0]].abs().max() == 0  # source padding gets no weight


def test_stepper_figure_rejects_a_step_past_the_end(date_setup):
    model, task = date_setup
    src, src_mask = task.encode_source(["1/2/2000"])
    steps = decode_steps(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id, max_len=3)
    with pytest.raises(ValueError, match="step"):
        stepper_figure(steps, len(steps), list("1/2/2000"), task.vocab.tokens)


def test_decode_steps_rejects_a_batch(date_setup):
    model, task = date_setup
    src, src_mask = task.encode_source(["1/2/2000", "3/4/2001"])
    with pytest.raises(ValueError, match="one sequence"):
        decode_steps(model, src, src_mask, bos_id=1, eos_id=2, max_len=3)


def test_the_step_slider_ends_at_the_last_step_decoded(date_setup):
    model, task = date_setup
    stepper = decoder_stepper(model=model, task=task, max_len=12)
    src, src_mask = task.encode_source(["Nov 22, 2026"])
    steps = decode_steps(model, src, src_mask, bos_id=task.vocab.bos_id, eos_id=task.vocab.eos_id, max_len=12)
    (step,) = [c for c in stepper.widget.children[0].children if getattr(c, "description", "") == "step"]
    assert step.max == step.value == len(steps) - 1  # the slider shows the step the figure shows
    assert f"(d) step {len(steps) - 1}:" in stepper.snapshot().axes[-1].get_title()


def test_a_stepper_on_a_given_model_has_no_static_version(date_setup):
    model, task = date_setup
    assert decoder_stepper(model=model, task=task).static is None
