"""What a closed round's records show: its summary's view, its trend row, its transfer check.

Pure readers of a :class:`~kernel_ratchet.campaign.record.RoundRecord` and its CSV (read
against the frozen schema); :mod:`.close` writes what they render.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.context import primary_vs_base, vs_base
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.campaign.render import RoundView, ShapeLine, trend_row, vs_baseline
from kernel_ratchet.campaign.rounds.correctness_only import FIX_ALONE, NO_PAIR
from kernel_ratchet.campaign.rounds.partial import STATED
from kernel_ratchet.campaign.rounds.reach import HEADLINE
from kernel_ratchet.campaign.rounds.shared import describe
from kernel_ratchet.guard import transfer_check
from kernel_ratchet.guard.transfer import REJECT, TRANSFER_MEASURED
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates, geomean, primary_value
from kernel_ratchet.scoring.paired import EQUIVALENCE_FLOOR as EQ_FLOOR
from kernel_ratchet.scoring.paired_rows import inside_margin

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.round_decision import ShapeResult


def _shape_lines(c: CampaignContext, record: RoundRecord, table: BenchTable) -> list[ShapeLine]:
    """One line per CSV row; in a paired round the candidate and incumbent values are the
    paired A/B's (each side's median time per phase) and the row's own value is the harness
    column."""
    paired = _paired(record)
    per = {s.label: s for s in (record.decision.per_shape if record.decision else ())}
    lines = []
    for r in table.rows:
        s = per.get(r.label)
        snr = ", ".join(f"{k}={v:.1f}" for k, v in r.snr.items() if not math.isnan(v))
        value = primary_value(r, c.m.campaign_type)[0] if r.passed else math.nan
        verdict = s.verdict if s else "-"
        if s and s.ci:  # paired A/B: the delta is the median per-round speed ratio, with its CI
            verdict += f" (CI {s.ci[0] * 100:+.2f}%..{s.ci[1] * 100:+.2f}%, {s.rounds} rounds"
            verdict += f"{_inside_margin(s, record)})"
        incumbent, delta = (s.incumbent, s.delta) if s else (None, None)
        if paired:
            cand = s.candidate if s and s.candidate is not None else math.nan
            line = ShapeLine(r.label, r.check, cand, incumbent, delta, verdict, snr or "-", value)
            lines.append(replace(line, phases=_phases(s), phase_ms=s.phase_ms if s else None))
        else:
            lines.append(ShapeLine(r.label, r.check, value, incumbent, delta, verdict, snr or "-"))
    return lines


def _phases(s: ShapeResult | None) -> str:
    """Each timed phase's speed change in a paired A/B ("fwd +4.03%, bwd -0.62%"), or ""."""
    if s is None or not s.phases:
        return ""
    return ", ".join(f"{k} {(v - 1) * 100:+.2f}%" for k, v in s.phases.items())


def _inside_margin(s: ShapeResult, record: RoundRecord) -> str:
    """For a FASTER or SLOWER shape whose whole CI lies inside the decision's no-gain margin,
    a note that says so: the sides differ, by less than the campaign calls a change (two
    processes of the same code can read 0.1-0.3% apart on a short op)."""
    eq = max((record.decision.min_detectable if record.decision else None) or 0.0, EQ_FLOOR)
    lo, hi = s.ci or (0.0, 0.0)  # relative: the ratio's CI less one
    if s.verdict not in ("FASTER", "SLOWER") or not inside_margin(1 + lo, 1 + hi, eq):
        return ""
    return f"; inside the ±{eq:.2%} no-gain margin"


def _paired(record: RoundRecord) -> bool:
    return bool(record.decision and record.decision.paired)


def _paired_aggregate(lines: list[ShapeLine]) -> float | None:
    """Geomean of the paired candidate values (None when a shape has none)."""
    values = [s.candidate for s in lines if s.check == "PASS"]
    if not values or any(not v > 0 for v in values):
        return None
    return geomean(values)


