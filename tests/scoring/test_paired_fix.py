"""A correctness fix is judged for non-inferiority (kernel_ratchet.scoring.paired_fix)."""

from __future__ import annotations

import pytest

from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired import decide_paired, needs_more
from kernel_ratchet.scoring.paired_fix import FIX

from .test_paired import spread


def test_a_fix_that_costs_nothing_is_accepted_without_claiming_a_gain():
    shapes = {f"s{i}": spread(1.0, 0.004) for i in range(4)}
    plain = decide_paired(shapes, "compute_fwd")
    assert plain.status is Status.ROLLED_BACK and "no gain" in plain.reason  # a change: no
    d = decide_paired(shapes, "compute_fwd", fix=True)
    assert d.accepted and d.reason.startswith(FIX) and "no gain is claimed" in d.reason
    assert "above the -1.00% no-gain margin" in d.reason and needs_more(d) == []


def test_a_fix_slower_by_less_than_the_margin_is_accepted_and_one_beyond_it_rolled_back():
    inside = decide_paired(
        {f"s{i}": spread(0.996, 0.002) for i in range(4)}, "compute_fwd", fix=True
    )
    assert inside.accepted and inside.aggregate_ci_high < 1.0
    beyond = decide_paired(
        {f"s{i}": spread(0.97, 0.002) for i in range(4)}, "compute_fwd", fix=True
    )
    assert beyond.status is Status.ROLLED_BACK and not beyond.ambiguous
    assert "slower than the -1.00% margin allows" in beyond.reason


def test_a_fix_keeps_the_regression_gates():
    shapes = {f"s{i}": spread(1.0, 0.004) for i in range(4)}
    shapes["bad"] = spread(0.93, 0.005)
    d = decide_paired(shapes, "compute_fwd", fix=True)
    assert d.status is Status.ROLLED_BACK and d.regressed == ("bad",)


@pytest.mark.parametrize("exhausted", [False, True])
def test_an_unsettled_fix_measures_on_then_rolls_back(exhausted):
    shapes = {f"s{i}": spread(1.0, 0.08) for i in range(4)}  # CI wider than the margin
    d = decide_paired(shapes, "compute_fwd", fix=True, exhausted=exhausted)
    assert d.status is Status.ROLLED_BACK and d.ambiguous
    assert "a fix is accepted once the aggregate's CI lies above -1.00%" in d.reason
    assert needs_more(d) and ("too noisy to confirm" in d.reason) is exhausted
