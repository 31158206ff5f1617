"""Paired A/B statistics and the paired decision (SPEC section 6)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired import PairedVerdict, classify, decide_paired, needs_more
from kernel_ratchet.scoring.paired_stats import log_ratios, primary_phases

V = PairedVerdict


def exact(ratios, base=1.0) -> PairedSamples:
    """Rounds whose speed ratios (incumbent time / candidate time) are exactly ``ratios``."""
    return PairedSamples({"fwd": [base] * len(ratios)}, {"fwd": [base / r for r in ratios]})


def noisy(ratio: float, n: int = 10, sigma: float = 0.02, seed: int = 0) -> PairedSamples:
    rng = np.random.default_rng(seed)
    inc = np.exp(rng.normal(0.0, sigma, n))
    cand = np.exp(rng.normal(0.0, sigma, n)) / ratio
    return PairedSamples({"fwd": inc}, {"fwd": cand})


def spread(ratio: float, width: float, n: int = 10) -> PairedSamples:
    """Per-round ratios evenly spread over ratio·[1 - width, 1 + width] (median = ratio)."""
    return exact(list(ratio * np.linspace(1 - width, 1 + width, n)))


# -- samples and per-round ratios --------------------------------------------------------------
def test_samples_are_validated():
    with pytest.raises(ValueError, match="phases differ"):
        PairedSamples({"fwd": [1.0]}, {"fwd": [1.0], "bwd": [1.0]})
    with pytest.raises(ValueError, match="same number"):
        PairedSamples({"fwd": [1.0, 1.0]}, {"fwd": [1.0]})
    with pytest.raises(ValueError, match="positive"):
        PairedSamples({"fwd": [1.0]}, {"fwd": [math.nan]})
    with pytest.raises(ValueError, match="unknown phase"):
        PairedSamples({"fwd": [1.0], "x": [1.0]}, {"fwd": [1.0], "x": [1.0]})
    with pytest.raises(ValueError, match="lack fwd"):
        PairedSamples({"bwd": [1.0]}, {"bwd": [1.0]})
    assert exact([1, 2, 3]).n_rounds == 3


def test_primary_phases_follow_the_campaign_type():
    both = PairedSamples({"fwd": [1.0], "bwd": [2.0]}, {"fwd": [1.0], "bwd": [1.0]})
    fwd = exact([1.0])
    assert primary_phases(both, "compute_fwd") == ("fwd",)
    assert primary_phases(both, "compute_fwd_bwd") == ("fwd", "bwd")
    assert primary_phases(both, "memory") == ("fwd", "bwd")
    assert primary_phases(fwd, "memory") == ("fwd",)
    with pytest.raises(ValueError, match="bwd"):
        primary_phases(fwd, "compute_fwd_bwd")
    with pytest.raises(ValueError, match="campaign_type"):
        primary_phases(fwd, "latency")


def test_fwd_bwd_ratio_is_the_ratio_of_summed_times():
    # forward 2 ms -> 2 ms, backward 4 ms -> 2 ms: step 6 ms -> 4 ms, speed ratio 1.5
    s = PairedSamples({"fwd": [2.0] * 3, "bwd": [4.0] * 3}, {"fwd": [2.0] * 3, "bwd": [2.0] * 3})
    assert np.exp(log_ratios(s, "compute_fwd_bwd")) == pytest.approx([1.5] * 3)
    d = decide_paired({"a": s}, "compute_fwd_bwd")
    row = d.per_shape[0]
    assert row.ratio == pytest.approx(1.5) and row.phase_ratios == pytest.approx(
        {"fwd": 1.0, "bwd": 2.0}
    )
    assert decide_paired({"a": s}, "compute_fwd").per_shape[0].ratio == pytest.approx(1.0)


# -- estimates and CIs -------------------------------------------------------------------------
def test_shape_ratio_is_the_median_of_per_round_ratios():
    d = decide_paired({"a": exact([2.0, 1.1, 1.2, 1.3, 1.4])}, "compute_fwd")
    assert d.per_shape[0].ratio == pytest.approx(1.3)
    even = decide_paired({"a": exact([1.0, 1.1, 1.21, 5.0])}, "compute_fwd")
    assert even.per_shape[0].ratio == pytest.approx(math.sqrt(1.1 * 1.21))  # geometric middle


def test_swapping_sides_inverts_ratio_and_ci():
    s = noisy(1.03, seed=4)
    d = decide_paired({"a": s}, "compute_fwd", rng_seed=9)
    r = decide_paired({"a": PairedSamples(s.candidate, s.incumbent)}, "compute_fwd", rng_seed=9)
    a, b = d.per_shape[0], r.per_shape[0]
    assert a.ratio * b.ratio == pytest.approx(1.0)
    assert a.ci_low * b.ci_high == pytest.approx(1.0) and a.ci_high * b.ci_low == pytest.approx(1)


def test_aggregate_is_the_geomean_with_a_tighter_hierarchical_ci():
    shapes = {f"s{i}": noisy(1.0 + 0.01 * i, n=12, seed=i) for i in range(5)}
    d = decide_paired(shapes, "compute_fwd")
    geo = math.exp(np.mean([math.log(r.ratio) for r in d.per_shape]))
    assert d.aggregate_ratio == pytest.approx(geo)
    assert d.aggregate_ci_low < d.aggregate_ratio < d.aggregate_ci_high
    agg_width = math.log(d.aggregate_ci_high / d.aggregate_ci_low)
    assert all(agg_width < math.log(r.ci_high / r.ci_low) for r in d.per_shape)
    assert d.shape_ci_level == pytest.approx(0.99) and d.aggregate_ci_level == 0.95


def test_alpha_is_split_over_shapes_and_planned_looks():
    shapes = {f"s{i}": noisy(1.0, seed=i) for i in range(5)}
    one = decide_paired(shapes, "compute_fwd")
    three = decide_paired(shapes, "compute_fwd", looks=3)
    assert three.looks == 3 and three.aggregate_ci_level == pytest.approx(1 - 0.05 / 3)
    assert three.shape_ci_level == pytest.approx(1 - 0.05 / 15)
    assert three.aggregate_ci_low < one.aggregate_ci_low < one.aggregate_ci_high
    assert one.aggregate_ci_high < three.aggregate_ci_high
    with pytest.raises(ValueError, match="looks"):
        decide_paired(shapes, "compute_fwd", looks=0)


def test_bootstrap_is_deterministic_for_a_seed():
    shapes = {"a": noisy(1.01, seed=1), "b": noisy(0.99, seed=2)}
    a = decide_paired(shapes, "compute_fwd", rng_seed=3)
    assert a == decide_paired(shapes, "compute_fwd", rng_seed=3)
    c = decide_paired(shapes, "compute_fwd", rng_seed=4)
    assert c.aggregate_ci_low == pytest.approx(a.aggregate_ci_low, rel=5e-3)


@pytest.mark.parametrize(
    ("lo", "hi", "verdict"),
    [
        (1.001, 1.2, V.FASTER),
        (0.8, 0.999, V.SLOWER),
        (0.995, 1.008, V.SAME),
        (0.98, 1.005, V.AMBIGUOUS),
        (0.995, 1.02, V.AMBIGUOUS),
    ],
)
def test_classify(lo, hi, verdict):
    assert classify(lo, hi, 0.01) is verdict


# -- the decision ------------------------------------------------------------------------------
def test_clear_gain_is_accepted_with_numbers_and_cis_in_the_reason():
    d = decide_paired({f"s{i}": spread(1.06, 0.01) for i in range(4)}, "compute_fwd")
    assert d.status is Status.ACCEPTED and d.accepted and d.verdict_aggregate is V.FASTER
    assert not d.trade_off and not d.ambiguous and needs_more(d) == []
    assert d.gain == pytest.approx(0.06, abs=1e-5)
    assert "aggregate speed ratio 1.0600x [" in d.reason and "+6.00%" in d.reason
    assert "per-shape CIs at 98.8%" in d.reason and "no shape regressed ≥ 5%" in d.reason
    # the clause names its subject: it follows the time-weighted effect and any unresolved list
    assert "; the aggregate's CI excludes no gain and no minimum detectable" in d.reason
    json.dumps(d.to_dict())


def test_confirmed_regression_of_5_percent_rolls_back_despite_aggregate_gain():
    shapes = {f"s{i}": spread(1.15, 0.01) for i in range(4)}
    shapes["bad"] = spread(0.94, 0.01)
    d = decide_paired(shapes, "compute_fwd")
    assert d.status is Status.ROLLED_BACK and d.regressions == ("bad",) and not d.ambiguous
    assert d.regressed == ("bad",)  # the shapes of the gate-1 rollback
    assert d.aggregate_ci_low > 1.0  # the aggregate did improve
    assert "1 shape(s) regressed ≥ 5% with CIs excluding no slowdown: bad 0.9400x" in d.reason


def test_confirmed_small_regression_is_an_accepted_trade_off():
    shapes = {f"s{i}": spread(1.10, 0.01) for i in range(4)}
    shapes["meh"] = spread(0.97, 0.01)
    d = decide_paired(shapes, "compute_fwd")
    assert d.accepted and d.trade_off and d.regressions == ("meh",)
    assert d.regressed == ()  # confirmed slower, but by less than the threshold
    assert "trade-off" in d.reason and "meh 0.9700x" in d.reason


def test_unconfirmed_large_slowdown_is_ambiguous_and_named_for_more_rounds():
    shapes = {f"s{i}": spread(1.10, 0.005) for i in range(4)}
    shapes["noisy"] = spread(0.93, 0.3)
    d = decide_paired(shapes, "compute_fwd")
    assert d.status is Status.ROLLED_BACK and d.ambiguous and needs_more(d) == ["noisy"]
    assert "measure more: noisy" in d.reason
    done = decide_paired(shapes, "compute_fwd", exhausted=True)
    assert "too noisy to confirm" in done.reason and done.ambiguous


def test_gain_below_min_detectable_effect_is_not_claimed():
    shapes = {f"s{i}": spread(1.01, 0.002) for i in range(3)}
    plain = decide_paired(shapes, "compute_fwd")
    assert plain.accepted and "no minimum detectable effect is set" in plain.reason
    assert "effect 0.00%" not in plain.reason
    over = decide_paired(shapes, "compute_fwd", min_detectable=0.005)
    assert over.accepted and "≥ the minimum detectable effect 0.50%" in over.reason
    d = decide_paired(shapes, "compute_fwd", min_detectable=0.02)
    assert d.status is Status.ROLLED_BACK and not d.ambiguous and d.verdict_aggregate is V.FASTER
    assert "minimum detectable effect 2.00%" in d.reason and d.min_detectable == 0.02


def test_ambiguous_aggregate_lists_its_ambiguous_shapes():
    shapes = {"wide": spread(1.02, 0.15), "tight": spread(1.0, 0.002)}
    d = decide_paired(shapes, "compute_fwd")
    assert d.verdict_aggregate is V.AMBIGUOUS and d.ambiguous
    assert needs_more(d) == ["wide"] and "AMBIGUOUS" in d.reason
    assert {r.label: r.verdict for r in d.per_shape} == {"wide": V.AMBIGUOUS, "tight": V.SAME}


def test_no_gain_and_slower_are_settled_rollbacks():
    same = decide_paired({"a": spread(1.0, 0.002), "b": spread(1.0, 0.003)}, "compute_fwd")
    assert same.verdict_aggregate is V.SAME and not same.ambiguous and "no gain" in same.reason
    slow = decide_paired({"a": spread(0.97, 0.002)}, "compute_fwd")
    assert slow.verdict_aggregate is V.SLOWER and "slower" in slow.reason
    assert slow.regressions == ("a",) and not slow.trade_off


def test_an_unconfirmed_slowdown_is_rolled_back_and_measured_on_until_the_budget():
    # reads 3% slower, CI holds 1: the rollback is certain, the slowdown is not confirmed
    shapes = {"a": spread(0.97, 0.08), "b": spread(0.97, 0.08)}
    d = decide_paired(shapes, "compute_fwd", looks=3)
    assert d.status is Status.ROLLED_BACK and d.verdict_aggregate is V.AMBIGUOUS
    assert "no gain" in d.reason and "measuring on" in d.reason
    assert needs_more(d) == ["a", "b"] and not d.accepted
    last = decide_paired(shapes, "compute_fwd", looks=3, exhausted=True)
    assert needs_more(last) == [] and "measuring on" not in last.reason
    off = decide_paired(shapes, "compute_fwd", looks=3, confirm_slowdown=False)
    assert needs_more(off) == [] and off.status is Status.ROLLED_BACK
    # a no-gain reading within the equivalence margin is settled at once
    flat = decide_paired({"a": spread(0.995, 0.02), "b": spread(0.995, 0.02)}, "compute_fwd")
    assert needs_more(flat) == [] and "no gain" in flat.reason


def test_too_few_rounds_or_no_shapes_are_errors():
    with pytest.raises(ValueError, match="need ≥ 3"):
        decide_paired({"a": exact([1.0, 1.0])}, "compute_fwd")
    with pytest.raises(ValueError, match="at least one shape"):
        decide_paired({}, "compute_fwd")


def test_aa_false_accept_rate_is_below_the_nominal_level():
    """200 simulated A/A comparisons (5 shapes, 10 rounds, 2% noise per timing)."""
    accepted = slower = 0
    for t in range(200):
        shapes = {f"s{i}": noisy(1.0, seed=1000 * t + i) for i in range(5)}
        d = decide_paired(shapes, "compute_fwd", n_boot=500, rng_seed=t)
        accepted += d.accepted
        slower += d.verdict_aggregate is V.SLOWER
    assert accepted <= 5 and slower <= 5  # one-sided nominal 2.5% each


def test_a_decision_on_few_rounds_says_what_their_range_can_hold():
    """Three rounds, all 1.38-1.44x: the bootstrap interval is their range, which holds the
    true ratio 75% of the time, not the stated level; ten rounds claim nothing extra."""
    few = decide_paired({"a": exact([1.443, 1.3825, 1.3778])}, "compute_fwd")
    assert "3 rounds: the interval lies within their range" in few.reason and "75.0%" in few.reason
    many = decide_paired({"a": spread(1.4, 0.02)}, "compute_fwd")
    assert "rounds: the interval lies within" not in many.reason
