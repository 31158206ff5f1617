"""Round noise of A/A runs and the choice of a timing variant (scoring.noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernel_ratchet.harness.paired_run import Failure, PairedRun
from kernel_ratchet.scoring.noise import choose, cost_ratio_ci, round_noise


def aa_run(
    sd: float,
    *,
    first_bonus: float = 0.0,
    rounds: int = 400,
    seed: int = 0,
    wall_s: float = 50.0,
    check_s: float = 10.0,
) -> PairedRun:
    """A synthetic A/A run on two shapes: log-normal round noise ``sd`` per side's time, and
    the side timed first faster by ``first_bonus`` (relative)."""
    rng = np.random.default_rng(seed)
    labels = ("s1", "s2")
    times = {side: {k: {"fwd": []} for k in labels} for side in ("incumbent", "candidate")}
    order = []
    for r in range(rounds):
        for k in labels:
            first = "incumbent" if rng.random() < 0.5 else "candidate"
            order.append((r, k, first))
            for side in ("incumbent", "candidate"):
                t = 2.0 * math.exp(rng.normal(0.0, sd / math.sqrt(2)))
                times[side][k]["fwd"].append(t * (1 - first_bonus if side == first else 1.0))
    frozen = {
        s: {k: {p: tuple(v) for p, v in d.items()} for k, d in per.items()}
        for s, per in times.items()
    }
    return PairedRun(
        labels,
        ("fwd",),
        "compute_fwd",
        frozen,
        tuple(order),
        rounds,
        None,
        None,
        wall_s,
        check_s,
        0,
        {},
    )


def test_spread_is_the_sd_of_one_round_log_ratio():
    n = round_noise("base", {}, aa_run(0.04))
    assert n.spread == pytest.approx(0.04, rel=0.1)
    assert all(v == pytest.approx(0.04, rel=0.15) for v in n.per_shape.values())
    assert abs(n.order_effect) < 0.006
    assert n.s_per_round == pytest.approx((50.0 - 10.0) / 400)


def test_an_advantage_of_the_side_timed_first_is_measured():
    n = round_noise("base", {}, aa_run(0.01, first_bonus=0.03))
    assert n.order_effect == pytest.approx(0.03, abs=0.004)
    # the shuffled order turns it into spread, not bias
    assert n.spread > 0.02


def test_a_cheaper_variant_is_chosen_only_when_its_ci_says_so():
    base = round_noise("base", {}, aa_run(0.04, wall_s=50.0))
    quieter_same_cost = round_noise("quiet", {"samples": 4}, aa_run(0.02, seed=1, wall_s=50.0))
    chosen, why = choose([base, quieter_same_cost])
    assert chosen is quieter_same_cost and "'quiet' costs 0.2" in why and "CI" in why
    pt, lo, hi = cost_ratio_ci(quieter_same_cost, base)
    assert lo < pt < hi < 1.0 and pt == pytest.approx(0.25, rel=0.25)
    # half the noise at four times the time per round is no better: keep the current one
    slow = round_noise("slow", {"sample_ms": 200}, aa_run(0.02, seed=2, wall_s=170.0))
    chosen, why = choose([base, slow])
    assert chosen is base and why.startswith("kept 'base'") and "cost ratios: slow 1." in why


def test_equal_noise_in_a_short_probe_rarely_switches():
    """16 rounds of 2 shapes: a point estimate alone often reads a same-noise variant as much
    cheaper; the CI rule switches in at most 1 of 20 such probes."""
    switched = lucky = 0
    for t in range(20):
        base = round_noise("base", {}, aa_run(0.04, rounds=16, seed=t))
        same = round_noise("same", {}, aa_run(0.04, rounds=16, seed=500 + t))
        switched += choose([base, same])[0] is same
        lucky += same.cost < 0.7 * base.cost
    assert switched <= 1 and lucky > switched


def test_a_failed_run_gives_no_estimate():
    run = aa_run(0.04)
    bad = PairedRun(
        run.labels,
        run.phases,
        run.campaign_type,
        run.times,
        run.order,
        3,
        Failure("candidate", "time", "s1", "hang", "no answer", "log"),
        None,
        1.0,
        0.5,
        0,
        {},
    )
    with pytest.raises(ValueError, match="no noise estimate"):
        round_noise("x", {}, bad)
    with pytest.raises(ValueError):
        choose([])
