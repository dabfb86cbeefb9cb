"""tfm_widgets/heads.py: per-head maps and KV-cache sizes of real model shapes."""
from __future__ import annotations

import pytest
import torch

from tfm_ref import kv_cache_bytes
from tfm_widgets.heads import MODEL_SHAPES, head_maps, heads_explorer, heads_panel, kv_cache_table


def test_head_maps_are_one_row_stochastic_map_per_query_head():
    maps = head_maps(n_heads=8, n_kv_heads=2, seq_len=5)
    assert maps.shape == (8, 5, 5)
    assert torch.allclose(maps.sum(-1), torch.ones(8, 5), atol=1e-5)


def test_query_heads_sharing_a_kv_head_see_the_same_keys_but_not_the_same_maps():
    maps = head_maps(n_heads=4, n_kv_heads=1)
    assert not torch.allclose(maps[0], maps[1])  # their queries differ


def test_kv_cache_table_orders_mha_above_gqa_above_mqa_for_llama_2_70b():
    table = kv_cache_table(MODEL_SHAPES["Llama-2-70B"], [4096])
    mha, gqa, mqa = (values[0] for values in table.values())
    assert mha == 8 * gqa == 64 * mqa
    assert gqa == kv_cache_bytes(80, 8, 128, 4096)


def test_a_student_formula_is_used():
    seen = []

    def student(*args):
        seen.append(args)
        return kv_cache_bytes(*args)

    kv_cache_table(MODEL_SHAPES["Llama-2-7B"], [1, 2], fn=student)
    heads_explorer(fn=student)
    assert len(seen) >= 6


def test_a_model_that_is_mha_gets_one_line_for_both_names_so_none_hides_another():
    table = kv_cache_table(MODEL_SHAPES["Llama-2-7B"], [4096])  # 32 query heads, 32 KV heads
    assert list(table) == ["MHA = the model's own (G = 32)", "MQA (G = 1)"]
    assert len({values[0] for values in table.values()}) == len(table)


def test_heads_panel_refuses_a_g_that_does_not_divide_h():
    with pytest.raises(ValueError, match="must divide"):
        heads_panel(n_heads=4, n_kv_heads=8)
    assert len(heads_panel(n_heads=4, n_kv_heads=2).axes) == 4
