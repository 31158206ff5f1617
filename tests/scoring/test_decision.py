"""The accept / roll-back decision of SPEC section 6."""

from __future__ import annotations

import math
import re

import pytest

from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.scoring.decision import Status, Verdict, decide
from kernel_ratchet.scoring.metrics import combined_step_tflops

from .conftest import fwd_table, gemm_row, gemm_table, memory_table

BASE = {"s256": 100.0, "s512": 200.0, "s1024": 400.0, "s2048": 500.0}


def scaled(factors: dict[str, float], default: float = 1.0) -> dict[str, float]:
    return {k: v * factors.get(k, default) for k, v in BASE.items()}


def test_clear_gain_is_accepted_with_numbers_in_the_reason():
    d = decide(fwd_table(BASE), fwd_table(scaled({}, 1.10)), "compute_fwd")
    assert d.status is Status.ACCEPTED and d.accepted
    assert not d.trade_off and d.regressions == ()
    assert d.gain == pytest.approx(0.10)
    assert d.aggregate_after / d.aggregate_before == pytest.approx(1.10)
    # per-shape relative std 0.5% on both sides -> aggregate band 2·sqrt(4·2·0.005²)/4
    assert d.gain_noise == pytest.approx(2 * math.sqrt(8 * 0.005**2) / 4)
    assert all(s.verdict is Verdict.FASTER for s in d.per_shape)
    before = f"{d.aggregate_before:.1f}"
    pattern = rf"aggregate {re.escape(before)} -> \d+\.\d TFLOPS \(\+10\.00%, noise ±0\.7%\)"
    assert re.search(pattern, d.reason), d.reason
    assert "no shape regressed ≥ 5%" in d.reason


def test_gain_inside_the_noise_band_is_rolled_back():
    d = decide(fwd_table(BASE), fwd_table(scaled({}, 1.003)), "compute_fwd")
    assert d.status is Status.ROLLED_BACK
    assert "within noise" in d.reason and d.ambiguous
    assert all(s.verdict is Verdict.SAME for s in d.per_shape)
    # the same +0.3% with no recorded spread is a real gain: the band comes from the stddevs
    quiet = decide(fwd_table(BASE, 0.0), fwd_table(scaled({}, 1.003), 0.0), "compute_fwd")
    assert quiet.status is Status.ACCEPTED


def test_noise_floor_widens_the_band():
    d = decide(fwd_table(BASE), fwd_table(scaled({}, 1.10)), "compute_fwd", noise_floor=0.2)
    assert d.status is Status.ROLLED_BACK and d.gain_noise == 0.2


def test_aggregate_drop_is_rolled_back():
    d = decide(fwd_table(BASE), fwd_table(scaled({}, 0.97)), "compute_fwd")
    assert d.status is Status.ROLLED_BACK and "dropped" in d.reason and not d.ambiguous


def test_one_shape_down_6_percent_rolls_back_even_with_aggregate_up():
    d = decide(fwd_table(BASE), fwd_table(scaled({"s512": 0.94}, 1.20)), "compute_fwd")
    assert d.gain > d.gain_noise  # the aggregate did improve
    assert d.status is Status.ROLLED_BACK
    assert d.regressions == ("s512",)
    assert "s512 (-6.00%" in d.reason and "≥ 5%" in d.reason


def test_one_shape_down_3_percent_beyond_noise_is_an_accepted_trade_off():
    d = decide(fwd_table(BASE), fwd_table(scaled({"s1024": 0.97}, 1.10)), "compute_fwd")
    assert d.status is Status.ACCEPTED
    assert d.trade_off and d.regressions == ("s1024",)
    assert "trade-off" in d.reason and "s1024 (-3.00%" in d.reason
    by = {s.label: s for s in d.per_shape}
    assert by["s1024"].verdict is Verdict.SLOWER
    assert by["s1024"].delta == pytest.approx(-0.03)


def test_small_drop_inside_noise_is_not_a_trade_off():
    d = decide(fwd_table(BASE), fwd_table(scaled({"s1024": 0.99}, 1.10)), "compute_fwd")
    assert d.status is Status.ACCEPTED and not d.trade_off and d.regressions == ()


def test_large_drop_inside_a_wide_noise_band_is_not_a_regression():
    d = decide(fwd_table(BASE, 0.05), fwd_table(scaled({"s512": 0.94}, 1.30), 0.05), "compute_fwd")
    assert d.status is Status.ACCEPTED and "s512" not in d.regressions