def _notes(record: RoundRecord) -> list[str]:
    notes = []
    if record.failed_tests:
        n = len(record.failed_tests)
        notes.append(f"Failed tests ({n}): " + ", ".join(f"`{t}`" for t in record.failed_tests))
    if record.escalated:
        notes.append(
            f"Quick gain was under 5%: escalated to full validation (quick CSV: {record.quick_csv})"
        )
    if record.incumbent_csv and _paired(record):
        notes.append(f"The incumbent's harness CSV, for the gates: {record.incumbent_csv}")
    elif record.incumbent_csv:
        notes.append(f"Incumbent numbers from {record.incumbent_csv}")
    if _paired(record):
        where = "artifacts/full/paired.json" if record.escalated else "artifacts/paired.json"
        notes.append(
            f"Decided by the paired A/B ({where}): the paired columns are each "
            "side's median time per phase over the paired rounds, in the primary metric (the "
            "work per phase from the harness row); Delta and the CIs are median per-round "
            "speed ratios; the Harness column, the harness aggregate and 'vs baseline' come "
            "from harness runs in other sessions: diagnostics only"
        )
        if record.decision.quantity:
            notes.append(f"Quantity measured on both sides: {record.decision.quantity}")
        tw = record.decision.time_weighted
        if tw:
            notes.append(
                f"Time-weighted step (paired): {tw['ratio']:.4f}x [{tw['ci_low']:.4f}, "
                f"{tw['ci_high']:.4f}]; unresolved shapes (CI wider than the effect): "
                f"{', '.join(record.decision.unresolved) or 'none'}"
            )
    return notes


def _change(record: RoundRecord) -> str:
    """The change line, who else lists the files it changed, and which changed kernel lines
    no launch of the round's shapes reached."""
    parts = [record.change, describe(record.shared_with, record.shared_tested)]
    if record.unreached:
        lines = "; ".join(record.unreached)
        parts.append(f"Not measured: {HEADLINE} ({lines}); the verdict does not speak for them")
    return "\n\n".join(p for p in parts if p)


def view(c: CampaignContext, record: RoundRecord) -> RoundView:
    """What the round's summary shows, from its record and its CSV."""
    table = c.table(record.csv) if record.csv else None
    lines, agg, vb, vi, harness_agg = [], None, None, None, None
    if table is not None:
        lines = _shape_lines(c, record, table)
        agg = aggregates(table, c.m.campaign_type).primary_avg
        vb = primary_vs_base(c, table)
        vi = record.gain
        if _paired(record):
            agg, harness_agg = _paired_aggregate(lines), agg
    return RoundView(
        n=record.round,
        status=record.label,
        hypothesis=record.hypothesis,
        bucket=record.bucket,
        change=_change(record),
        started=record.started,
        finished=record.finished,
        level=record.level,
        test_command=record.test_command,
        harness_command=record.harness_command or "-",
        metric=c.m.primary_metric,
        shapes=lines,
        aggregate=agg,
        vs_baseline=vb,
        vs_incumbent=vi,
        reason=record.reason,
        attribution=_attribution(record),
        next_direction=record.next_direction or "to be chosen by the driver",
        expected=record.expected,
        lesson=record.lesson,
        root_cause=record.category.root_cause,
        transfer=transfer_of(record),
        notes=_notes(record),
        paired=_paired(record),
        harness_aggregate=harness_agg,
    )


def _noise(dyn: dict, paired: ShapeResult | None = None) -> str:
    """The simulation's noise beside its gains (eager steps of a few calls: a short op's
    gains there can be all noise; the decision's gain is the paired A/B's). ``paired``: the
    paired A/B's result on the simulated shape; when both of the simulation's gains lie
    outside its CI by more than their noise, the line says they disagree with it."""
    noise = dyn.get("noise")
    if noise is None:
        return ""
    train, bench = dyn["train_gain"], dyn["bench_gain"]
    if noise > max(abs(train), abs(bench)):
        return f" (noise ±{noise:.2%}: both within it, not a measured gain)"
    if paired is None or paired.ci is None:
        return f" (noise ±{noise:.2%})"
    lo, hi = paired.ci
    if all(g < lo - noise or g > hi + noise for g in (train, bench)):
        return (
            f" (noise ±{noise:.2%}; the paired A/B measured {paired.delta:+.2%} "
            f"[{lo:+.2%}, {hi:+.2%}] on this shape: these few eager steps disagree with it "
            "beyond their noise, and the decision rests on the paired A/B)"
        )
    return f" (noise ±{noise:.2%})"


