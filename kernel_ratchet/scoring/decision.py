"""The mechanical accept / roll-back decision of one round (SPEC section 6).

Contract of :func:`decide`: the candidate is compared with the *incumbent* (the last accepted
round), never with the baseline. Gates, in order, each a ROLLED BACK with the reason:

1. build failure, 2. focused-test failure, 3. any Check=FAIL row in the candidate,
4. the candidate's labels differ from the incumbent's (the active set is measured whole),
5. a shape regressed by ≥ ``regression_threshold`` *and* beyond its noise band,
6. the aggregate gain does not exceed its noise band ("within noise": not an improvement).

Otherwise ACCEPTED; shapes that regressed beyond noise but by less than the threshold make it a
trade-off and are named.

Noise model: a shape's relative stddev is ``std / value`` of its primary metric (recorded in the
CSV); the relative noise of a ratio candidate/incumbent is ``sqrt(r_i² + r_c²)``; its band is
``max(noise_floor, Z · that)`` with Z = 2. The aggregate is a geomean, so
``σ(log gain) = sqrt(Σ_k (r_ik² + r_ck²)) / n`` and the aggregate band is
``max(noise_floor, Z · σ)``. Shapes that FAIL in the incumbent, and zero-work shapes, have no
incumbent number and are not compared (the candidate must still PASS them). An incumbent
without any scored shape is a :class:`CampaignError` (there is nothing to compare with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.metrics import geomean, is_scored, primary_value

#: Width of a noise band in standard deviations (~95% two-sided for a normal error).
Z = 2.0


class Verdict(str, Enum):
    """How one shape moved, judged against its noise band."""

    FASTER = "FASTER"
    SLOWER = "SLOWER"
    SAME = "SAME"

    def __str__(self) -> str:
        return self.value


class Status(str, Enum):
    """Status of a round: the BASELINE (round 1), or the outcome of its decision."""

    BASELINE = "BASELINE"
    ACCEPTED = "ACCEPTED"
    ROLLED_BACK = "ROLLED BACK"

    def __str__(self) -> str:  # f"{status}" writes the record text on every Python version
        return self.value


@dataclass(frozen=True)
class ShapeDelta:
    """One shape: primary values, ``delta = candidate/incumbent - 1``, relative noise band."""

    label: str
    incumbent: float
    candidate: float
    delta: float
    noise: float
    verdict: Verdict


@dataclass(frozen=True)
class Decision:
    """The decision and the numbers behind it. ``gain``/``gain_noise`` are relative (0.05 = 5%);
    aggregates and gain are NaN when a gate failed before they could be computed."""

    status: Status
    reason: str
    trade_off: bool
    regressions: tuple[str, ...]
    aggregate_before: float
    aggregate_after: float
    gain: float
    gain_noise: float
    per_shape: tuple[ShapeDelta, ...]
    #: True when rolled back only because the gain sat inside its noise band (no shape
    #: regressed ≥ threshold): the engine may measure more before it settles the round.
    ambiguous: bool = False

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED


def _pct(x: float) -> str:
    return f"{x * 100:+.2f}%"


def _shape_list(deltas: list[ShapeDelta]) -> str:
    return ", ".join(f"{d.label} ({_pct(d.delta)}, noise ±{d.noise * 100:.1f}%)" for d in deltas)


def _rolled_back(reason: str, before: float, per_shape: tuple[ShapeDelta, ...] = ()) -> Decision:
    nan = math.nan
    return Decision(Status.ROLLED_BACK, reason, False, (), before, nan, nan, nan, per_shape)


def _incumbent_aggregate(incumbent: BenchTable, campaign_type: str) -> float:
    values = [primary_value(r, campaign_type)[0] for r in incumbent.rows if is_scored(r)]
    if not values:
        raise CampaignError(
            "the incumbent has no passing shape, so nothing can be compared with it; a "
            "`ratchet validate --fix` round is judged on correctness alone against such an "
            "incumbent"
        )
    return geomean(values)


def _gates(
    incumbent: BenchTable, candidate: BenchTable, build_ok: bool, test_ok: bool
) -> str | None:
    """The first failed gate (1-4 of the module docstring) as a sentence, or None."""
    if not build_ok:
        return "build failed; the candidate was not measured"
    if not test_ok:
        return "focused test failed; correctness comes before performance"
    failed_before = {r.label for r in incumbent.rows if not r.passed}
    failed = [r.label for r in candidate.rows if not r.passed and r.label not in failed_before]
    if failed:  # a shape the incumbent fails too is not judged (nor scored below)
        return f"Check=FAIL on {len(failed)} shape(s): {', '.join(failed)}"
    inc = [r.label for r in incumbent.rows]
    cand = {r.label for r in candidate.rows}
    missing = [x for x in inc if x not in cand]
    extra = [r.label for r in candidate.rows if r.label not in set(inc)]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing shape(s) {', '.join(missing)}")
        if extra:
            parts.append(f"extra shape(s) {', '.join(extra)}")
        return (
            f"the candidate did not measure the incumbent's shape set ({'; '.join(parts)}); "
            "the active validation set must be measured whole"
        )
    return None


def _per_shape(
    incumbent: BenchTable, candidate: BenchTable, campaign_type: str, noise_floor: float
) -> tuple[list[ShapeDelta], float]:
    """Per-shape deltas over shapes the incumbent passed, and σ(log gain) of the aggregate."""
    cand = candidate.by_label()
    out: list[ShapeDelta] = []
    var_sum = 0.0
    for row in incumbent.rows:
        if not is_scored(row):
            continue
        vi, si = primary_value(row, campaign_type)
        vc, sc = primary_value(cand[row.label], campaign_type)
        rel_var = (si / vi) ** 2 + (sc / vc) ** 2
        var_sum += rel_var
        noise = max(noise_floor, Z * math.sqrt(rel_var))
        delta = vc / vi - 1.0
        verdict = Verdict.SAME
        if delta > noise:
            verdict = Verdict.FASTER
        elif delta < -noise:
            verdict = Verdict.SLOWER
        out.append(ShapeDelta(row.label, vi, vc, delta, noise, verdict))
    return out, math.sqrt(var_sum) / len(out)


def decide(
    incumbent: BenchTable,
    candidate: BenchTable,
    campaign_type: str,
    *,
    regression_threshold: float = 0.05,
    noise_floor: float = 0.0,
    build_ok: bool = True,
    test_ok: bool = True,
) -> Decision:
    """Accept or roll back ``candidate`` against ``incumbent`` (see the module docstring).

    ``regression_threshold`` and ``noise_floor`` are relative (0.05 = 5%). Raises SchemaError
    when the two tables use different schemas, CampaignError when the incumbent has no PASS
    shape; every candidate failure is a ROLLED BACK decision, never an exception.
    """
    if incumbent.schema.name != candidate.schema.name:
        raise SchemaError(
            f"incumbent uses the {incumbent.schema.name!r} schema, candidate the "
            f"{candidate.schema.name!r} one; the schema is frozen at BASELINE"
        )
    before = _incumbent_aggregate(incumbent, campaign_type)
    gate = _gates(incumbent, candidate, build_ok, test_ok)
    if gate is not None:
        return _rolled_back(gate, before)
    deltas, sigma = _per_shape(incumbent, candidate, campaign_type, noise_floor)
    after = geomean(d.candidate for d in deltas)
    gain_noise = max(noise_floor, Z * sigma)
    return _judge(
        tuple(deltas), before, after, gain_noise, regression_threshold, incumbent.schema.unit
    )


def _judge(
    deltas: tuple[ShapeDelta, ...],
    before: float,
    after: float,
    gain_noise: float,
    threshold: float,
    unit: str,
) -> Decision:
    """Gates 5-6 and the accept / trade-off outcome, with the reason sentence."""
    gain = after / before - 1.0
    agg = (
        f"aggregate {before:.4g} -> {after:.4g} {unit} "
        f"({_pct(gain)}, noise ±{gain_noise * 100:.1f}%)"
    )
    slower = [d for d in deltas if d.verdict is Verdict.SLOWER]
    big = [d for d in slower if d.delta <= -threshold]
    small = [d for d in slower if d.delta > -threshold]
    thr = f"{threshold * 100:g}%"

    def result(
        status: Status, reason: str, regs: list[ShapeDelta], ambiguous: bool = False
    ) -> Decision:
        labels = tuple(d.label for d in regs)
        trade = status is Status.ACCEPTED and bool(regs)
        return Decision(
            status, reason, trade, labels, before, after, gain, gain_noise, deltas, ambiguous
        )

    if big:
        return result(
            Status.ROLLED_BACK,
            f"{len(big)} shape(s) regressed ≥ {thr} beyond noise: {_shape_list(big)}; {agg}",
            big + small,
        )
    if gain <= gain_noise:
        in_noise = gain >= -gain_noise
        why = "within noise, not an improvement" if in_noise else "aggregate dropped"
        if small:
            why += f"; shape(s) regressed beyond noise but < {thr}: {_shape_list(small)}"
        return result(Status.ROLLED_BACK, f"{agg}: {why}", small, ambiguous=in_noise)
    if small:
        return result(
            Status.ACCEPTED,
            f"{agg}; trade-off: {len(small)} shape(s) regressed beyond noise but < {thr}: "
            f"{_shape_list(small)}",
            small,
        )
    return result(Status.ACCEPTED, f"{agg}; no shape regressed ≥ {thr}", [])
