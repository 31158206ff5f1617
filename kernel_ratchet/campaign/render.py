"""Rendering of the campaign's records (SPEC sections 4, 6, 7): trend rows, round summaries,
optimization-log sections, tips entries and the commit message. Pure functions: text in, text
out; writing them is the engine's job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernel_ratchet.campaign.record import OVERLAP_STEP
from kernel_ratchet.guard.transfer import TRANSFER_KEYS
from kernel_ratchet.scoring.metrics import Aggregates

TREND_TITLE = (
    "# Performance trend\n\n"
    "Avg, Peak, Combined and vs Baseline are each round's own harness run, a diagnostic; "
    "Key Finding gives the decision of the paired A/B, whose chain is the campaign's "
    "headline (`ratchet report`).\n\n"
)
CPU_NOTE = (
    "- CPU rehearsal: kernels run in the Triton interpreter; its timings rank nothing on "
    "a GPU and are meaningless for tuning\n"
)
REHEARSAL_NOTE = (
    "- REHEARSAL: every round is rolled back whatever its timings say (a would-be accept "
    "is labelled `REHEARSAL: would accept`), never committed, never counted as a gain\n"
)


def unit(campaign_type: str) -> str:
    """The primary unit of ``campaign_type``: GB/s for memory ops, else TFLOPS."""
    return "GB/s" if campaign_type == "memory" else "TFLOPS"


def trend_header(campaign_type: str) -> str:
    """The title row of the trend table (SPEC section 6) in the campaign's unit."""
    u = unit(campaign_type)
    step = "Combined GB/s" if campaign_type == "memory" else "Combined Step TFLOPS"
    cols = [
        "Round",
        "Status",
        "Description",
        f"Fwd Avg {u}",
        f"Fwd Peak {u}",
        f"Bwd Avg {u}",
        f"Bwd Peak {u}",
        step,
        "vs Baseline",
        "Key Finding",
    ]
    return "| " + " | ".join(cols) + " |\n" + "|" + "---|" * len(cols) + "\n"


def num(x: float | None, digits: int = 2) -> str:
    """A metric value: ``digits`` decimals, or 3 significant digits below 1 (CPU rehearsals)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}" if abs(x) >= 1 or x == 0 else f"{x:.3g}"


def pct(x: float | None, digits: int = 3) -> str:
    """A fraction as a signed percentage with ``digits`` decimals ('-' when absent)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x * 100:+.{digits}f}%"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "/")


def vs_baseline(step: float | None, fwd: float | None, bwd: float | None) -> str:
    """``step ±x.xxx%, fwd ±y.yyy%, bwd ±z.zzz%`` (fractions in, '-' where absent)."""
    return f"step {pct(step)}, fwd {pct(fwd)}, bwd {pct(bwd)}"


def trend_row(
    n: int,
    status: str,
    description: str,
    aggs: Aggregates | None,
    campaign_type: str,
    vs_base: str,
    key_finding: str,
) -> str:
    """One row of ``logs/performance_trend.md`` (``aggs`` None: nothing measured)."""
    if aggs is None:
        cells = ["-"] * 5
    else:
        step = aggs.primary_avg if campaign_type != "compute_fwd" else None
        cells = [
            num(aggs.fwd_avg),
            num(aggs.fwd_peak),
            num(aggs.bwd_avg),
            num(aggs.bwd_peak),
            num(step),
        ]
    parts = [f"round-{n}", status, _cell(description), *cells, vs_base, _cell(key_finding)]
    return "| " + " | ".join(parts) + " |\n"


@dataclass(frozen=True)
class ShapeLine:
    """One row of a summary's per-shape table."""

    label: str
    check: str
    candidate: float
    incumbent: float | None
    delta: float | None
    verdict: str
    snr: str
    harness: float | None = None  # a paired round's own harness run (candidate and incumbent
    # are then the paired A/B's)
    phases: str = ""  # a paired round's per-phase speed change ("fwd +4.03%, bwd -0.62%")
    # a paired round's per-phase times, ms: side -> phase -> (median, fastest, slowest)
    phase_ms: Mapping[str, Mapping[str, tuple[float, float, float]]] | None = None


