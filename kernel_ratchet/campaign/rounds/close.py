"""Closing a round: its summary, trend row, log section and tip, and its entry in the state's
index with its paired chain. Every write here is idempotent so a recovered round can be closed
again without duplicating anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.context import primary_vs_base
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.lineage.kernel import ambient
from kernel_ratchet.campaign.record import RoundRecord, read_record, write_record
from kernel_ratchet.campaign.render import optimize_baseline, optimize_round, summary_md
from kernel_ratchet.campaign.rounds.view import trend_line, view
from kernel_ratchet.campaign.scope import split_ignored
from kernel_ratchet.campaign.seal import seal_round
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.campaign.tips import add_tip, tips_path

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


#: Paths a record names in a line before it gives the rest as a count.
MAX_NAMED = 12


def listed(paths: Sequence[str]) -> str:
    """``paths`` for one line of a record: the first :data:`MAX_NAMED`, then how many more
    (``state.json``'s ``ambient`` keeps every one)."""
    more = len(paths) - MAX_NAMED
    head = ", ".join(paths[:MAX_NAMED])
    return head if more <= 0 else f"{head} and {more} more (all in state.json's `ambient`)"


def write_baseline_records(
    c: CampaignContext, record: RoundRecord, representative: Sequence[str]
) -> None:
    """Round 1's ``round.json``, summary, baseline section of the log and trend row; then its
    files are sealed."""
    rdir = c.round_dir(1)
    write_record(rdir / "round.json", record)
    v = view(c, record)
    if dirty := split_ignored(ambient(c))[0]:  # the measured tree is not only its commit
        v.notes.append(
            "Measured with changes no commit holds outside the kernel files (the tool keeps "
            f"them out of every round's scope): {listed(dirty)}"
        )
    (rdir / "summary.md").write_text(summary_md(v))
    c.log("logs/optimize.md").append(optimize_baseline(v, representative))
    c.log("logs/performance_trend.md").append(trend_line(c, record))
    seal_round(c, 1)


def write_records(c: CampaignContext, n: int, record: RoundRecord, commit: str | None) -> None:
    """The round's summary, trend row, log section and tip, each written once; then its
    files are sealed (see :mod:`~kernel_ratchet.campaign.seal`)."""
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
    seal_round(c, n)


def closed_entry(c: CampaignContext, record: RoundRecord, commit: str | None = None) -> ClosedEntry:
    """The state's index entry of a closed round."""
    vb = primary_vs_base(c, c.table(record.csv)) if record.csv else None
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
        rehearsal=record.label if record.rehearsal else None,
    )


def paired_chain(c: CampaignContext, record: RoundRecord) -> float | None:
    """The round's candidate against the BASELINE through the paired A/Bs: its own paired
    ratio against its incumbent times the incumbent's chain (the baseline's is 1), minus 1.
    None for a round without a paired decision. ``vs_baseline`` compares two single harness
    CSVs measured at different times instead; this is the estimate the decisions stand on."""
    d = record.decision
    if d is None or not d.paired or d.gain is None:
        return None
    base = chain_of(c, record.incumbent_round or 1)
    return (1.0 + (base or 0.0)) * (1.0 + d.gain) - 1.0


def chain_of(c: CampaignContext, n: int) -> float | None:
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
