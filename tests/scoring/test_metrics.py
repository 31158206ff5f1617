"""Primary metric, combined step, geomean, aggregates and the score vector."""

from __future__ import annotations

import math

import pytest

from kernel_ratchet.errors import SchemaError
from kernel_ratchet.scoring.metrics import (
    aggregates,
    combined_step_tflops,
    combined_step_tflops_from_times,
    geomean,
    measured_metric_name,
    primary_at_times,
    primary_value,
    score_vector,
)

from .conftest import gemm_row, gemm_table, memory_table


def test_combined_step_against_hand_computation():
    # fwd 400, bwd 300 TFLOPS: 6 / (2/400 + 4/300) = 6 / (0.005 + 0.013333...) = 327.2727...
    assert combined_step_tflops(400.0, 300.0) == pytest.approx(6 / (0.005 + 4 / 300), rel=1e-12)
    assert combined_step_tflops(400.0, 300.0) == pytest.approx(327.272727, rel=1e-6)
    # M=N=K=4096, fwd 0.5 ms, bwd 1.2 ms: 6·4096³ / 1.7e-3 / 1e12 = 242.5714... TFLOPS
    by_time = combined_step_tflops_from_times(4096, 4096, 4096, 0.5, 1.2)
    assert by_time == pytest.approx(6 * 4096**3 / 1.7e-3 / 1e12, rel=1e-12)
    fwd = 2 * 4096**3 / 0.5e-3 / 1e12
    bwd = 4 * 4096**3 / 1.2e-3 / 1e12
    assert combined_step_tflops(fwd, bwd) == pytest.approx(by_time, rel=1e-12)


def test_combined_step_nan_without_both():
    assert math.isnan(combined_step_tflops(400.0, math.nan))
    assert math.isnan(combined_step_tflops(0.0, 100.0))


def test_primary_value_per_campaign_type():
    t = gemm_table(gemm_row("a", 1024, 1024, 1024, 400.0, 8.0, 300.0, 3.0))
    row = t.rows[0]
    assert primary_value(row, "compute_fwd") == (400.0, 8.0)
    value, std = primary_value(row, "compute_fwd_bwd")
    assert value == pytest.approx(combined_step_tflops(400.0, 300.0))
    # first order: dS/df = S²/(3 f²), dS/db = 2 S²/(3 b²)
    s = value
    expect = math.hypot(s * s / (3 * 400.0**2) * 8.0, 2 * s * s / (3 * 300.0**2) * 3.0)
    assert std == pytest.approx(expect, rel=1e-9)
    # numeric check of the derivative
    eps = 1e-4
    d_f = (combined_step_tflops(400.0 + eps, 300.0) - s) / eps
    assert d_f == pytest.approx(s * s / (3 * 400.0**2), rel=1e-4)


def test_a_memory_op_with_a_backward_is_named_for_its_step_bandwidth():
    fwd_only = memory_table("a,1,1024,1024,PASS,2000,20,,,0.5,,40")
    step = memory_table(
        "a,1,1024,1024,PASS,2000,20,,,0.5,,40", "b,1,1024,1024,PASS,2000,20,1000,10,1.0,3.0,40"
    )
    failed_bwd = memory_table(
        "b,1,1024,1024,FAIL,2000,20,1000,10,1.0,3.0,40", "a,1,8,8,PASS,2,1,,,1,,40"
    )
    assert measured_metric_name(fwd_only, "memory") == "Forward GB/s"
    assert measured_metric_name(step, "memory") == "Step GB/s"
    assert measured_metric_name(failed_bwd, "memory") == "Forward GB/s"


def test_primary_value_memory_forward_only_and_with_backward():
    t = memory_table(
        "a,1,1024,1024,PASS,2000,20,,,0.5,,40",
        "b,1,1024,1024,PASS,2000,20,1000,10,1.0,3.0,40",
    )
    assert primary_value(t.rows[0], "memory") == (2000.0, 20.0)
    value, std = primary_value(t.rows[1], "memory")
    # bytes: 2000·1 + 1000·3 = 5000 over 4 ms -> 1250 GB/s
    assert value == pytest.approx(1250.0)
    assert 0 < std < 20


