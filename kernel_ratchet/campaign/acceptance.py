"""ACCEPTANCE (SPEC section 2): back in the project after the REPORT. The full test suite
must pass, the diff against the starting commit must touch only kernel files, and the working
tree's kernel files must equal the incumbent's."""

from __future__ import annotations

import os
from dataclasses import dataclass

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import CampaignContext
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import incumbent_commit, kernel_changed
from kernel_ratchet.campaign.state import Phase
from kernel_ratchet.campaign.steps import run_step
from kernel_ratchet.errors import CampaignError


@dataclass(frozen=True)
class Acceptance:
    """ACCEPTANCE's verdict: ``details`` are its log lines, ``log`` the full test's log (relative
    to the project root)."""

    ok: bool
    details: tuple[str, ...]
    log: str


def accept(c: CampaignContext) -> Acceptance:
    """ACCEPTANCE: full_test passes and the diff since the start touches only kernel files.
    Raises CampaignError before the REPORT."""
    if c.state.phase is Phase.OPTIMIZING:
        raise CampaignError("run `ratchet report` first: acceptance reviews a finished campaign")
    if c.state.phase is not Phase.TERMINATED and c.state.phase is not Phase.ACCEPTED:
        raise CampaignError("the campaign has no report yet")
    if not (c.dir / "report" / "benchmark_full.csv").exists():
        raise CampaignError(
            "the campaign was closed without a final validation (`ratchet close`): nothing "
            "measured its incumbent at the end, so it cannot be accepted. Start a new campaign "
            "from the incumbent (`ratchet init --op OP`) and end it with `ratchet report`"
        )
    _require_incumbent_checked_out(c)
    log = c.dir / "report" / "full_test.log"
    c.say(f"ACCEPTANCE: {c.profile.full_test}")
    t = run_step("full test", c.profile.full_test, cwd=c.profile.root, log_path=log, timeout_s=7200)
    changed = git.git(c.groot, "diff", "--name-only", c.m.starting_commit or "HEAD", "HEAD")
    outside = sorted(set(changed.split()) - set(c.kernel_git))
    pending = kernel_changed(c)
    ok = t.ok and not outside and not pending
    lines = [
        f"- Full test `{c.profile.full_test}`: {'PASS' if t.ok else 'FAIL'} ({t.reason})",
        f"- Files changed since {c.m.starting_commit}: "
        f"{', '.join(sorted(set(changed.split()))) or 'none'}",
        f"- Outside kernel_source: {', '.join(outside) or 'none'}",
        f"- Working tree kernel files equal the incumbent: {not pending}",
    ]
    if outside:
        start = (c.m.starting_commit or "HEAD")[:12]
        lines.append(
            f"- To pass: restore them as they were when the campaign started (git checkout "
            f"{start} -- {' '.join(outside)}, then commit), and run `ratchet accept` again"
        )
    c.log("logs/optimize.md").append(
        f"## Acceptance ({now()}) — {'PASSED' if ok else 'FAILED'}\n" + "\n".join(lines) + "\n\n"
    )
    if ok:
        c.state.phase = Phase.ACCEPTED
    c.save()
    return Acceptance(ok, tuple(lines), os.path.relpath(log, c.root))


def _require_incumbent_checked_out(c: CampaignContext) -> None:
    """Raise CampaignError, before anything runs or is written, unless HEAD holds the
    campaign's incumbent (its branch, or a branch it was merged into): acceptance on another
    checkout would test a tree the campaign never made and record that it failed."""
    commit = incumbent_commit(c)
    if not commit:
        return
    if git.is_ancestor(c.groot, commit):
        return
    branch = c.m.branch_name or "the campaign's branch"
    raise CampaignError(
        f"HEAD ({git.current_branch(c.groot)}) does not hold the campaign's incumbent "
        f"{commit[:12]} (branch {branch}); nothing was run or recorded. Run `git checkout "
        f"{branch}` (or merge it into this branch) and run `ratchet accept` again"
    )
