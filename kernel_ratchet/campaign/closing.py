"""Closing a round: its summary, trend row, log section and tip; then the stagnation review and
the termination check (T1-T4). Every write here is idempotent so a recovered round can be
closed again without duplicating anything.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.records import (
    RoundView,
    ShapeLine,
    optimize_round,
    summary_md,
    trend_row,
    vs_baseline,
)
from kernel_ratchet.campaign.tips import add_tip, tips_path
from kernel_ratchet.guard import StaticAudit, transfer_check
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates, primary_value

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign

ROOT_CAUSES = {
    "scope": "the change touched files outside kernel_source",
    "build": "the rebuild command failed",
    "test": "the focused test failed (correctness gate)",
    "harness": "the harness crashed or produced no CSV",
    "schema": "the benchmark CSV does not match the frozen schema",
    "correctness": "a shape failed the harness correctness check (Check=FAIL)",
    "regression": "at least one shape regressed by 5% or more",
    "noise": "the gain is inside the measured noise band",
    "no-gain": "the aggregate did not improve",
    "interrupted": "the round was interrupted before its decision",
    "unconfirmed": "a gain above 1.5x did not hold when re-measured in fresh processes",
    "incumbent": "the incumbent could not be measured (infrastructure, not the candidate)",
    "hang": "the candidate hung (worker time limit)",
    "crash": "the candidate crashed its worker process",
    "illegal_memory": "the candidate made an illegal memory access",
    "oom": "the candidate ran out of device memory",
    "compile": "the candidate failed to compile",
    "nan": "the candidate produced NaN",
    "cheat": "the anti-cheat checks rejected the candidate",
    "wrong": "the candidate's output is wrong",
}

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


def view(c: Campaign, record: dict[str, Any]) -> RoundView:
    table = c.table(record["csv"]) if record.get("csv") else None
    per = {s["label"]: s for s in ((record.get("decision") or {}).get("per_shape") or [])}
    lines, agg, vb, vi = [], None, None, None
    if table is not None:
        for r in table.rows:
            s = per.get(r.label, {})
            snr = ", ".join(f"{k}={v:.1f}" for k, v in r.snr.items() if not math.isnan(v))
            value = primary_value(r, c.m.campaign_type)[0] if r.passed else math.nan
            ci = s.get("ci")
            verdict = s.get("verdict", "-")
            if ci:  # paired A/B: the delta is the median per-round speed ratio, with its CI
                verdict += f" (CI {ci[0] * 100:+.2f}%..{ci[1] * 100:+.2f}%, {s['rounds']} rounds)"
            lines.append(
                ShapeLine(
                    r.label, r.check, value, s.get("incumbent"), s.get("delta"), verdict, snr or "-"
                )
            )
        agg = aggregates(table, c.m.campaign_type).primary_avg
        step, fwd, _ = vs_base(c, table)
        vb = step if c.m.campaign_type != "compute_fwd" else fwd
        d = record.get("decision")
        vi = d["gain"] if d else None
    notes = []
    if record.get("escalated"):
        notes.append(
            f"Quick gain was under 5%: escalated to full validation "
            f"(quick CSV: {record['quick_csv']})"
        )
    if record.get("incumbent_csv"):
        notes.append(f"Incumbent numbers from {record['incumbent_csv']}")
    if (record.get("decision") or {}).get("paired"):
        notes.append(
            "Decided by the paired A/B (artifacts/paired.json): Delta and the CIs are "
            "median per-round speed ratios; the absolute numbers and 'vs baseline' "
            "come from harness runs in other sessions: diagnostics only"
        )
    status = record["status"]
    return RoundView(
        n=record["round"],
        status=status,
        hypothesis=record["hypothesis"],
        bucket=record["bucket"],
        change=record["change"],
        started=record["started"],
        finished=record["finished"],
        level=record["level"],
        test_command=record["test_command"],
        harness_command=record["harness_command"] or "-",
        metric=c.m.primary_metric,
        shapes=lines,
        aggregate=agg,
        vs_baseline=vb,
        vs_incumbent=vi,
        reason=record["reason"],
        attribution=_attribution(record),
        next_direction=record.get("next_direction") or "to be chosen by the driver",
        expected=record.get("expected", ""),
        lesson=record.get("lesson", ""),
        root_cause=ROOT_CAUSES.get(record["category"], record["category"]),
        transfer=transfer_of(record),
        notes=notes,
    )


def transfer_of(record: dict[str, Any]) -> dict[str, str]:
    """The round's ``Real-training transfer check`` values (SPEC section 8)."""
    if record["status"] == Status.BASELINE.value or not record.get("transfer_static"):
        return {"Bucket": f"{record['bucket']} (declared; not audited: no candidate change)"}
    static = StaticAudit(**record["transfer_static"])
    d = record.get("decision") or {}
    skew = tuple(d["skew"]) if d.get("skew") else None
    t = transfer_check(static, None, float(d.get("gain") or 0.0), skew=skew)
    dyn = d.get("dynamic")
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


def _attribution(record: dict[str, Any]) -> str:
    d = record.get("decision")
    if record["status"] == Status.BASELINE.value:
        return "Baseline: nothing to attribute."
    if not d or not d["per_shape"]:
        return f"No measurement to attribute ({record['category']})."
    best = max(d["per_shape"], key=lambda s: s["delta"])
    worst = min(d["per_shape"], key=lambda s: s["delta"])
    return (
        f"Best shape {best['label']} ({best['delta'] * 100:+.2f}%), worst shape "
        f"{worst['label']} ({worst['delta'] * 100:+.2f}%); aggregate "
        f"{d['gain'] * 100:+.2f}% (noise ±{d['gain_noise'] * 100:.2f}%)."
    )