@dataclass
class RoundView:
    """Everything a round summary shows. Built by the engine from the frozen round record."""

    n: int
    status: str
    hypothesis: str
    bucket: str
    change: str
    started: str
    finished: str
    level: str
    test_command: str
    harness_command: str
    metric: str
    shapes: list[ShapeLine]
    aggregate: float | None
    vs_baseline: float | None
    vs_incumbent: float | None
    reason: str
    attribution: str
    next_direction: str
    expected: str = ""
    lesson: str = ""
    root_cause: str = ""
    transfer: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    paired: bool = False  # the shapes' candidate and incumbent come from the paired A/B
    harness_aggregate: float | None = None  # a paired round's harness geomean (a diagnostic)


def _shape_table(v: RoundView) -> str:
    phased = v.paired and any(s.phases for s in v.shapes)
    if v.paired:
        head = f"| Shape | Check | {v.metric} (paired) | Incumbent (paired) | Delta | Verdict | "
        head += "Phases (paired) | " if phased else ""
        head += f"Harness {v.metric} | SNR (dB) |"
    else:
        head = f"| Shape | Check | {v.metric} | Incumbent | Delta | Verdict | SNR (dB) |"
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for s in v.shapes:
        phases = f" {s.phases or '-'} |" if phased else ""
        harness = f" {num(s.harness)} |" if v.paired else ""
        out.append(
            f"| {s.label} | {s.check} | {num(s.candidate)} | {num(s.incumbent)} | "
            f"{pct(s.delta, 2)} | {s.verdict} |{phases}{harness} {s.snr} |"
        )
    return "\n".join(out) + "\n"


def _span(t: tuple[float, float, float]) -> str:
    return f"{t[0]:.4g} ({t[1]:.4g}-{t[2]:.4g})"


