"""Per-shape primary metric, combined step, aggregates and the score vector (SPEC section 6).

Inputs are rows of :class:`~kernel_ratchet.harness.csv_schema.BenchTable`; ``*_std`` columns are
absolute standard deviations in the metric's unit. Uncertainties are propagated to first order
assuming forward and backward timings are independent.

Primary metric per campaign type:

* ``compute_fwd``: Forward TFLOPS.
* ``compute_fwd_bwd``: Combined Step TFLOPS ``6 / (2/fwd + 4/bwd)`` (= 6·M·N·K over the summed
  forward + backward time). Forward and backward stay available as diagnostics.
* ``memory``: Forward GB/s for a forward-only op. When the row has a backward, the primary is the
  *step* bandwidth, total bytes over total time: ``(F·t_f + G·t_b) / (t_f + t_b)`` with F, G the
  forward/backward GB/s and t_f, t_b their times (bytes = GB/s × time, so this is the
  bytes-weighted harmonic mean of F and G). This mirrors the combined step of compute ops: the
  metric a training step actually feels.

Scored rows (:func:`is_scored`) are PASS rows with work: ``B·M·N·max(K, 1) > 0``. A shape with
no output element (e.g. a grouped GEMM whose groups are all empty) has no throughput; it still
gates correctness through its Check column but takes no part in scores. A scored row whose
primary inputs are missing or not positive is a :class:`SchemaError` (a silent NaN would hide a
broken harness); FAIL rows are never scored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from kernel_ratchet.errors import SchemaError
from kernel_ratchet.harness.csv_schema import BenchTable, Row

CAMPAIGN_TYPES: tuple[str, ...] = ("compute_fwd", "compute_fwd_bwd", "memory")


def _check_campaign_type(campaign_type: str) -> None:
    if campaign_type not in CAMPAIGN_TYPES:
        raise ValueError(
            f"unknown campaign_type {campaign_type!r}; expected one of {', '.join(CAMPAIGN_TYPES)}"
        )


def _positive(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _std(x: float) -> float:
    """A recorded stddev; a missing one (NaN) counts as 0: no recorded spread."""
    return 0.0 if x is None or not math.isfinite(x) else abs(float(x))


def work(row: Row) -> int:
    """Problem size used for scale comparisons: ``B·M·N·max(K, 1)`` (K is 0 for memory ops)."""
    return row.B * row.M * row.N * max(row.K, 1)


def is_scored(row: Row) -> bool:
    """Whether the row takes part in scores: Check=PASS and non-zero work."""
    return row.passed and work(row) > 0


def combined_step_tflops(fwd_tflops: float, bwd_tflops: float) -> float:
    """``6 / (2/fwd + 4/bwd)`` TFLOPS; NaN unless both inputs are finite and positive."""
    if not (_positive(fwd_tflops) and _positive(bwd_tflops)):
        return math.nan
    return 6.0 / (2.0 / fwd_tflops + 4.0 / bwd_tflops)


def combined_step_tflops_from_times(M: int, N: int, K: int, fwd_ms: float, bwd_ms: float) -> float:
    """``6·M·N·K / ((fwd_ms + bwd_ms)·1e-3) / 1e12`` (the SPEC's time form, B = 1)."""
    total_ms = fwd_ms + bwd_ms
    if not _positive(total_ms):
        return math.nan
    return 6.0 * M * N * K / (total_ms * 1e-3) / 1e12


def weighted_harmonic(
    values: Sequence[float], stds: Sequence[float], weights: Sequence[float]
) -> tuple[float, float]:
    """``sum(w) / sum(w/v)`` and its first-order stddev.

    ``dS/dv_i = S² · w_i / (sum(w) · v_i²)``; independent errors add in quadrature. The
    combined step (weights 2, 4) and the memory step bandwidth (weights = bytes) are both this.
    """
    total = float(sum(weights))
    s = total / sum(w / v for w, v in zip(weights, values, strict=True))
    var = sum(
        (s * s * w / (total * v * v) * _std(sd)) ** 2
        for v, sd, w in zip(values, stds, weights, strict=True)
    )
    return s, math.sqrt(var)


def _require(row: Row, value: float, what: str, campaign_type: str) -> None:
    if not _positive(value):
        raise SchemaError(
            f"shape {row.label!r} is PASS but its {what} is {value!r}; a {campaign_type} "
            "campaign needs it positive. Fix the harness/adapter output (or the campaign_type)"
        )


def primary_value(row: Row, campaign_type: str) -> tuple[float, float]:
    """(value, absolute stddev) of the primary metric of one row (see the module docstring).

    Raises ValueError for an unknown campaign type and SchemaError when a needed column is
    missing or not positive.
    """
    _check_campaign_type(campaign_type)
    _require(row, row.fwd, "forward metric", campaign_type)
    if campaign_type == "compute_fwd":
        return row.fwd, _std(row.fwd_std)
    if campaign_type == "compute_fwd_bwd":
        _require(row, row.bwd, "backward metric", campaign_type)
        return weighted_harmonic((row.fwd, row.bwd), (row.fwd_std, row.bwd_std), (2.0, 4.0))
    if math.isnan(row.bwd):  # memory, forward only
        return row.fwd, _std(row.fwd_std)
    _require(row, row.bwd, "backward GB/s", campaign_type)
    _require(row, row.fwd_ms, "forward time", campaign_type)
    _require(row, row.bwd_ms, "backward time", campaign_type)
    bytes_f, bytes_b = row.fwd * row.fwd_ms, row.bwd * row.bwd_ms
    return weighted_harmonic((row.fwd, row.bwd), (row.fwd_std, row.bwd_std), (bytes_f, bytes_b))


def primary_at_times(
    row: Row, campaign_type: str, fwd_ms: float | None, bwd_ms: float | None = None
) -> float | None:
    """The primary metric of ``row``'s shape had its forward taken ``fwd_ms`` and its backward
    ``bwd_ms``: each phase's rate scaled by the row's own time over the given one, so the work
    per phase is the row's (the adapter's formula, as the harness wrote it). None when a phase
    the metric needs has no positive time in the row or in the arguments."""

    def scaled(rate: float, own_ms: float, ms: float | None) -> float:
        if ms is None or not ms > 0 or not own_ms > 0 or not rate > 0:
            return math.nan
        return rate * own_ms / ms

    fwd = scaled(row.fwd, row.fwd_ms, fwd_ms)
    bwd = math.nan if math.isnan(row.bwd) else scaled(row.bwd, row.bwd_ms, bwd_ms)
    needs_bwd = campaign_type == "compute_fwd_bwd" or (
        campaign_type == "memory" and not math.isnan(row.bwd)
    )
    if math.isnan(fwd) or (needs_bwd and math.isnan(bwd)):
        return None
    at = replace(row, fwd=fwd, bwd=bwd, fwd_ms=fwd_ms, bwd_ms=bwd_ms or math.nan)
    return primary_value(at, campaign_type)[0]


def primary_metric_name(campaign_type: str, *, has_backward: bool = False) -> str:
    """Display name of the primary metric (memory with a backward: "Step GB/s")."""
    _check_campaign_type(campaign_type)
    if campaign_type == "compute_fwd":
        return "Forward TFLOPS"
    if campaign_type == "compute_fwd_bwd":
        return "Combined Step TFLOPS"
    return "Step GB/s" if has_backward else "Forward GB/s"


def measured_metric_name(table: BenchTable, campaign_type: str) -> str:
    """The primary metric's name as ``table`` measured it: a memory op whose scored rows
    have a backward is scored by its step bandwidth ("Step GB/s"), not its forward's. A
    table without a scored row (a BASELINE wrong on every shape) is read from its rows with
    work."""
    rows = [r for r in table.rows if is_scored(r)] or [r for r in table.rows if work(r) > 0]
    bwd = any(not math.isnan(r.bwd) for r in rows)
    return primary_metric_name(campaign_type, has_backward=bwd)


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of positive finite values; NaN for no values; ValueError otherwise."""
    vals = list(values)
    if not vals:
        return math.nan
    bad = [v for v in vals if not _positive(v)]
    if bad:
        raise ValueError(f"geomean needs positive finite values, got {bad}")
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))


@dataclass(frozen=True)
class Aggregates:
    """Trend-table numbers of one table: Avg = geomean over PASS shapes, Peak = best shape.

    Forward/backward use the CSV's own metric (TFLOPS or GB/s); NaN where absent (e.g. the
    backward of a forward-only op, or no PASS shape at all).
    """

    fwd_avg: float
    fwd_peak: float
    bwd_avg: float
    bwd_peak: float
    primary_avg: float
    primary_peak: float
    n_pass: int
    n_total: int


def _avg_peak(values: list[float]) -> tuple[float, float]:
    vals = [v for v in values if _positive(v)]
    if not vals:
        return math.nan, math.nan
    return geomean(vals), max(vals)


def aggregates(table: BenchTable, campaign_type: str) -> Aggregates:
    """Aggregates over the scored rows of ``table`` (``n_pass`` counts every PASS row).

    Raises as :func:`primary_value` does.
    """
    passed = [r for r in table.rows if is_scored(r)]
    prim = [primary_value(r, campaign_type)[0] for r in passed]
    fwd_avg, fwd_peak = _avg_peak([r.fwd for r in passed])
    bwd_avg, bwd_peak = _avg_peak([r.bwd for r in passed])
    p_avg, p_peak = _avg_peak(prim)
    n_pass = sum(1 for r in table.rows if r.passed)
    return Aggregates(fwd_avg, fwd_peak, bwd_avg, bwd_peak, p_avg, p_peak, n_pass, len(table.rows))


def score_vector(table: BenchTable, campaign_type: str) -> dict[str, float]:
    """Primary value per scored shape, in table order (the vector the aggregate cannot hide)."""
    return {r.label: primary_value(r, campaign_type)[0] for r in table.rows if is_scored(r)}


def relative_std(row: Row, campaign_type: str) -> float:
    """Primary stddev over primary value of a PASS row (0 when no spread was recorded)."""
    value, std = primary_value(row, campaign_type)
    return std / value
