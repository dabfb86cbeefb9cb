import math

import pytest
import torch

from tfm_ref import scaled_dot_product_attention
from tfm_widgets import efficiency
from tfm_widgets.efficiency import (
    PeakMemory, attention_cost_explorer, cost_figure, from_bench, measure_attention, recorded_benchmarks,
    static_attention_cost_explorer,
)


def test_attention_cost_explorer_builds_and_its_snapshot_holds_a_figure():
    data = measure_attention([32, 64], repeats=1)
    assert "data:image/png;base64," in attention_cost_explorer(data=data).snapshot_html()


def test_attention_cost_explorer_measures_the_plugged_in_function():
    calls = []

    def my_attention(q, k, v):
        calls.append(q.shape[-2])
        return scaled_dot_product_attention(q, k, v)

    explorer = attention_cost_explorer(fn=my_attention)
    assert calls and "your fn" in str(explorer.snapshot().axes[0].get_legend_handles_labels()[1])


def test_peak_memory_counts_a_new_tensor_and_not_a_view():
    x = torch.zeros(256, 256)
    with PeakMemory() as memory:
        y = x * 2  # a new (256, 256) float32 tensor
        y.view(-1)
    assert memory.peak == 256 * 256 * 4


def test_eager_attention_memory_grows_quadratically_and_fused_does_not():
    data = measure_attention([128, 256], repeats=1)
    eager, fused = data["results"].values()
    assert eager["peak_mib"][1] / eager["peak_mib"][0] == pytest.approx(4, rel=0.1)
    assert fused["peak_mib"][1] / fused["peak_mib"][0] == pytest.approx(2, rel=0.1)


def test_measure_attention_rejects_empty_lengths():
    with pytest.raises(ValueError, match="lengths"):
        measure_attention([])


def test_cost_figure_draws_time_and_memory():
    fig = cost_figure(measure_attention([16, 32], repeats=1))
    assert len(fig.axes) == 2 and all(ax.lines for ax in fig.axes)


def test_bench_results_convert_with_missing_measurements_as_nan(tmp_path):
    bench = {"config": {"n_heads": 8, "d_model": 512, "attn_batch": 8}, "summary": {"device": "NVIDIA H100"},
             "attention": [{"seq_len": 256, "eager_ms": 1.0, "sdpa_ms": 0.5, "eager_memory_mib": 64.0,
                            "sdpa_memory_mib": 4.0},
                           {"seq_len": 512, "eager_ms": None, "sdpa_ms": 1.0, "sdpa_memory_mib": 8.0}]}
    (tmp_path / "h100_bench.json").write_text(__import__("json").dumps(bench))
    (tmp_path / "history.json").write_text('{"evals": []}')
    found = recorded_benchmarks(tmp_path)
    assert list(found) == ["h100_bench.json"]
    eager = found["h100_bench.json"]["results"]["eager (tfm_ref)"]
    assert eager["ms"][0] == 1.0 and math.isnan(eager["ms"][1]) and math.isnan(eager["peak_mib"][1])
    assert len(cost_figure(found["h100_bench.json"]).axes) == 2


def test_from_bench_rejects_results_without_attention():
    with pytest.raises(ValueError, match="attention"):
        from_bench({"training": {}})


def _recorded() -> dict:
    return {"device": "GPU", "shape": "B=1", "head_dim": 64, "seq_len": [256, 512, 1024, 2048, 4096],
            "results": {"eager": {"ms": [1.0, 4.0, 16.0, 64.0, 256.0], "peak_mib": [1.0, 4.0, 16.0, 64.0, 256.0]}}}


def test_every_control_of_the_static_explorer_acts_on_the_recording_or_says_why_it_cannot(monkeypatch):
    drawn = []
    monkeypatch.setattr(efficiency, "cost_figure", lambda data, title: drawn.append((data["seq_len"], title)))
    static = static_attention_cost_explorer(_recorded(), longest_measured=1024)
    source, longest, head_dim = static.controls
    recorded, measured = source.values
    assert longest.values == (256, 512, 1024, 2048, 4096) and longest.initial == 4096 and head_dim.initial == 64
    (panel,) = static.panels
    panel.draw(source=recorded, longest=1024, head_dim=64)
    assert drawn == [([256, 512, 1024], "recorded benchmark")]  # longest n crops the recording too
    with pytest.raises(ValueError, match="ran at head width 64 only"):
        panel.draw(source=recorded, longest=1024, head_dim=128)
    monkeypatch.setattr(efficiency, "measure_attention", lambda seq_lens, head_dim: dict(
        _recorded(), seq_len=list(seq_lens), head_dim=head_dim))
    panel.draw(source=measured, longest=1024, head_dim=64)
    assert drawn[-1] == ([64, 128, 256, 512, 1024], "measured while the book was built (CPU)")
    with pytest.raises(ValueError, match="measured up to n = 1024 only"):  # a recorded length it did not reach
        panel.draw(source=measured, longest=2048, head_dim=64)
    # a figure per recorded length, one message for the head widths it did not run, one past the measurement
    assert panel.key(recorded, 256, 64) != panel.key(recorded, 1024, 64)
    assert panel.key(recorded, 256, 32) == panel.key(recorded, 256, 128) != panel.key(recorded, 256, 64)
    assert panel.key(measured, 2048, 32) == panel.key(measured, 4096, 64) != panel.key(measured, 1024, 32)
    assert panel.key(measured, 256, 32) != panel.key(measured, 256, 128)


def test_the_recorded_and_measured_data_say_their_head_width():
    assert from_bench({"attention": [{"seq_len": 256, "eager_ms": 1.0, "sdpa_ms": 0.5}],
                       "config": {"d_model": 512, "n_heads": 8, "attn_batch": 2}})["head_dim"] == 64
    assert measure_attention([8], head_dim=16, repeats=1)["head_dim"] == 16


def test_the_static_explorer_without_a_recording_offers_the_measurement_only():
    static = static_attention_cost_explorer()
    assert static.controls[0].values == ("measured on the build machine",)
    assert max(static.controls[1].values) == 1024  # it measures up to longest_measured


def test_a_shorter_longest_n_shows_the_start_of_the_measurement(monkeypatch):
    measured = []

    def fake_measure(seq_lens, head_dim):
        measured.append((tuple(seq_lens), head_dim))
        return dict(_recorded(), seq_len=list(seq_lens),
                    results={"eager": {"ms": [float(n) for n in seq_lens], "peak_mib": [float(n) for n in seq_lens]}})

    monkeypatch.setattr(efficiency, "measure_attention", fake_measure)
    drawn = []
    monkeypatch.setattr(efficiency, "cost_figure", lambda data, title: drawn.append(data["seq_len"]))
    static = static_attention_cost_explorer(longest_measured=512)
    draw = static.panels[0].draw
    draw(source="measured on the build machine", longest=256, head_dim=64)
    draw(source="measured on the build machine", longest=512, head_dim=64)
    assert measured == [((64, 128, 256, 512), 64)]  # one measurement per head width
    assert drawn == [[64, 128, 256], [64, 128, 256, 512]]
