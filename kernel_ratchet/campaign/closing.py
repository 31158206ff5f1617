"""Closing a round: its summary, trend row, log section and tip; then the stagnation review and
the termination check (T1-T4). Every write here is idempotent so a recovered round can be
closed again without duplicating anything.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.record import RoundRecord, read_record
from kernel_ratchet.campaign.records import (
    RoundView,
    ShapeLine,
    optimize_round,
    summary_md,
    trend_row,
    vs_baseline,
)
from kernel_ratchet.campaign.state import ClosedEntry, Termination
from kernel_ratchet.campaign.tips import add_tip, tips_path
from kernel_ratchet.guard import transfer_check
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates, primary_value

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign

ESCALATION = {
    1: "diagnose and retry the same bottleneck differently",
    2: "full re-profile (stagnation review: at least three fundamentally different directions)",
    3: "inspect the generated code (PTX/SASS/IR)",
}


def _ratio(a: float, b: float) -> float | None:
    if a is None or b is None or math.isnan(a) or math.isnan(b) or b <= 0:
        return None
    return a / b - 1.0


def vs_base(c: Campaign, table: BenchTable) -> tuple[float | None, float | None, float | None]:
    """(step, fwd, bwd) gains of ``table`` over the baseline on the same PASS shapes."""
    labels = [r.label for r in table.rows if r.passed]
    base = aggregates(c.baseline_table().restrict(labels), c.m.campaign_type)
    cur = aggregates(table.restrict(labels), c.m.campaign_type)
    step = _ratio(cur.primary_avg, base.primary_avg) if c.m.campaign_type != "compute_fwd" else None
    return step, _ratio(cur.fwd_avg, base.fwd_avg), _ratio(cur.bwd_avg, base.bwd_avg)


def _shape_lines(c: Campaign, record: RoundRecord, table) -> list[ShapeLine]:
    per = {s.label: s for s in (record.decision.per_shape if record.decision else ())}
    lines = []
    for r in table.rows:
        s = per.get(r.label)
        snr = ", ".join(f"{k}={v:.1f}" for k, v in r.snr.items() if not math.isnan(v))
        value = primary_value(r, c.m.campaign_type)[0] if r.passed else math.nan
        verdict = s.verdict if s else "-"
        if s and s.ci:  # paired A/B: the delta is the median per-round speed ratio, with its CI
            verdict += f" (CI {s.ci[0] * 100:+.2f}%..{s.ci[1] * 100:+.2f}%, {s.rounds} rounds)"
        incumbent, delta = (s.incumbent, s.delta) if s else (None, None)
        lines.append(ShapeLine(r.label, r.check, value, incumbent, delta, verdict, snr or "-"))
    return lines


def _notes(record: RoundRecord) -> list[str]:
    notes = []
    if record.escalated:
        notes.append(
            f"Quick gain was under 5%: escalated to full validation (quick CSV: {record.quick_csv})"
        )
    if record.incumbent_csv:
        notes.append(f"Incumbent numbers from {record.incumbent_csv}")
    if record.decision and record.decision.paired:
        notes.append(
            "Decided by the paired A/B (artifacts/paired.json): Delta and the CIs are "
            "median per-round speed ratios; the absolute numbers and 'vs baseline' "
            "come from harness runs in other sessions: diagnostics only"
        )
    return notes


def view(c: Campaign, record: RoundRecord) -> RoundView:
    """What the round's summary shows, from its record and its CSV."""
    table = c.table(record.csv) if record.csv else None
    lines, agg, vb, vi = [], None, None, None
    if table is not None:
        lines = _shape_lines(c, record, table)
        agg = aggregates(table, c.m.campaign_type).primary_avg
        step, fwd, _ = vs_base(c, table)
        vb = step if c.m.campaign_type != "compute_fwd" else fwd
        vi = record.gain
    return RoundView(
        n=record.round,
        status=record.status.value,
        hypothesis=record.hypothesis,
        bucket=record.bucket,
        change=record.change,
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
    )