def test_pass_row_without_backward_is_loud_for_fwd_bwd():
    t = gemm_table(gemm_row("a", 64, 64, 64, 10.0, 0.1))
    with pytest.raises(SchemaError, match="backward"):
        primary_value(t.rows[0], "compute_fwd_bwd")
    with pytest.raises(ValueError, match="campaign_type"):
        primary_value(t.rows[0], "compute")


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([1.0, 10.0, 100.0]) == pytest.approx(10.0)
    assert math.isnan(geomean([]))
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_aggregates_and_score_vector_use_pass_rows_only():
    t = gemm_table(
        gemm_row("s", 256, 256, 256, 100.0, 1.0, 50.0, 1.0),
        gemm_row("l", 4096, 4096, 4096, 400.0, 1.0, 800.0, 1.0),
        gemm_row("bad", 1024, 1024, 1024, "", "", "", "", check="FAIL"),
    )
    agg = aggregates(t, "compute_fwd_bwd")
    assert (agg.n_pass, agg.n_total) == (2, 3)
    assert agg.fwd_avg == pytest.approx(200.0)
    assert agg.fwd_peak == 400.0
    assert agg.bwd_avg == pytest.approx(200.0)
    assert agg.bwd_peak == 800.0
    steps = [combined_step_tflops(100, 50), combined_step_tflops(400, 800)]
    assert agg.primary_avg == pytest.approx(math.sqrt(steps[0] * steps[1]))
    assert agg.primary_peak == pytest.approx(max(steps))
    vec = score_vector(t, "compute_fwd_bwd")
    assert list(vec) == ["s", "l"]
    assert vec["l"] == pytest.approx(steps[1])


def test_aggregates_forward_only_has_nan_backward():
    t = gemm_table(gemm_row("s", 256, 256, 256, 100.0, 1.0))
    agg = aggregates(t, "compute_fwd")
    assert math.isnan(agg.bwd_avg) and math.isnan(agg.bwd_peak)
    assert agg.primary_avg == agg.fwd_avg == pytest.approx(100.0)


def test_zero_work_pass_row_is_not_scored_but_a_broken_pass_row_is_loud():
    empty = gemm_row("all_empty", 0, 64, 128, 0.0, 0.0, fwd_ms=0.01, b=3)
    t = gemm_table(empty, gemm_row("a", 64, 64, 64, 10.0, 0.1))
    assert score_vector(t, "compute_fwd") == {"a": 10.0}
    assert aggregates(t, "compute_fwd").n_pass == 2
    broken = gemm_table(gemm_row("b", 64, 64, 64, 0.0, 0.0, fwd_ms=0.01))
    with pytest.raises(SchemaError, match="'b' is PASS"):
        aggregates(broken, "compute_fwd")


def test_the_primary_metric_at_other_times_keeps_each_phases_work():
    (gemm,) = gemm_table(gemm_row("g", 4096, 4096, 4096, 500.0, 5.0, 400.0, 4.0)).rows
    # twice as fast in both phases: twice the combined step TFLOPS
    step = primary_value(gemm, "compute_fwd_bwd")[0]
    at = primary_at_times(gemm, "compute_fwd_bwd", gemm.fwd_ms / 2, gemm.bwd_ms / 2)
    assert at == pytest.approx(2 * step)
    assert primary_at_times(gemm, "compute_fwd", gemm.fwd_ms / 4) == pytest.approx(2000.0)
    assert primary_at_times(gemm, "compute_fwd_bwd", gemm.fwd_ms, None) is None
    (mem,) = memory_table("b,1,1024,1024,PASS,2000,20,1000,10,1.0,3.0,40").rows
    # 2000·1 + 1000·3 = 5000 MB over 1 + 1.5 ms
    assert primary_at_times(mem, "memory", 1.0, 1.5) == pytest.approx(2000.0)
    (fwd_only,) = memory_table("a,1,1024,1024,PASS,2000,20,,,0.5,,40").rows
    assert primary_at_times(fwd_only, "memory", 0.25) == pytest.approx(4000.0)
    assert primary_at_times(fwd_only, "memory", 0.0) is None
