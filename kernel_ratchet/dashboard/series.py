"""The numbers each panel of the dashboard shows, derived from the campaign's typed records.

Pure functions of a :class:`~kernel_ratchet.dashboard.model.CampaignData`; no plotting here,
so the charts (:mod:`.figures`) and their text alternatives (the tables of the page) show
the same numbers. Ratios are speed ratios (1.0 = no change; 1.1 = 10% faster).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.campaign.headline import ChainHeadline, chain_headline
from kernel_ratchet.campaign.record import OVERLAP_STEP, RoundRecord
from kernel_ratchet.campaign.render import other_seconds
from kernel_ratchet.campaign.round_decision import ShapeResult
from kernel_ratchet.dashboard.model import CampaignData
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.roofline import analyze_table, op_dtype

#: The total of a round's ``seconds`` (every other key is one step of it).
TOTAL_STEP = "measure"
#: A round's time outside its steps (scope check, audit, decision, git, records).
OTHER_STEP = "other"
#: The status shown for a rehearsal round (its record says ROLLED BACK).
REHEARSAL = "REHEARSAL"


def _finite(x: float | None) -> float | None:
    return x if isinstance(x, int | float) and math.isfinite(x) else None


@dataclass(frozen=True)
class ChainPoint:
    """One closed round on the paired chain against the BASELINE. ``ratio``/``lo``/``hi``: the
    round's candidate through the paired A/Bs, with its CI (None: no paired decision);
    ``incumbent``: the incumbent's chain once the round closed; ``harness``: the round's
    harness CSV against the BASELINE's (single runs, a diagnostic). ``status`` is REHEARSAL
    for a rehearsal round (rolled back whatever its timings said; it never counts) and
    ``label`` the status as the records show it."""

    round: int
    status: str
    label: str
    category: str
    hypothesis: str
    ratio: float | None
    lo: float | None
    hi: float | None
    incumbent: float | None
    harness: float | None


def chain_points(data: CampaignData) -> list[ChainPoint]:
    """The paired chain of every closed round, in round order."""
    chain: dict[int, float | None] = {1: 1.0}
    incumbent: float | None = 1.0
    out = []
    for r in data.rounds:
        e, rec = r.entry, r.record
        ratio = lo = hi = None
        if e.status is Status.BASELINE:
            ratio = lo = hi = 1.0
        elif rec is not None and rec.decision is not None and rec.decision.paired:
            d = rec.decision
            base = chain.get(rec.incumbent_round or 1)
            if e.paired_chain is not None:
                ratio = 1.0 + e.paired_chain
            elif base is not None and _finite(d.gain) is not None:
                ratio = base * (1.0 + d.gain)
            if base is not None and d.gain_ci is not None:
                lo, hi = base * (1.0 + d.gain_ci[0]), base * (1.0 + d.gain_ci[1])
        chain[e.round] = ratio
        if e.status is not Status.ROLLED_BACK:
            incumbent = ratio
        vb = _finite(e.vs_baseline)
        harness = 1.0 if e.status is Status.BASELINE else (None if vb is None else 1.0 + vb)
        out.append(
            ChainPoint(
                e.round,
                REHEARSAL if e.rehearsal else e.status.value,
                e.label,
                e.category.value,
                e.hypothesis,
                ratio,
                lo,
                hi,
                incumbent,
                harness,
            )
        )
    return out


def headline(data: CampaignData, points: list[ChainPoint] | None = None) -> ChainHeadline:
    """The incumbent's paired chain with its CI, as the final report's headline reads it
    (:func:`~kernel_ratchet.campaign.headline.chain_headline` over the accepted rounds)."""
    inc = data.state.incumbent_round or 1
    point = next((p for p in points or chain_points(data) if p.round == inc), None)
    chain = 0.0 if point is None or point.ratio is None else point.ratio - 1.0
    accepted = [
        r.record.decision if r.record else None
        for r in data.rounds
        if r.entry.status is Status.ACCEPTED
    ]
    return chain_headline(chain, accepted)


def quantities(data: CampaignData) -> list[str]:
    """What the campaign's paired A/Bs measured, each quantity once, in round order."""
    out: list[str] = []
    for r in data.rounds:
        q = r.record.decision.quantity if r.record and r.record.decision else None
        if q and q not in out:
            out.append(q)
    return out


