"""Calibration from A/A runs, and the statistical power check of the paired decision in simulation.

The runs use the fake worker of tests/harness/fake_ab.py: 5 shapes, 2% lognormal noise per
timing call plus a 5% clock wander common to both sides. The lead repeats the same check on
the H200 with the real worker.
"""

from __future__ import annotations

import json
import math

import pytest

from kernel_ratchet.errors import CampaignError
from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.scoring.calibration import Calibration, calibrate, min_detectable_effect
from kernel_ratchet.scoring.paired import PairedVerdict
from kernel_ratchet.scoring.paired_looks import PairedLooks
from tests.harness.fake_ab import SHAPES, FakeMachine, FakeSpec

TRIALS = 20


def runner(tmp_path, speed: float, *, noise: float = 0.02, min_detectable: float = 0.0, **spec):
    def run(t: int):
        machine = FakeMachine(seed=10_000 + t, noise=noise)
        return run_paired(
            FakeSpec("inc"),
            FakeSpec("cand", speed=speed, **spec),
            SHAPES,
            phases=("fwd",),
            seed=t,
            log_dir=tmp_path / str(t),
            worker_factory=machine.factory,
            rng_seed=t,
            rule=PairedLooks(min_detectable=min_detectable),
        )

    return run


@pytest.fixture(scope="module")
def aa(tmp_path_factory) -> Calibration:
    return calibrate(runner(tmp_path_factory.mktemp("aa"), 1.0), TRIALS)


def test_aa_with_2_percent_noise_rarely_accepts_and_never_rolls_back(aa):
    assert aa.trials == TRIALS
    assert aa.false_accept_rate <= 1 / 20
    assert aa.false_regression_rate == 0.0
    assert aa.details["false_accept_rate_at_mde"] <= aa.false_accept_rate
    assert 0.003 < aa.min_detectable_effect < 0.04  # "a few percent" at most
    # one paired round: two independent 2% lognormal draws -> ~2.8% spread of the log ratio
    assert set(aa.per_shape_spread) == {s.label for s in SHAPES}
    assert all(0.015 < v < 0.045 for v in aa.per_shape_spread.values()), aa.per_shape_spread


def test_planted_5_percent_gain_is_accepted_at_the_calibrated_mde(aa, tmp_path):
    run = runner(tmp_path, 1.05, min_detectable=aa.min_detectable_effect)
    accepted = sum(run(t).decision.accepted for t in range(TRIALS))
    assert accepted >= 19


def test_planted_3_percent_slowdown_is_never_accepted_and_flagged_slower(aa, tmp_path):
    run = runner(tmp_path, 0.97, min_detectable=aa.min_detectable_effect)
    decisions = [run(t).decision for t in range(TRIALS)]
    assert not any(d.accepted for d in decisions)
    assert sum(d.verdict_aggregate is PairedVerdict.SLOWER for d in decisions) >= 19


def test_calibration_round_trips_through_json(aa):
    back = Calibration.from_dict(json.loads(json.dumps(aa.to_dict())))
    assert back == aa
    with pytest.raises(ValueError, match="missing"):
        Calibration.from_dict({"trials": 3})


def test_mde_formula():
    # q90 of half-widths 0.01 -> SE = 0.01/1.96; MDE = exp(SE·(1.96 + 0.8416)) - 1
    mde = min_detectable_effect([0.01] * 10, [0.0, 0.001])
    assert mde == pytest.approx(math.expm1(0.01 * (1 + 0.8416 / 1.95996)), rel=1e-4)
    # an A/A bias larger than the CI term wins
    assert min_detectable_effect([0.001] * 10, [0.03]) == pytest.approx(math.expm1(0.03))


def test_failing_aa_trial_is_a_campaign_error(tmp_path):
    with pytest.raises(CampaignError, match="A/A trial 0 failed"):
        calibrate(runner(tmp_path, 1.0, crash_at_call=3), 2)
    with pytest.raises(ValueError, match="at least 2"):
        calibrate(runner(tmp_path, 1.0), 1)