def trend_line(c: Campaign, record: dict[str, Any], v: RoundView) -> str:
    table = c.table(record["csv"]) if record.get("csv") else None
    aggs = aggregates(table, c.m.campaign_type) if table is not None else None
    if record["status"] == Status.BASELINE.value:
        vb = "—"
    elif table is not None:
        vb = vs_baseline(*vs_base(c, table))
    else:
        vb = vs_baseline(None, None, None)
    finding = record["reason"].split(";")[0]
    return trend_row(
        record["round"],
        record["status"],
        record["hypothesis"],
        aggs,
        c.m.campaign_type,
        vb,
        finding,
    )


def write_records(c: Campaign, n: int, record: dict[str, Any], commit: str | None) -> None:
    v = view(c, record)
    if commit:
        v.notes.append(f"Commit: {commit}")
    summary = c.round_dir(n) / "summary.md"
    if not summary.exists():
        atomic_write_text(summary, summary_md(v))
    trend = c.log("logs/performance_trend.md")
    if not trend.contains(f"| round-{n} |"):
        trend.append(trend_line(c, record, v))
    opt = c.log("logs/optimize.md")
    if not opt.contains(f"## Round {n} — "):
        opt.append(optimize_round(v))
    if record.get("takeaway"):
        path = tips_path(
            c.profile.tips_root_path, c.m.target_gpu, c.m.target_op, c.m.target_backend
        )
        if f"round-{n} — " not in (path.read_text() if path.exists() else ""):
            add_tip(
                path,
                n,
                record["status"],
                f"{c.m.campaign}: {record['hypothesis']}",
                record["reason"],
                record["takeaway"],
                f"{c.m.target_op} on {c.m.target_gpu}",
            )


def closed_entry(c: Campaign, record: dict[str, Any], commit: str | None = None) -> dict:
    d = record.get("decision") or {}
    vb = None
    if record.get("csv"):
        step, fwd, _ = vs_base(c, c.table(record["csv"]))
        vb = step if c.m.campaign_type != "compute_fwd" else fwd
    return {
        "round": record["round"],
        "status": record["status"],
        "level": record["level"],
        "category": record["category"],
        "hypothesis": record["hypothesis"],
        "gain": d.get("gain"),
        "vs_baseline": vb,
        "paired_chain": paired_chain(c, record),
        "commit": commit,
        "finished": record.get("finished"),
    }


def paired_chain(c: Campaign, record: dict[str, Any]) -> float | None:
    """The round's candidate against the BASELINE through the paired A/Bs: its own paired
    ratio against its incumbent times the incumbent's chain (the baseline's is 1), minus 1.
    None for a round without a paired decision. ``vs_baseline`` compares two single harness
    CSVs measured at different times instead; this is the estimate the decisions stand on."""
    d = record.get("decision") or {}
    if not d.get("paired") or d.get("gain") is None:
        return None
    base = chain_of(c, record.get("incumbent_round") or 1)
    return (1.0 + (base or 0.0)) * (1.0 + d["gain"]) - 1.0


def chain_of(c: Campaign, n: int) -> float | None:
    """Closed round ``n``'s paired chain: its entry's, or rebuilt from its record when it was
    closed before the chain was kept (a campaign resumed on a newer tool). None for the
    baseline and rounds without a paired decision."""
    entry = c.state.closed_round(n) or {}
    if n <= 1 or "paired_chain" in entry:
        return entry.get("paired_chain")
    path = c.round_dir(n) / "round.json"
    if not path.exists():
        return None
    from kernel_ratchet.campaign.rounds import load_record

    return paired_chain(c, load_record(path))


def after_round(c: Campaign, n: int, record: dict[str, Any]) -> list[str]:
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
        opt.append(f"## Termination check\n{term['code']} at {term['at']}: {term['reason']}\n\n")
        warnings.append(f"termination {term['code']}: {term['reason']}; run `ratchet report`")
    return warnings


def termination(c: Campaign) -> dict[str, str] | None:
    st, m = c.state, c.m
    inc = st.closed_round(st.incumbent_round or 1) or {}
    chain = inc.get("paired_chain")  # the paired estimate; else the harness CSVs'
    gain = (chain if chain is not None else inc.get("vs_baseline")) or 0.0
    base = aggregates(c.baseline_table(), m.campaign_type).primary_avg
    estimate = base * (1.0 + gain)
    if m.performance_target and estimate >= m.performance_target:
        return {
            "code": "T1",
            "at": now(),
            "reason": f"performance target {m.performance_target}"
            f" reached (estimated full-set aggregate {estimate:.2f})",
        }
    if (
        m.efficiency_target
        and m.hardware_peak
        and estimate / m.hardware_peak >= m.efficiency_target
    ):
        return {
            "code": "T2",
            "at": now(),
            "reason": f"{estimate / m.hardware_peak:.1%} of the "
            f"hardware peak {m.hardware_peak} reached",
        }
    done = sum(1 for r in st.closed if r["round"] > 1)
    if done >= m.max_iterations:
        return {"code": "T3", "at": now(), "reason": f"max_iterations {m.max_iterations} reached"}
    return None