def test_fail_row_rolls_back():
    cand = fwd_table(scaled({}, 1.5), check={"s2048": "FAIL"})
    d = decide(fwd_table(BASE), cand, "compute_fwd")
    assert d.status is Status.ROLLED_BACK
    assert "Check=FAIL" in d.reason and "s2048" in d.reason
    assert math.isnan(d.gain)


@pytest.mark.parametrize(
    ("kw", "word"), [({"test_ok": False}, "test"), ({"build_ok": False}, "build")]
)
def test_build_or_test_failure_rolls_back(kw, word):
    d = decide(fwd_table(BASE), fwd_table(scaled({}, 1.5)), "compute_fwd", **kw)
    assert d.status is Status.ROLLED_BACK and word in d.reason
    assert math.isfinite(d.aggregate_before) and math.isnan(d.aggregate_after)


def test_missing_or_extra_shape_rolls_back():
    cand = scaled({}, 1.5)
    del cand["s512"]
    d = decide(fwd_table(BASE), fwd_table(cand), "compute_fwd")
    assert d.status is Status.ROLLED_BACK and "missing shape(s) s512" in d.reason
    d2 = decide(fwd_table(BASE), fwd_table({**scaled({}, 1.5), "new": 1.0}), "compute_fwd")
    assert d2.status is Status.ROLLED_BACK and "extra shape(s) new" in d2.reason


def test_compares_against_the_incumbent_not_the_baseline():
    baseline = fwd_table(BASE)
    incumbent = fwd_table(scaled({}, 1.20))
    candidate = fwd_table(scaled({}, 1.10))  # better than baseline, worse than incumbent
    assert decide(baseline, candidate, "compute_fwd").accepted
    assert not decide(incumbent, candidate, "compute_fwd").accepted


def test_fwd_bwd_decides_on_combined_step():
    inc = gemm_table(
        gemm_row("a", 1024, 1024, 1024, 400.0, 1.0, 300.0, 1.0),
        gemm_row("b", 4096, 4096, 4096, 600.0, 1.0, 500.0, 1.0),
    )
    # forward 10% slower, backward 20% faster: the step gets faster
    cand = gemm_table(
        gemm_row("a", 1024, 1024, 1024, 360.0, 1.0, 360.0, 1.0),
        gemm_row("b", 4096, 4096, 4096, 540.0, 1.0, 600.0, 1.0),
    )
    d = decide(inc, cand, "compute_fwd_bwd")
    step_a = combined_step_tflops(360, 360) / combined_step_tflops(400, 300) - 1
    assert {s.label: s.delta for s in d.per_shape}["a"] == pytest.approx(step_a)
    assert d.status is Status.ACCEPTED
    # the same tables judged on forward alone: every shape regressed 10%
    assert decide(inc, cand, "compute_fwd").status is Status.ROLLED_BACK


def test_memory_reason_uses_gb_per_s():
    inc = memory_table("a,1,1024,1024,PASS,1000,1,,,0.5,,40")
    cand = memory_table("a,1,1024,1024,PASS,1200,1,,,0.4,,40")
    d = decide(inc, cand, "memory")
    assert d.accepted and "GB/s" in d.reason


def test_schema_mismatch_and_empty_incumbent_raise():
    with pytest.raises(SchemaError):
        decide(fwd_table(BASE), memory_table("a,1,1,1,PASS,1,0,,,1,,40"), "compute_fwd")
    with pytest.raises(CampaignError, match="no passing shape"):
        decide(fwd_table({"a": 1.0}, check={"a": "FAIL"}), fwd_table({"a": 1.0}), "compute_fwd")


def test_zero_work_shape_gates_correctness_but_is_not_scored():
    empty = gemm_row("all_empty", 0, 64, 128, 0.0, 0.0, fwd_ms=0.01)
    inc = gemm_table(empty, gemm_row("a", 64, 64, 64, 10.0, 0.01))
    cand = gemm_table(empty, gemm_row("a", 64, 64, 64, 12.0, 0.01))
    d = decide(inc, cand, "compute_fwd")
    assert d.accepted and [s.label for s in d.per_shape] == ["a"]
    failed = gemm_table(empty.replace("PASS", "FAIL"), gemm_row("a", 64, 64, 64, 12.0, 0.01))
    assert not decide(inc, failed, "compute_fwd").accepted


def test_status_formats_as_record_text():
    assert f"{Status.ROLLED_BACK}" == "ROLLED BACK" and str(Verdict.SAME) == "SAME"
    assert Status("ROLLED BACK") is Status.ROLLED_BACK
