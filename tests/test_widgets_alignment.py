"""tfm_widgets/alignment.py: cross-attention maps of an encoder-decoder on a typed date."""
from __future__ import annotations

import pytest
import torch

from tfm_ref import Transformer, attention, greedy_decode
from tfm_widgets.alignment import cross_attention_maps, use_attention
from tiny_models import tiny_date_model


def test_maps_are_n_tgt_by_n_src_per_layer_and_rows_sum_to_one():
    model, task = tiny_date_model()  # untrained: the shapes, not the alignment, are under test
    source, output, maps = cross_attention_maps(model, task, "Nov 22, 2026")
    assert source == list("Nov 22, 2026")
    assert sorted(maps) == ["decoder.layers.0.cross_attn", "decoder.layers.1.cross_attn"]
    for weights in maps.values():
        assert weights.shape == (2, len(output), len(source))
        assert torch.allclose(weights.sum(-1), torch.ones(2, len(output)), atol=1e-5)


def test_use_attention_routes_every_layer_to_the_student_function_and_restores_the_model():
    model, task = tiny_date_model()
    calls = []

    def student(q, k, v, mask=None, **kwargs):
        calls.append(q.shape)
        return attention.scaled_dot_product_attention(q, k, v, mask, **kwargs)

    before = {name: m.attn_impl for name, m in model.named_modules() if hasattr(m, "attn_impl")}
    cross_attention_maps(model, task, "2026年11月22日", fn=student)
    assert calls
    assert {name: m.attn_impl for name, m in model.named_modules() if hasattr(m, "attn_impl")} == before
    assert set(attention.ATTENTION_IMPLEMENTATIONS) == {"eager", "sdpa"}
    with use_attention(model, None):  # None leaves the model as it is
        assert {m.attn_impl for m in model.modules() if hasattr(m, "attn_impl")} == set(before.values())


def test_alignment_view_draws_its_snapshot_for_a_given_model():
    from types import SimpleNamespace

    from tfm_widgets.alignment import alignment_view

    model, task = tiny_date_model()
    view = alignment_view(dates=SimpleNamespace(model=model, task=task))
    assert "data:image/png;base64," in view.snapshot_html()


class _WithoutCache(torch.nn.Module):
    """A capstone-style model: encode, decode and forward, but no KV cache."""

    def __init__(self, inner: Transformer) -> None:
        super().__init__()
        self.inner = inner

    def encode(self, src, src_mask=None):
        return self.inner.encode(src, src_mask)

    def decode(self, tgt, memory, src_mask=None):
        return self.inner.decode(tgt, memory, src_mask)

    def forward(self, src, tgt, src_mask=None):
        return self.inner(src, tgt, src_mask)


def _decode_without_cache(model, src, src_mask=None, **settings):
    return greedy_decode(model.inner, src, src_mask, use_cache=False, **settings)


def test_a_model_without_a_cache_translates_with_the_decoding_it_is_given():
    model, task = tiny_date_model()
    text = "Nov 22, 2026"
    with pytest.raises(AttributeError, match="new_cache"):
        cross_attention_maps(_WithoutCache(model), task, text)
    source, output, maps = cross_attention_maps(_WithoutCache(model), task, text, decode=_decode_without_cache)
    expected_source, expected_output, expected = cross_attention_maps(model, task, text)
    assert (source, output) == (expected_source, expected_output)
    assert sorted(maps) == [f"inner.{name}" for name in sorted(expected)]
    assert all(torch.allclose(maps[f"inner.{name}"], weights, atol=1e-6) for name, weights in expected.items())


class _OwnAttention(torch.nn.Module):
    """A student's own cross-attention layer: it computes tfm_ref's, but is no tfm_ref.MultiHeadAttention."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x, context=None, mask=None, cache=None):
        return self.inner(x, context, mask=mask, cache=cache)


def test_a_model_without_tfm_ref_cross_attention_is_told_so():
    model, task = tiny_date_model()
    for layer in model.decoder.layers:
        layer.cross_attn = _OwnAttention(layer.cross_attn)
    with pytest.raises(ValueError, match="no cross-attention recorded"):
        cross_attention_maps(model, task, "Nov 22, 2026")


def test_the_books_view_draws_every_date_at_one_width():
    """The dates differ in length; a figure that changed width with the date would jump under the reader's eyes."""
    from tfm_widgets.alignment import DATE_PRESETS, static_alignment_view

    view = static_alignment_view()
    layer = view.controls[1].initial
    sizes = {tuple(view.panels[0].draw(text=text, layer=layer, head="mean").get_size_inches()) for text in DATE_PRESETS}
    assert len({len(text) for text in DATE_PRESETS}) > 1 and len({width for width, _ in sizes}) == 1
