"""REPORT: the end of a campaign (SPEC section 7's final report).

:func:`report` measures the incumbent on the full target set, compares it with the baseline
shape by shape, and appends the final sections to ``logs/optimize.md`` (current best, directions
to try, verified-ineffective directions, termination check, final report); it ends the
campaign (T4 when no other condition held). The text is :mod:`kernel_ratchet.report.render`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_ratchet.campaign.candidate import remove_slots
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import CampaignContext
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.lineage.kernel import kernel_changed
from kernel_ratchet.campaign.quick_bench import run_harness, write_provenance
from kernel_ratchet.campaign.seal import seal_report, verify_records
from kernel_ratchet.campaign.state import Phase, Termination
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.report.render import render_report

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign


def _final_table(c: CampaignContext) -> BenchTable:
    rdir = c.dir / "report"
    csv = rdir / "benchmark_full.csv"
    c.say("REPORT: full validation of the incumbent on all target shapes")
    h = run_harness(c, "full", csv, rdir / "harness.log")
    if not h.ok or not csv.exists():
        raise CampaignError(f"REPORT: the full validation of the incumbent failed: {h.reason}")
    write_provenance(c, rdir, "full")
    return c.table(c.rel(csv))


def report(c: Campaign, stop: tuple[str, str] | None = None) -> str:
    """Write the final report (idempotent once written); returns its text.

    ``stop`` = (code, reason) records why a driver ends a campaign that no termination
    condition ended yet (default: T4, the user asked to stop).
    """
    c.recover()
    remove_slots(c.ctx)  # the campaign ends: its parallel candidates' worktrees go
    verify_records(c.ctx)  # the REPORT must not stand on an edited log or round record
    path = c.dir / "report.md"
    if c.state.phase in (Phase.TERMINATED, Phase.ACCEPTED) and path.exists():
        return path.read_text()
    if c.state.phase is not Phase.OPTIMIZING:
        raise CampaignError("no baseline yet: nothing to report (run `ratchet baseline`)")
    if kernel_changed(c.ctx):
        raise CampaignError(
            "the kernel files hold a change that no round validated; run `ratchet validate` "
            "on it or restore the incumbent's files before the report"
        )
    if not c.state.termination:
        code, why = stop or ("T4", "the user asked to stop (ratchet report)")
        c.state.termination = Termination(code, now(), why)
        c.log("logs/optimize.md").append(
            f"## Termination check\n{code} at {c.state.termination.at}: "
            f"{c.state.termination.reason}\n\n"
        )
        c.save()
    final = _final_table(c.ctx)
    text = render_report(c.ctx, final)
    opt = c.log("logs/optimize.md")
    if not opt.contains("## Final report"):
        opt.append(text)
    atomic_write_text(path, text)
    seal_report(c.ctx)
    c.state.phase = Phase.TERMINATED
    c.save()
    return text
