"""Skew robustness of grouped-GEMM gains: uniform-only gains are over-fitting."""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.skew import NOT_APPLICABLE, REJECT, ROBUST, skew_robustness
from kernel_ratchet.guard.static_audit import audit_change
from tests.guard import planted as P

#: Per-shape gains of the planted uniform-only shortcut (GROUPED_UNIFORM: rows per expert as a
#: constexpr), measured against the incumbent on the bundled MoE labels.
UNIFORM_SHORTCUT = {
    "dsv3_gate_up_uniform": 0.21,
    "dsv3_gate_up_top2_cf1.0": -0.04,
    "dsv3_gate_up_top1_cf1.25": -0.02,
    "dsv3_gate_up_skewed": -0.11,
    "dsv3_down_uniform": 0.18,
    "dsv3_down_skewed": -0.08,
}
#: A tile change that helps every distribution.
TILE_CHANGE = {
    "dsv3_gate_up_uniform": 0.07,
    "dsv3_gate_up_top2_cf1.0": 0.06,
    "dsv3_gate_up_skewed": 0.05,
    "dsv3_down_uniform": 0.06,
    "dsv3_down_skewed": 0.04,
}


def test_uniform_only_shortcut_is_rejected_by_gains_and_by_the_audit() -> None:
    verdict, reason = skew_robustness(UNIFORM_SHORTCUT, tolerance=0.02)
    assert verdict == REJECT and "uniform loads only" in reason
    static = audit_change(
        {P.GROUPED_PATH: P.GROUPED_INCUMBENT}, {P.GROUPED_PATH: P.GROUPED_UNIFORM}
    )
    assert static.verdict == REJECT


def test_gain_on_every_distribution_is_robust() -> None:
    verdict, reason = skew_robustness(TILE_CHANGE, tolerance=0.02)
    assert verdict == ROBUST and "holds on skewed" in reason


def test_one_skewed_regression_rejects_even_with_a_positive_mean() -> None:
    gains = {"tiny_uniform": 0.10, "tiny_top2_cf1.0": 0.12, "tiny_skewed": -0.05}
    verdict, reason = skew_robustness(gains, tolerance=0.02)
    assert verdict == REJECT and "tiny_skewed regressed" in reason


def test_no_uniform_gain_is_robust_and_missing_skew_rejects() -> None:
    assert skew_robustness({"g_uniform": 0.01, "g_skewed": -0.01})[0] == ROBUST
    verdict, reason = skew_robustness({"g_uniform": 0.2})
    assert verdict == REJECT and "skewed" in reason
    assert skew_robustness({"m4096_n4096_k4096": 0.2})[0] == NOT_APPLICABLE
    assert skew_robustness({"g_zipf": 0.05})[0] == ROBUST


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError):
        skew_robustness({"g_uniform": -1.0})
    with pytest.raises(ValueError):
        skew_robustness({"g_uniform": 0.1}, tolerance=-0.1)


# Twins: the same layer (groups, N, K) under uniform and skewed routing.
LAYERS = {
    "qwen3_235b_gate_up_uniform": (128, 3072, 4096),
    "qwen3_235b_gate_up_zipf1.2": (128, 3072, 4096),
    "mixtral_8x7b_down_skewed": (8, 4096, 14336),
    "mixtral_8x7b_down_uniform": (8, 4096, 14336),
    "olmoe_1b_7b_gate_up_onehot_heavy": (64, 2048, 2048),
}


def test_a_change_to_small_groups_is_judged_on_its_own_layer_under_skew() -> None:
    # The gain applies to layers of short groups only: its skewed twin keeps most of it, the
    # other layers' skewed shapes (long groups) barely move.
    gains = {
        "qwen3_235b_gate_up_uniform": 0.0366,
        "qwen3_235b_gate_up_zipf1.2": 0.030,
        "mixtral_8x7b_down_skewed": 0.0048,
        "olmoe_1b_7b_gate_up_onehot_heavy": 0.0120,
    }
    assert skew_robustness(gains)[0] == REJECT  # without twins: unrelated layers outvote it
    verdict, reason = skew_robustness(gains, layers=LAYERS)
    assert verdict == ROBUST and reason.startswith("same layers: uniform +3.66% (1 shapes)")


def test_a_twin_that_loses_the_gain_rejects_what_other_layers_would_excuse() -> None:
    gains = {
        "qwen3_235b_gate_up_uniform": 0.040,
        "qwen3_235b_gate_up_zipf1.2": 0.005,
        "mixtral_8x7b_down_skewed": 0.060,
        "olmoe_1b_7b_gate_up_onehot_heavy": 0.050,
    }
    assert skew_robustness(gains)[0] == ROBUST  # the skewed geomean of other layers is high
    verdict, reason = skew_robustness(gains, layers=LAYERS)
    assert verdict == REJECT and "uniform loads only" in reason


def test_a_uniform_shape_without_a_twin_is_still_judged_against_all_skewed_shapes() -> None:
    gains = {
        "qwen3_235b_gate_up_uniform": 0.03,
        "qwen3_235b_gate_up_zipf1.2": 0.03,
        "mixtral_8x7b_down_uniform": 0.10,
        "olmoe_1b_7b_gate_up_onehot_heavy": -0.03,
    }
    layers = {k: v for k, v in LAYERS.items() if k != "mixtral_8x7b_down_skewed"}
    verdict, reason = skew_robustness(gains, layers=layers)
    assert verdict == REJECT and "other layers" in reason and "onehot_heavy regressed" in reason