def transfer_of(record: RoundRecord) -> dict[str, str]:
    """The round's ``Real-training transfer check`` values (SPEC section 8)."""
    static = record.transfer_static
    if record.status is Status.BASELINE or static is None:
        return {"Bucket": f"{record.bucket} (declared; not audited: no candidate change)"}
    d = record.decision
    skew = d.skew if d else None
    t = transfer_check(static, None, float((d.gain if d else 0.0) or 0.0), skew=skew)
    dyn = d.dynamic if d else None
    if dyn and dyn["verdict"] != "NOT-RUN":
        t["4-step trace hit rate"] = dyn["candidate"].get("hit_rates") or "no cache"
        t["Estimated real-training gain"] = (
            f"{dyn['train_gain']:+.2%} measured in the training idiom (fresh activations and "
            f"grad_out, weight updated in place) against {dyn['bench_gain']:+.2%} in the "
            f"benchmark idiom, on {dyn['shape']}"
            + ("" if static.bucket[0] == "K" else f"; {t['Estimated real-training gain']}")
        )
        if dyn["verdict"] == "OVERFIT":
            t["Decision"] = "REJECT-as-overfit"
    elif dyn:
        t["4-step trace hit rate"] = f"not measured: {dyn['reason']}"
    return t


def _attribution(record: RoundRecord) -> str:
    d = record.decision
    if record.status is Status.BASELINE:
        return "Baseline: nothing to attribute."
    if not d or not d.per_shape:
        return f"No measurement to attribute ({record.category.value})."
    best = max(d.per_shape, key=lambda s: s.delta)
    worst = min(d.per_shape, key=lambda s: s.delta)
    return (
        f"Best shape {best.label} ({best.delta * 100:+.2f}%), worst shape "
        f"{worst.label} ({worst.delta * 100:+.2f}%); aggregate "
        f"{d.gain * 100:+.2f}% (noise ±{d.gain_noise * 100:.2f}%)."
    )


def trend_line(c: Campaign, record: RoundRecord) -> str:
    """The round's row of ``logs/performance_trend.md``."""
    table = c.table(record.csv) if record.csv else None
    aggs = aggregates(table, c.m.campaign_type) if table is not None else None
    if record.status is Status.BASELINE:
        vb = "—"
    elif table is not None:
        vb = vs_baseline(*vs_base(c, table))
    else:
        vb = vs_baseline(None, None, None)
    finding = record.reason.split(";")[0]
    return trend_row(
        record.round,
        record.status.value,
        record.hypothesis,
        aggs,
        c.m.campaign_type,
        vb,
        finding,
    )


def write_records(c: Campaign, n: int, record: RoundRecord, commit: str | None) -> None:
    """The round's summary, trend row, log section and tip, each written once."""
    v = view(c, record)
    if commit:
        v.notes.append(f"Commit: {commit}")
    summary = c.round_dir(n) / "summary.md"
    if not summary.exists():
        atomic_write_text(summary, summary_md(v))
    trend = c.log("logs/performance_trend.md")
    if not trend.contains(f"| round-{n} |"):
        trend.append(trend_line(c, record))
    opt = c.log("logs/optimize.md")
    if not opt.contains(f"## Round {n} — "):
        opt.append(optimize_round(v))
    if record.takeaway:
        path = tips_path(
            c.profile.tips_root_path, c.m.target_gpu, c.m.target_op, c.m.target_backend
        )
        if f"round-{n} — " not in (path.read_text() if path.exists() else ""):
            add_tip(
                path,
                n,
                record.status.value,
                f"{c.m.campaign}: {record.hypothesis}",
                record.reason,
                record.takeaway,
                f"{c.m.target_op} on {c.m.target_gpu}",
            )


