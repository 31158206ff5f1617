"""The time-weighted effect of the paired decision, the unresolved shapes, and the planted
scenario where noisy small shapes read faster while the shapes that hold the time are slower."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.method.rule_sim import NoiseModel, trial
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired import decide_paired
from kernel_ratchet.scoring.paired_weighted import shape_weights, time_weighted


def exact(ms: float, ratio: float, n: int = 8) -> PairedSamples:
    """Noise-free rounds: incumbent ``ms``, candidate ``ratio`` times faster."""
    return PairedSamples({"fwd": [ms] * n}, {"fwd": [ms / ratio] * n})


def test_the_step_ratio_weighs_shapes_by_their_time_and_weight():
    shapes = {"small": exact(0.1, 2.0), "large": exact(10.0, 0.9)}
    rng = np.random.default_rng(0)
    tw = time_weighted(shapes, "compute_fwd", None, level=0.95, n_boot=200, rng=rng)
    assert tw.ratio == pytest.approx(10.1 / (0.05 + 10 / 0.9))
    assert tw.ci_low == pytest.approx(tw.ratio) and tw.ci_high == pytest.approx(tw.ratio)
    assert tw.confirmed_slower
    heavy = time_weighted(shapes, "compute_fwd", {"small": 1000.0}, level=0.95, n_boot=200, rng=rng)
    assert heavy.ratio == pytest.approx(110.0 / (50.0 + 10 / 0.9))  # now the small shape rules
    assert heavy.ratio > 1 and heavy.weights == {"small": 1000.0, "large": 1.0}


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_weight_must_be_a_positive_finite_number(bad):
    with pytest.raises(ValueError, match="positive"):
        shape_weights(["a"], {"a": bad})


def test_fwd_bwd_steps_sum_both_phases():
    s = PairedSamples({"fwd": [1.0] * 4, "bwd": [3.0] * 4}, {"fwd": [0.5] * 4, "bwd": [3.0] * 4})
    tw = time_weighted(
        {"x": s}, "compute_fwd_bwd", None, level=0.9, n_boot=50, rng=np.random.default_rng(1)
    )
    assert tw.ratio == pytest.approx(4.0 / 3.5) and tw.incumbent_ms == pytest.approx(4.0)


def _planted(seed: int = 3):
    """Issue scenario: three small shapes, 20-30% noise per value, read 10% faster; the two
    shapes that hold the time are resolved to ±0.1% and 1.7% and 0.9% slower."""
    model = NoiseModel((0.03, 0.06, 0.12, 2.0, 4.0), (0.25, 0.2, 0.1, 0.001, 0.001), 0.01)
    labels = [s.label for s in model.shapes]
    speeds = dict(zip(labels, (1.10, 1.10, 1.10, 1 / 1.017, 1 / 1.009), strict=True))
    return labels, trial(model, speeds, seed)


def test_planted_noisy_small_gains_do_not_outvote_confirmed_large_slowdowns():
    labels, d = _planted()
    assert d.status is not Status.ACCEPTED
    assert d.aggregate_ratio > 1.0  # the geomean alone reads a gain
    assert d.time_weighted.confirmed_slower and "time-weighted" in d.reason
    assert set(d.unresolved) <= set(labels[:3]) and d.unresolved  # the noisy ones, named
    assert "unresolved" in d.reason
    assert d.to_dict()["time_weighted"]["ratio"] == d.time_weighted.ratio


def test_the_time_weighted_gate_is_what_stops_the_planted_candidate():
    """Clean rounds of the planted speeds: with weight 1 the step is confirmed slower and the
    candidate rolled back; weighting the small shapes 1000x (a step that runs them 1000 times)
    makes the same rounds a faster step, so the rollback comes from the time weighting."""
    model = NoiseModel((0.03, 0.06, 0.12, 2.0, 4.0), (0.25, 0.2, 0.1, 0.001, 0.001), 0.01)
    labels = [s.label for s in model.shapes]
    rng = np.random.default_rng(5)
    per = {}
    for k, ms, sp in zip(
        labels, model.shape_ms, (1.1, 1.1, 1.1, 1 / 1.017, 1 / 1.009), strict=True
    ):
        inc = ms * np.exp(rng.normal(0, 0.001, 20))
        per[k] = PairedSamples({"fwd": inc}, {"fwd": inc / sp})
    plain = decide_paired(per, "compute_fwd")
    heavy = decide_paired(per, "compute_fwd", weights=dict.fromkeys(labels[:3], 1000.0))
    assert plain.status is Status.ROLLED_BACK and plain.time_weighted.confirmed_slower
    assert heavy.time_weighted.ratio > 1.0 and not heavy.time_weighted.confirmed_slower
    assert "confirmed negative" not in heavy.reason


def test_a_uniform_gain_is_resolved_everywhere_and_accepted():
    per = {k: exact(ms, 1.05) for k, ms in (("a", 0.1), ("b", 1.0), ("c", 5.0))}
    d = decide_paired(per, "compute_fwd")
    assert d.accepted and d.unresolved == ()
    assert d.time_weighted.ratio == pytest.approx(1.05)
