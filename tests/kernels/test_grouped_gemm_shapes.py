"""MoE shape sets and seeded token distributions (pure Python, no kernels)."""

from __future__ import annotations

import math

import pytest

from kernel_ratchet.kernels.grouped_gemm import shapes as S


@pytest.mark.parametrize("dist", S.DISTRIBUTIONS)
def test_distribution_contract(dist):
    G, rows = 64, 64 * 100
    lens = S.group_lens(dist, G, rows, seed=3)
    assert len(lens) == G and all(n >= 0 for n in lens)
    assert lens == S.group_lens(dist, G, rows, seed=3)  # deterministic in the seed
    if dist == "uniform":
        assert max(lens) - min(lens) <= 1 and sum(lens) == rows
    elif dist == "top2_cf1.0":
        assert max(lens) <= math.ceil(rows / G) and sum(lens) <= rows
    elif dist == "top1_cf1.25":
        assert max(lens) <= math.ceil(1.25 * rows / G) and sum(lens) <= rows
    else:
        assert sum(lens) == rows and max(lens) >= 0.5 * rows


def test_target_covers_models_projections_distributions():
    shapes = S.moe_target()
    assert len(shapes) == len(S.MODELS) * 2 * len(S.DISTRIBUTIONS)
    for s in shapes:
        assert s.params["dist"] in s.label and "seed" in s.params
        lens = S.lens_of(s)
        assert len(lens) == s.B and sum(lens) == s.M
    ds = {s.label: s for s in shapes}["dsv3_gate_up_uniform"]
    assert (ds.B, ds.N, ds.K) == (256, 2 * 2048, 7168)
    mx = {s.label: s for s in shapes}["mixtral_8x7b_down_skewed"]
    assert (mx.B, mx.N, mx.K) == (8, 4096, 14336)


def test_odd_and_tiny_sets_have_empty_groups_and_ragged_counts():
    lens = [S.lens_of(s) for s in S.tiny_cpu()]
    assert any(0 in ls for ls in lens)
    assert any(n % 16 for ls in lens for n in ls)
    assert any(sum(ls) == 0 for ls in lens)


def test_the_campaign_set_spans_both_routing_regimes_on_the_same_layers():
    shapes = S.moe_campaign()
    dists = {s.params["dist"] for s in shapes}
    assert {"uniform", "skewed"} <= dists and {"zipf1.2", "onehot_heavy"} <= dists
    models = {s.label.split("_gate_up_")[0].split("_down_")[0] for s in shapes}
    assert models & set(S.MODELS) and models & set(S.OFFLIST_MODELS)
    # the shapes are the target and stress sets' own, routing and all
    known = {s.label: s for s in S.moe_target() + S.moe_stress()}
    assert all(known[s.label] == s for s in shapes) and len(shapes) == 7
    # three layers under both routings: the skew gate's twins (same groups, N and K)
    layer = {}
    for s in shapes:
        layer.setdefault((s.B, s.N, s.K), set()).add(s.params["dist"] == "uniform")
    assert sum(1 for kinds in layer.values() if kinds == {True, False}) == 3
    # the one-hot-heavy rows give one expert every token: the weight gradient's long group
    heavy = next(s for s in shapes if s.params["dist"] == "onehot_heavy")
    assert max(S.lens_of(heavy)) >= heavy.M // heavy.params["top_k"]