@dataclass(frozen=True)
class ForestRow:
    """One row of a round's forest plot: a shape, or an aggregate (``kind``)."""

    label: str
    ratio: float
    lo: float | None
    hi: float | None
    verdict: str
    #: "shape", "unresolved" (a shape whose CI is wider than its effect), "aggregate" (the
    #: decision's geomean), "weighted" (the time-weighted step), "harness" (a diagnostic)
    kind: str


def forest_rows(rec: RoundRecord) -> list[ForestRow]:
    """Per-shape ratios with their CIs (paired) or noise bands (harness gates), then the
    aggregates: the geomean of the shapes, the time-weighted step where recorded, and the
    harness-only diagnostic; empty when the round recorded no decision. A shape whose CI is
    wider than its effect (``unresolved``) is its own kind."""
    d = rec.decision
    if d is None:
        return []
    rows = [_shape_row(s, s.label in d.unresolved) for s in d.per_shape if _finite(s.delta)]
    if _finite(d.gain) is not None:
        if d.gain_ci is not None:
            lo, hi = 1.0 + d.gain_ci[0], 1.0 + d.gain_ci[1]
        else:
            noise = _finite(d.gain_noise) or 0.0
            lo, hi = 1.0 + d.gain - noise, 1.0 + d.gain + noise
        what = "geomean of shapes (paired A/B)" if d.paired else "aggregate (harness)"
        verdict = d.status.value + _level(d.ci_level if d.paired else None)
        rows.append(ForestRow(what, 1.0 + d.gain, lo, hi, verdict, "aggregate"))
    tw = d.time_weighted or {}
    if _finite(tw.get("ratio")) is not None:
        lo, hi = _finite(tw.get("ci_low")), _finite(tw.get("ci_high"))
        verdict = "time-weighted step" + _level(tw.get("level"))
        rows.append(
            ForestRow("time-weighted step (paired A/B)", tw["ratio"], lo, hi, verdict, "weighted")
        )
    ho = d.harness_only or {}
    if _finite(ho.get("gain")) is not None:
        verdict = str(ho.get("status", "-"))
        rows.append(
            ForestRow("harness only (diagnostic)", 1.0 + ho["gain"], None, None, verdict, "harness")
        )
    return rows


def _level(level: float | None) -> str:
    return "" if _finite(level) is None else f" ({level:.0%} CI)"


def _shape_row(s: ShapeResult, unresolved: bool) -> ForestRow:
    if s.ci is not None:
        lo, hi = 1.0 + s.ci[0], 1.0 + s.ci[1]
    elif _finite(s.noise) is not None:
        lo, hi = 1.0 + s.delta - s.noise, 1.0 + s.delta + s.noise
    else:
        lo = hi = None
    if unresolved:
        return ForestRow(s.label, 1.0 + s.delta, lo, hi, f"{s.verdict}, unresolved", "unresolved")
    return ForestRow(s.label, 1.0 + s.delta, lo, hi, s.verdict, "shape")


def time_steps(data: CampaignData) -> tuple[list[str], dict[int, dict[str, float]]]:
    """The step names in first-seen order and each round's seconds per step (total apart);
    ``other``, last, is a round's time outside its steps where it reaches a second (the
    stacked bars then add up to the round, plus the seconds of steps that ran at once)."""
    steps: list[str] = []
    per: dict[int, dict[str, float]] = {}
    for r in data.rounds:
        sec = dict((r.record.seconds or {}) if r.record else {})
        if not sec:
            continue
        rest = other_seconds(sec)
        sec.pop(OVERLAP_STEP, None)
        if rest is not None:
            sec[OTHER_STEP] = rest
        per[r.n] = sec
        for k in sec:
            if k not in (TOTAL_STEP, OTHER_STEP) and k not in steps:
                steps.append(k)
    if any(OTHER_STEP in sec for sec in per.values()):
        steps.append(OTHER_STEP)
    return steps, per


@dataclass(frozen=True)
class SearchMove:
    """One search move: round, where (entry), knob, value tried, outcome."""

    round: int
    entry: str
    knob: str
    value: str
    status: str
    category: str