def _paired_on(record: RoundRecord, label: str) -> ShapeResult | None:
    d = record.decision
    if not (d and d.paired):
        return None
    return next((s for s in d.per_shape if s.label == label), None)


def transfer_of(record: RoundRecord) -> dict[str, str]:
    """The round's ``Real-training transfer check`` values (SPEC section 8)."""
    static = record.transfer_static
    if record.status is Status.BASELINE or static is None:
        return {"Bucket": f"{record.bucket} (declared; not audited: no candidate change)"}
    d = record.decision
    if d is not None and d.correctness_only:  # no speed measured: nothing to transfer
        t = transfer_check(static, None, 0.0)
        for key in TRANSFER_MEASURED:
            t[key] = f"none: {FIX_ALONE} ({NO_PAIR})"
        return t
    skew = d.skew if d else None
    t = transfer_check(static, None, float((d.gain if d else 0.0) or 0.0), skew=skew)
    if not (d and d.per_shape):  # stopped before any measurement: only the audit ran
        why = f"not judged: the round stopped before any measurement ({record.category.value})"
        for key in TRANSFER_MEASURED:
            t[key] = why
        if t["Decision"] != REJECT:  # the static audit's rejection stands without a benchmark
            t["Decision"] = why
        return t
    dyn = d.dynamic if d else None
    if dyn and dyn["verdict"] != "NOT-RUN":
        t["4-step trace hit rate"] = dyn["candidate"].get("hit_rates") or "no cache"
        t["Estimated real-training gain"] = (
            f"{dyn['train_gain']:+.2%} measured in the training idiom (fresh activations and "
            f"grad_out, weight updated in place) against {dyn['bench_gain']:+.2%} in the "
            f"benchmark idiom, on {dyn['shape']}{_noise(dyn, _paired_on(record, dyn['shape']))}"
            + ("" if static.bucket[0] == "K" else f"; {t['Estimated real-training gain']}")
        )
        if dyn["verdict"] == "OVERFIT":
            t["Decision"] = "REJECT-as-overfit"
    elif dyn:
        t["4-step trace hit rate"] = f"not measured: {dyn['reason']}"
    if record.status is not Status.ACCEPTED and t["Decision"].startswith("ACCEPT"):
        # the verdict on whether the gain would transfer, for a round that kept no gain
        t["Decision"] = f"none: the round was rolled back (the gain would read {t['Decision']})"
    return t


def _attribution(record: RoundRecord) -> str:
    d = record.decision
    if record.status is Status.BASELINE:
        return "Baseline: nothing to attribute."
    if d is not None and d.correctness_only:
        return f"No speed to attribute: {NO_PAIR}."
    if not d or not d.per_shape:
        if STATED in record.reason:
            return (
                f"No decision to attribute ({record.category.value}); what the paired A/B "
                "had measured when it stopped is in the decision above."
            )
        return f"No measurement to attribute ({record.category.value})."
    best = max(d.per_shape, key=lambda s: s.delta)
    worst = min(d.per_shape, key=lambda s: s.delta)
    return (
        f"Best shape {best.label} ({best.delta * 100:+.2f}%), worst shape "
        f"{worst.label} ({worst.delta * 100:+.2f}%); aggregate "
        f"{d.gain * 100:+.2f}% (noise ±{d.gain_noise * 100:.2f}%)."
    )


def first_clause(reason: str) -> str:
    """``reason`` up to its first ``;`` outside brackets: a baseline's "0/2 shapes PASS (a:
    SNR ...; b: SNR ...)" stays whole, not cut inside its parenthesis."""
    depth = 0
    for i, ch in enumerate(reason):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == ";" and depth <= 0:
            return reason[:i]
    return reason


def trend_line(c: CampaignContext, record: RoundRecord) -> str:
    """The round's row of ``logs/performance_trend.md``."""
    table = c.table(record.csv) if record.csv else None
    aggs = aggregates(table, c.m.campaign_type) if table is not None else None
    if record.status is Status.BASELINE:
        vb = "—"
    elif table is not None:
        vb = vs_baseline(*vs_base(c, table))
    else:
        vb = vs_baseline(None, None, None)
    finding = first_clause(record.reason)
    return trend_row(
        record.round,
        record.label,
        record.hypothesis,
        aggs,
        c.m.campaign_type,
        vb,
        finding,
    )
