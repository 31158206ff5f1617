"""REPORT: the end of a campaign (SPEC section 7's final report).

:func:`report` measures the incumbent on the full target set, compares it with the baseline
shape by shape, and appends the final sections to ``logs/optimize.md`` (current best, directions
to try, verified-ineffective directions, termination check, final report); it ends the
campaign (T4 when no other condition held). The text is :mod:`kernel_ratchet.report.render`'s.
:func:`close` ends a campaign that cannot be measured any more (its baseline or the incumbent's
full validation fails) without a final table, every record kept. Both end a campaign that
committed nothing on the branch it started from, its own empty branch deleted
(:mod:`kernel_ratchet.campaign.lineage.branch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.candidate import remove_slots
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import CampaignContext
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.lineage.branch import drop_empty_branch
from kernel_ratchet.campaign.lineage.kernel import kernel_changed
from kernel_ratchet.campaign.lineage.worktree import remove_incumbent_tree
from kernel_ratchet.campaign.quick_bench import run_harness, write_provenance
from kernel_ratchet.campaign.seal import seal_report, verify_records
from kernel_ratchet.campaign.state import Phase, State, Termination
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.report.render import render_closed, render_report
from kernel_ratchet.scoring.decision import Status

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign


def _final_table(c: CampaignContext) -> BenchTable:
    rdir = c.dir / "report"
    csv = rdir / "benchmark_full.csv"
    c.say("REPORT: full validation of the incumbent on all target shapes")
    h = run_harness(c, "full", csv, rdir / "harness.log")
    if not h.ok or not csv.exists():
        raise CampaignError(
            f"REPORT: the full validation of the incumbent failed: {h.reason}. Fix what it "
            "names and run `ratchet report` again, or end the campaign without a final table "
            "with `ratchet close --reason TEXT` (every record is kept)"
        )
    write_provenance(c, rdir, "full")
    return c.table(c.rel(csv))


@dataclass(frozen=True)
class Reported:
    """What ``report`` did: the report's text, whether any round was accepted (what
    ``ratchet accept`` would take) and, in one sentence, what became of the campaign's branch
    ("" without one, or when the report was written before)."""

    text: str
    accepted: bool
    branch: str = ""


def accepted_any(state: State) -> bool:
    """Whether any round of the campaign was accepted."""
    return any(e.status is Status.ACCEPTED for e in state.closed)


def report(c: Campaign, stop: tuple[str, str] | None = None) -> Reported:
    """Write the final report (idempotent once written), then hand a campaign that committed
    nothing back on its starting branch (:func:`.lineage.branch.drop_empty_branch`).

    ``stop`` = (code, reason) records why a driver ends a campaign that no termination
    condition ended yet (default: T4, the user asked to stop).
    """
    path = _ending(c)
    accepted = accepted_any(c.state)
    if c.state.phase in (Phase.TERMINATED, Phase.ACCEPTED) and path.exists():
        return Reported(path.read_text(), accepted)
    if c.state.phase is not Phase.OPTIMIZING:
        raise CampaignError(
            "no baseline yet: nothing to report (run `ratchet baseline`, or end the campaign "
            "with `ratchet close --reason TEXT` when its baseline cannot pass)"
        )
    if kernel_changed(c.ctx):
        raise CampaignError(
            "the kernel files hold a change that no round validated; run `ratchet validate` "
            "on it or restore the incumbent's files before the report"
        )
    table = _final_table(c.ctx)  # interrupted or failed, the campaign stays open
    _terminate(c, *(stop or ("T4", "the user asked to stop (ratchet report)")))
    text = _write(c, render_report(c.ctx, table))
    remove_incumbent_tree(c.ctx)  # ended: the paired A/B's incumbent tree goes
    return Reported(text, accepted, drop_empty_branch(c.ctx))


@dataclass(frozen=True)
class Closed:
    """What ``close`` did: the report's text and, in one sentence, what became of the
    campaign's branch ("" without one; see :mod:`kernel_ratchet.campaign.lineage.branch`)."""

    text: str
    branch: str


def close(c: Campaign, reason: str) -> Closed:
    """End a campaign that cannot be reported (its baseline or the incumbent's full validation
    fails): T4 with ``reason``, a report without a final table, every record kept; its branch
    deleted when it holds no work. Acceptance refuses such a campaign (nothing validated its
    end)."""
    if not reason.strip():
        raise CampaignError("say why the campaign is closed: ratchet close --reason TEXT")
    path = _ending(c)
    if c.state.phase in (Phase.TERMINATED, Phase.ACCEPTED):
        raise CampaignError(f"the campaign has ended already ({c.state.phase.value}): see {path}")
    _terminate(c, "T4", f"closed without a final validation: {reason.strip()}")
    text = _write(c, render_closed(c.ctx, reason.strip()))
    remove_incumbent_tree(c.ctx)
    return Closed(text, drop_empty_branch(c.ctx))


def _ending(c: Campaign):
    """What every end does first: finish an interrupted round, remove the parallel
    candidates' worktrees, verify the records; returns the report's path."""
    c.recover()
    remove_slots(c.ctx)  # the campaign ends: its parallel candidates' worktrees go
    verify_records(c.ctx)  # the REPORT must not stand on an edited log or round record
    return c.dir / "report.md"


def _terminate(c: Campaign, code: str, why: str) -> None:
    """Record why the campaign ends, unless a termination condition already did."""
    if c.state.termination:
        return
    c.state.termination = Termination(code, now(), why)
    c.log("logs/optimize.md").append(
        f"## Termination check\n{code} at {c.state.termination.at}: {why}\n\n"
    )
    c.save()


def _write(c: Campaign, text: str) -> str:
    """Append the final report to the log once, write and seal ``report.md``, end the campaign."""
    opt = c.log("logs/optimize.md")
    if not opt.contains("## Final report"):
        opt.append(text)
    atomic_write_text(c.dir / "report.md", text)
    seal_report(c.ctx)
    c.state.phase = Phase.TERMINATED
    c.save()
    return text
