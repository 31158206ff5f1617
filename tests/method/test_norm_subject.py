"""The norm subject of the method checks: right against its reference, and its planted
variants doing more work for the same bytes."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.method import ab_trials, norm_subject
from kernel_ratchet.method.norm_subject import (
    FasterBaselineRmsNormBf16,
    RmsNormBf16,
    SlowerRmsNormBf16,
)


@pytest.mark.parametrize("cls", [RmsNormBf16, SlowerRmsNormBf16, FasterBaselineRmsNormBf16])
def test_every_variant_matches_the_reference(cls):
    ad = cls()
    (shape,) = norm_subject.shapes([(64, 256)])
    case = ad.make_case(shape, 3, "cpu")
    got = ad.outputs(case)
    ref = ad.reference(case)
    res = check_outputs(got, ref, {n: ad.threshold(n) for n in ref})
    assert res.passed, res.reason
    assert case.x.shape[0] == round(64 * cls.PAD)
    dx, dw = ad.backward(case)  # the timed backward gives what outputs() checks
    assert torch.allclose(dx, got["dx"]) and torch.allclose(dw, got["dw"])


def test_a_wrong_norm_fails_the_check():
    ad = RmsNormBf16()
    (shape,) = norm_subject.shapes([(64, 256)])
    case = ad.make_case(shape, 3, "cpu")
    got = ad.outputs(case)
    got["dx"] = got["dx"] * 1.01
    res = check_outputs(got, ad.reference(case), {n: 60.0 for n in got})
    assert not res.passed


def test_planted_variants_keep_the_plain_ops_bytes_and_seeded_inputs():
    (shape,) = norm_subject.shapes([(4096, 2048)])
    assert SlowerRmsNormBf16().bytes_moved(shape) == RmsNormBf16().bytes_moved(shape)
    a = RmsNormBf16().make_case(shape, 5, "cpu")
    b = RmsNormBf16().make_case(shape, 5, "cpu")
    assert torch.equal(a.x, b.x) and not torch.equal(
        a.x, RmsNormBf16().make_case(shape, 6, "cpu").x
    )


def test_the_trials_time_the_norm_forward_and_backward_by_cold_graph_replay():
    ctype, phases, measure = ab_trials.SUBJECTS["norm"]
    assert (ctype, phases) == ("memory", ("fwd", "bwd"))
    assert (measure.quantity, measure.l2) == ("kernel_time", "cold")
    sides = ab_trials.scenario_sides(cuda=True, shape_set="norm")
    assert sides["slower 3%"][1].endswith(":SlowerRmsNormBf16")
    assert sides["faster 5%"][0].endswith(":FasterBaselineRmsNormBf16")
    plan = ab_trials.plan_of(ab_trials.parse_args(["--shapes", "norm"]), cuda=True)
    assert [s.label for s in ab_trials._shapes(plan)][0] == "tok4096_d2048"


@pytest.mark.soak
def test_one_cpu_a_a_trial_of_the_norm_in_real_workers(tmp_path):
    plan = ab_trials.TrialPlan(trials=1, cuda=False, scenarios=("A/A",), shape_set="norm")
    results = ab_trials.run_trials(plan, tmp_path / "trials.json", tmp_path / "logs")
    (row,) = results["A/A"]
    assert row["failure"] is None, row["failure"]
    assert set(row["shape_ratios"]) == {"tok64_d256", "tok96_d128"}
    assert set(row["times"]["candidate"]["tok64_d256"]) == {"fwd", "bwd"}