def closed_entry(c: Campaign, record: RoundRecord, commit: str | None = None) -> ClosedEntry:
    """The state's index entry of a closed round."""
    vb = None
    if record.csv:
        step, fwd, _ = vs_base(c, c.table(record.csv))
        vb = step if c.m.campaign_type != "compute_fwd" else fwd
    return ClosedEntry(
        round=record.round,
        status=record.status,
        level=record.level,
        category=record.category,
        hypothesis=record.hypothesis,
        gain=record.gain,
        vs_baseline=vb,
        paired_chain=paired_chain(c, record),
        commit=commit,
        finished=record.finished,
    )


def paired_chain(c: Campaign, record: RoundRecord) -> float | None:
    """The round's candidate against the BASELINE through the paired A/Bs: its own paired
    ratio against its incumbent times the incumbent's chain (the baseline's is 1), minus 1.
    None for a round without a paired decision. ``vs_baseline`` compares two single harness
    CSVs measured at different times instead; this is the estimate the decisions stand on."""
    d = record.decision
    if d is None or not d.paired or d.gain is None:
        return None
    base = chain_of(c, record.incumbent_round or 1)
    return (1.0 + (base or 0.0)) * (1.0 + d.gain) - 1.0


def chain_of(c: Campaign, n: int) -> float | None:
    """Closed round ``n``'s paired chain: its entry's, or rebuilt from its record when it was
    closed before the chain was kept (a campaign resumed on a newer tool). None for the
    baseline and rounds without a paired decision."""
    entry = c.state.closed_round(n)
    if n <= 1 or (entry is not None and entry.chain_kept):
        return entry.paired_chain if entry is not None else None
    path = c.round_dir(n) / "round.json"
    if not path.exists():
        return None
    return paired_chain(c, read_record(path))


def after_round(c: Campaign, n: int) -> list[str]:
    """Stagnation review and termination check; returns warnings for the driver."""
    warnings = []
    k = c.state.consecutive_rollbacks
    opt = c.log("logs/optimize.md")
    if k >= 2 and not opt.contains(f"### Stagnation review after round-{n}"):
        step = ESCALATION.get(k, "compare against the best reference kernel and change approach")
        text = (
            f"### Stagnation review after round-{n}\n{k} consecutive rollbacks. Required: "
            f"{step}. Re-analyze and list at least three fundamentally different "
            "directions before the next round.\n\n"
        )
        opt.append(text)
        warnings.append(text.strip())
    term = termination(c)
    if term and not c.state.termination:
        c.state.termination = term
        opt.append(f"## Termination check\n{term.code} at {term.at}: {term.reason}\n\n")
        warnings.append(f"termination {term.code}: {term.reason}; run `ratchet report`")
    return warnings


def termination(c: Campaign) -> Termination | None:
    """T1 (performance target), T2 (fraction of the hardware peak) or T3 (max_iterations)
    when one holds, else None."""
    st, m = c.state, c.m
    inc = st.closed_round(st.incumbent_round or 1)
    chain = inc.paired_chain if inc else None  # the paired estimate; else the harness CSVs'
    gain = (chain if chain is not None else (inc.vs_baseline if inc else None)) or 0.0
    base = aggregates(c.baseline_table(), m.campaign_type).primary_avg
    estimate = base * (1.0 + gain)
    if m.performance_target and estimate >= m.performance_target:
        return Termination(
            "T1",
            now(),
            f"performance target {m.performance_target}"
            f" reached (estimated full-set aggregate {estimate:.2f})",
        )
    if (
        m.efficiency_target
        and m.hardware_peak
        and estimate / m.hardware_peak >= m.efficiency_target
    ):
        return Termination(
            "T2",
            now(),
            f"{estimate / m.hardware_peak:.1%} of the hardware peak {m.hardware_peak} reached",
        )
    done = sum(1 for r in st.closed if r.round > 1)
    if done >= m.max_iterations:
        return Termination("T3", now(), f"max_iterations {m.max_iterations} reached")
    return None