def _phase_table(v: RoundView) -> str:
    """Each shape's paired times per phase, incumbent then candidate: the median and the range
    over the paired rounds (a swing a median hides shows as a wide range); "" where the round
    recorded none."""
    shapes = [s for s in v.shapes if s.phase_ms]
    phases = list(dict.fromkeys(ph for s in shapes for t in s.phase_ms.values() for ph in t))
    if not shapes or not phases:
        return ""
    head = "| Shape | " + " | ".join(f"{ph}: incumbent -> candidate" for ph in phases) + " |"
    out = [
        "\nPaired times per phase (ms: median (fastest-slowest) over the paired rounds):\n",
        head,
        "|" + "---|" * (len(phases) + 1),
    ]
    for s in shapes:
        inc, cand = s.phase_ms.get("incumbent", {}), s.phase_ms.get("candidate", {})
        cells = [
            f"{_span(inc[ph])} -> {_span(cand[ph])}" if ph in inc and ph in cand else "-"
            for ph in phases
        ]
        out.append(f"| {s.label} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _aggregate(v: RoundView) -> str:
    """The view's aggregate; "none pass" where no shape of its table passes (a BASELINE
    declared wrong on every shape)."""
    none = v.shapes and not any(s.check == "PASS" for s in v.shapes)
    return "none pass" if none else num(v.aggregate)


def _aggregate_line(v: RoundView) -> str:
    if not v.paired:
        return f"- Aggregate ({v.metric}, geomean over PASS shapes): {_aggregate(v)}\n"
    return (
        f"- Aggregate ({v.metric}, geomean over PASS shapes): {num(v.aggregate)} from the "
        f"paired A/B, candidate side; the round's harness run: {num(v.harness_aggregate)} "
        "(a diagnostic)\n"
    )


def transfer_section(t: dict[str, str]) -> str:
    """The summary's ``## Real-training transfer check`` section (SPEC section 8)."""
    lines = [f"- {k}: {t.get(k, 'not yet audited')}" for k in TRANSFER_KEYS]
    return "## Real-training transfer check\n" + "\n".join(lines) + "\n"


def _lesson(text: str) -> str:
    """The driver's lesson as said (``validate --lesson`` comes before the round ends, so the
    record says so: it may name a cause the round never reached)."""
    return f"{text} (the driver's, stated before the round)" if text else "not stated by the driver"


def summary_md(v: RoundView) -> str:
    """A round's ``summary.md`` (SPEC section 7)."""
    decision = {"BASELINE": "BASELINE", "ACCEPTED": "ACCEPTED"}.get(v.status, "ROLLED BACK")
    parts = [
        f"# round-{v.n} — {v.status}\n",
        f"## Hypothesis\n{v.hypothesis}\n\nBucket: {v.bucket}\n",
        f"## Single change\n{v.change}\n",
        "## Results\n"
        f"- Time: {v.started} → {v.finished}\n"
        f"- Validation level: {v.level}\n"
        f"- Test command: `{v.test_command}`\n"
        f"- Benchmark command: `{v.harness_command}`\n\n"
        + _shape_table(v)
        + "\n"
        + _aggregate_line(v)
        + f"- vs baseline (same shapes): {pct(v.vs_baseline)}\n"
        f"- vs incumbent: {pct(v.vs_incumbent)}\n"
        + "".join(f"- {n}\n" for n in v.notes)
        + _phase_table(v),
        f"## Decision\n{decision}: {v.reason}\n",
        f"## Attribution\n{v.attribution}\n",
        f"## Next direction\n{v.next_direction}\n",
    ]
    if decision == "ROLLED BACK":
        parts.append(
            "## Rollback Analysis\n"
            f"- Change: {v.change.splitlines()[0] if v.change else '-'}\n"
            f"- Expected: {v.expected or 'not stated by the driver'}\n"
            f"- Actual: {v.reason}\n"
            f"- Root cause: {v.root_cause}\n"
            f"- Lesson: {_lesson(v.lesson)}\n"
        )
    parts.append(transfer_section(v.transfer))
    return "\n".join(parts)


def optimize_header(m: Any, tips_path: str, tips_text: str, *, rehearsal: bool = False) -> str:
    """The first sections of ``logs/optimize.md``: basic information and the tips read."""
    shapes = ", ".join(s["label"] for s in m.target_shapes)
    tips = tips_text.strip() or "(no tips recorded yet for this GPU, op and backend)"
    return (
        f"# Optimization log: {m.campaign}\n\n## Basic information\n"
        f"- Op: {m.target_op} ({m.target_backend}, {m.target_lang}) on {m.target_gpu}\n"
        f"- Campaign type: {m.campaign_type}; primary metric: {m.primary_metric}\n"
        f"- Performance target: {m.performance_target or 'none (T1 disabled)'}; "
        f"max iterations: {m.max_iterations}\n"
        f"- Kernel source: {', '.join(m.kernel_source)}\n"
        f"- Focused test: `{m.test_command}`\n- Quick command: `{m.quick_command}`\n"
        f"- Timing engine: {m.timing_engine} {m.timing_params}\n"
        f"- Execution mode: {m.execution_mode}; git branch: {m.branch_name or 'current'}; "
        f"commit per accepted round: {m.git_commit}\n"
        f"- Target shapes ({len(m.target_shapes)}): {shapes}\n- Created: {m.created}\n"
        + (CPU_NOTE if m.target_gpu == "cpu" else "")
        + (REHEARSAL_NOTE if rehearsal else "")
        + "\n"
        f"## Historical tips\nRead from `{tips_path}` before BASELINE:\n\n{tips}\n\n"
    )


def optimize_baseline(view: RoundView, representative: Sequence[str]) -> str:
    """The baseline section of ``logs/optimize.md``."""
    return (
        f"## Baseline (round-1, {view.finished})\n\n" + _shape_table(view) + "\n"
        f"Aggregate {view.metric}: {_aggregate(view)}. "
        f"Representative shapes: {', '.join(representative)}.\n\n"
    )


def optimize_round(v: RoundView) -> str:
    """A round's section of ``logs/optimize.md``."""
    return (
        f"## Round {v.n} — {v.status} ({v.finished})\n"
        f"- Hypothesis: {v.hypothesis} [{v.bucket}]\n"
        f"- Level: {v.level}; aggregate {num(v.aggregate)} {v.metric}; "
        f"vs incumbent {pct(v.vs_incumbent)}; vs baseline {pct(v.vs_baseline)}\n"
        f"- Decision: {v.reason}\n"
        f"- Summary: rounds/round-{v.n}/summary.md\n\n"
    )


def time_line(seconds: Mapping[str, float]) -> str:
    """``"114 s: test 15, harness_quick 20, ab_quick 79"`` from a round record's ``seconds``,
    with ``other N`` where :func:`other_seconds` names time outside the steps and ``N s of the
    steps ran at once`` where some ran beside others."""
    sec = dict(seconds)
    total = sec.pop("measure", None)
    overlap = sec.pop(OVERLAP_STEP, None)
    steps = ", ".join(f"{k} {v:.0f}" for k, v in sec.items())
    if total is None:
        return steps
    other = other_seconds(seconds)
    line = f"{total:.0f} s: {steps}" + (f", other {other:.0f}" if other is not None else "")
    return line + (f"; {overlap:.0f} s of the steps ran at once" if overlap else "")


def other_seconds(seconds: Mapping[str, float]) -> float | None:
    """A round's time outside its steps (scope check and transfer audit before the test,
    decision, git and records after the A/B) where it reaches a second, else None."""
    if "measure" not in seconds:
        return None
    steps = sum(v for k, v in seconds.items() if k not in ("measure", OVERLAP_STEP))
    rest = seconds["measure"] - steps + seconds.get(OVERLAP_STEP, 0.0)
    return rest if rest >= 1.0 else None


def tip_entry(
    when: str, n: int, status: str, context: str, signal: str, takeaway: str, applicability: str
) -> str:
    """One tips entry (SPEC section 7)."""
    return (
        f"### {when} round-{n} — {status}\n- Context: {context}\n- Signal: {signal}\n"
        f"- Takeaway: {takeaway}\n- Applicability: {applicability}\n\n"
    )


def cut_words(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters at a word boundary ("..." marks the cut)."""
    if len(text) <= n:
        return text
    head = text[: n - 3].rsplit(" ", 1)[0] if " " in text[: n - 3] else text[: n - 3]
    return head.rstrip(" ,;:") + "..."


def commit_message(
    op: str,
    backend: str,
    n: int,
    summary: str,
    hypothesis: str,
    before: float,
    after: float,
    details: str,
    *,
    metric: str = "",
    gain: float | None = None,
    record: str = "",
) -> str:
    """The commit message of an accepted round (SPEC section 4). ``before``/``after`` and
    ``gain`` are the numbers the decision used (``gain`` defaults to after/before - 1);
    ``metric`` names them, after the percentage; ``record``, a line after ``Details`` saying
    where the round's summary is kept (:func:`round_record`)."""
    if gain is None:
        gain = (after / before - 1.0) if before and before > 0 else float("nan")
    one_line = cut_words(" ".join(summary.split()), 72)
    named = f" {metric}" if metric else ""
    result = f"{_value(before)} -> {_value(after)} ({gain * 100:+.1f}%){named}"
    if not math.isfinite(gain):  # a fix of a kernel that passed no shape: nothing before it
        result = f"{_value(after)}{named}; no gain: nothing before it passed the check"
    return (
        f"[optimize] {op} {backend} round-{n}: {one_line}\n\n"
        f"Hypothesis: {' '.join(hypothesis.split())}\n"
        f"Result: {result}\n"
        f"Details: {details}\n" + (f"Record: {record}\n" if record else "")
    )


def round_record(campaign: str, n: int) -> str:
    """Where a commit's reader on another clone finds round ``n``'s summary (the campaign
    directory is git-ignored): by the campaign's name and the path inside its records, the
    same in the campaign directory and in a copy ``ratchet export`` makes to commit."""
    where = f"rounds/round-{n}/summary.md"
    return f"campaign {campaign}, {where} in its records (`ratchet export` copies them)"


def _value(x: float) -> str:
    """Two decimals, or three significant digits below 1 (never ``0.00`` for a measured value);
    "none" for no value."""
    if not math.isfinite(x):
        return "none"
    return f"{x:.2f}" if abs(x) >= 1 or x == 0 else f"{x:.3g}"
