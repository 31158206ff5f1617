"""Red team (CPU): cheats aimed at the decision rather than at one measurement.

* **geomean collapse through one shape**: one small shape made much faster (a shortcut that only
  pays there) while the shapes that hold the time regress by less than the 5% threshold; the
  geometric mean rises, a step of the real workload gets slower (SPEC section 6: a candidate
  whose time-weighted effect is confirmed negative is not accepted);
* **lower precision under a loose gate**: a candidate computing in bf16 where the incumbent is
  fp32-exact, in a campaign whose gate was set at bf16's 40 dB; every check passes, the accuracy
  of the result falls by ~90 dB. A precision change needs the user's consent like a backend
  change; the paired A/B sees both sides' SNR on the same inputs and must say so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.paired_run import PairedRun
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired import PairedSamples, decide_paired
from kernel_ratchet.scoring.paired_looks import PairedLooks
from tests.redteam.expect import SEED, SHAPE, cpu_spec, expect_flagged

ROUNDS = 12


def _samples(inc_ms: float, ratio: float, rng: np.random.Generator) -> PairedSamples:
    """Per-round times of one shape, the candidate ``ratio`` times faster, 0.5% noise."""
    inc = inc_ms * (1 + 0.005 * rng.standard_normal(ROUNDS))
    cand = inc / ratio * (1 + 0.005 * rng.standard_normal(ROUNDS))
    return PairedSamples({"fwd": inc.tolist()}, {"fwd": cand.tolist()})


def test_a_geomean_gain_from_one_small_shape_does_not_hide_a_slower_step() -> None:
    rng = np.random.default_rng(7)
    shapes = {
        "tiny_launch_bound": _samples(0.02, 20.0, rng),  # 20x faster, 0.02 ms
        "large_a": _samples(40.0, 0.96, rng),  # 4% slower, confirmed
        "large_b": _samples(60.0, 0.96, rng),
    }
    d = decide_paired(shapes, "compute_fwd", regression_threshold=0.05)
    step_before = 0.02 + 40.0 + 60.0
    step_after = 0.02 / 20 + (40.0 + 60.0) / 0.96
    assert step_after > step_before * 1.03  # the step really is ~4% slower
    expect_flagged(d.status is Status.ROLLED_BACK, d.reason, "time-weighted", d.reason)


def _loose_gate_run(tmp_path: Path, rule: PairedLooks) -> PairedRun:
    """The fp32-exact incumbent against the candidate computing in bf16, under ``rule``."""
    return run_paired(
        cpu_spec("LooseGate"),
        cpu_spec("LooseGateBf16"),
        [SHAPE],
        phases=["fwd"],
        seed=SEED,
        rule=rule,
        k_start=3,
        k_max=3,
        log_dir=tmp_path,
        rng_seed=1,
    )


def test_a_precision_drop_under_a_loose_gate_is_not_a_speed_gain(tmp_path: Path) -> None:
    run = _loose_gate_run(tmp_path, PairedLooks())
    if run.failure is not None:
        flagged, why = True, f"{run.failure.category}: {run.failure.detail}"
    else:
        assert run.decision is not None
        flagged, why = run.decision.status is Status.ROLLED_BACK, run.decision.reason
    expect_flagged(flagged, why, "precision", why)


def test_with_the_users_consent_the_less_precise_candidate_is_measured_and_named(
    tmp_path: Path,
) -> None:
    """``allow_precision_drop: true`` on the op (an FP8 op whose dispatch may leave its 16-bit
    fallback) lets the same candidate be timed and decided; the decision's sentence still names
    the outputs whose precision fell, with both SNRs."""
    import math

    from kernel_ratchet.campaign.rounds.paired import allowed_precision_drop

    run = _loose_gate_run(tmp_path, PairedLooks(precision_margin_db=math.inf))
    assert run.failure is None and run.decision is not None
    note = allowed_precision_drop(run)
    assert "allowed by allow_precision_drop" in note and f"{SHAPE.label}/" in note
    inc, cand = (run.snr[side][SHAPE.label] for side in ("incumbent", "candidate"))
    assert any(inc[k] - cand[k] > 20 for k in cand)
    assert allowed_precision_drop(replace(run, snr={"incumbent": {}, "candidate": {}})) == ""