def search_moves(data: CampaignData) -> list[SearchMove]:
    """The rounds whose direction is a search move (``entry:knob=value``), in round order."""
    out = []
    for r in data.rounds:
        rec = r.record
        direction = rec.direction if rec else ""
        entry, sep, rest = direction.partition(":")
        knob, eq, value = rest.partition("=")
        if not (sep and eq and entry and knob.isidentifier()):
            continue
        status = REHEARSAL if rec.rehearsal else rec.status.value
        out.append(SearchMove(r.n, entry, knob, value, status, rec.category.value))
    return out


def roofline(data: CampaignData) -> dict[str, Any] | None:
    """The baseline's and the incumbent's roofline per target shape against the ceilings
    measured on this machine (None without ceilings). The incumbent is measured by the final
    full validation when the report has run, else by its own round's CSV. The dtype and the
    bytes moved per shape are those the latest ANALYZE recorded (without one: the op's name
    decides the dtype and the compute ceiling bounds every shape)."""
    ceil = data.ceilings
    if ceil is None:
        return None
    rec_a = data.analysis or {}
    nbytes = {}
    for s in rec_a.get("shapes", []):
        flops = 2.0 * s.get("M", 0) * s.get("N", 0) * s.get("K", 0) * s.get("B", 1)
        if s.get("intensity"):
            nbytes[s["label"]] = flops / s["intensity"]
    kw = {
        "op": data.manifest.target_op,
        "memory": data.manifest.campaign_type == "memory",
        "dtype": rec_a.get("dtype") or dtype_of_name(data.manifest.target_op),
        "nbytes": nbytes,
    }
    inc_n = data.state.incumbent_round or 1
    inc_rec = data.record(inc_n)
    sides = {"baseline": data.table("rounds/round-1/artifacts/benchmark.csv")}
    if data.report is not None and (data.dir / "report" / "benchmark_full.csv").exists():
        sides["incumbent"] = data.table("report/benchmark_full.csv")
        inc_src = "the final full validation (report/benchmark_full.csv)"
    else:
        sides["incumbent"] = data.table(inc_rec.csv if inc_rec else None)
        inc_src = f"round-{inc_n}'s harness CSV"
    out: dict[str, Any] = {"incumbent_source": inc_src, "incumbent_round": inc_n}
    for side, table in sides.items():
        out[side] = None if table is None else analyze_table(table, ceil, **kw)
    out["memory"] = kw["memory"]
    out["dtype"], out["device"], out["label"] = kw["dtype"], ceil.device, ceil.label
    out["peak_tflops"], out["copy_gbps"] = out_peak(out), ceil.copy_gbps
    out["bytes_recorded"] = bool(nbytes)
    return out


def dtype_of_name(op: str) -> str:
    """The dtype an op's name says (``gemm_bf16`` -> bf16), else what
    :func:`~kernel_ratchet.scoring.roofline.op_dtype` infers without an adapter."""
    tokens = op.lower().replace("-", "_").split("_")
    return next((t for t in ("fp8", "bf16", "fp16") if t in tokens), None) or op_dtype(None, op)


def out_peak(r: dict[str, Any]) -> float | None:
    side = r.get("baseline") or r.get("incumbent")
    return None if side is None else side["peak_tflops"]


@dataclass(frozen=True)
class RoofRow:
    """One target shape on the roofline: achieved and attainable, baseline and incumbent."""

    label: str
    bound: str
    roof: float | None
    baseline: float | None
    incumbent: float | None
    baseline_eff: float | None
    incumbent_eff: float | None


def roof_rows(r: dict[str, Any], labels: list[str]) -> list[RoofRow]:
    """One row per target shape (in ``labels`` order) measured by either side."""
    key = "gbps" if r["memory"] else "tflops"
    sides = {
        s: {x["label"]: x for x in (r[s] or {}).get("shapes", [])}
        for s in ("baseline", "incumbent")
    }
    rows = []
    for lbl in labels:
        b, i = sides["baseline"].get(lbl), sides["incumbent"].get(lbl)
        if b is None and i is None:
            continue
        any_ = i or b
        rows.append(
            RoofRow(
                lbl,
                any_["bound"],
                _finite(any_.get(f"roofline_{key}")),
                _finite(b.get(f"achieved_{key}")) if b else None,
                _finite(i.get(f"achieved_{key}")) if i else None,
                _finite(b.get("efficiency")) if b else None,
                _finite(i.get("efficiency")) if i else None,
            )
        )
    return rows
