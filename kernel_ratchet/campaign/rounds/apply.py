"""Applying a round's decision to the project: an ACCEPTED round becomes one commit of the
kernel files (SPEC section 4's message), a rolled-back one restores the incumbent's kernel
files. Both are safe to repeat after a crash."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import incumbent_commit, restore_incumbent
from kernel_ratchet.campaign.lineage.workspace import is_workspace
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.campaign.render import commit_message, round_record
from kernel_ratchet.campaign.seal import commit_trailers

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def _committed_change(c: CampaignContext) -> str:
    """A note when the rolled-back change is also in a commit of the user's since the
    incumbent's: the kernel files are restored in the working tree only."""
    if is_workspace(c.m):
        return ""
    done = sorted(set(git.committed_since(c.groot, incumbent_commit(c))) & set(c.kernel_git))
    if not done:
        return ""
    return (
        f"; it is also in your commit {git.head(c.groot)[:12]}, so the restored "
        f"{', '.join(done)} {'is' if len(done) == 1 else 'are'} uncommitted: commit "
        f"{'it' if len(done) == 1 else 'them'} to take the change off the branch"
    )


def apply(c: CampaignContext, record: RoundRecord) -> str | None:
    """Commit an accepted round (with ``git_commit``) or restore the incumbent; returns the
    commit's sha (None: nothing committed)."""
    if not record.accepted:
        restore_incumbent(c)
        snap = os.path.relpath(c.round_dir(record.round) / "kernel_snapshot", c.root)
        state = "rolled back, not committed" if record.rehearsal else "the kernel files restored"
        c.say(
            f"round-{record.round}: {record.label}: {state}; the change is kept in {snap} "
            f"(and artifacts/candidate.diff beside it){_committed_change(c)}"
        )
        return None
    if not c.m.git_commit:
        return None
    n, d = record.round, record.decision
    msg = commit_message(
        c.m.target_op,
        c.m.target_backend,
        n,
        record.summary or record.hypothesis,
        record.hypothesis,
        d.aggregate_before,
        d.aggregate_after,
        f"{os.path.relpath(c.dir, c.groot)}/logs/optimize.md",
        metric=f"{c.m.primary_metric} ({'paired A/B' if d.paired else 'harness CSVs'})",
        gain=d.gain,
        record=round_record(c.m.campaign, n),
    )
    trailers = commit_trailers(c, n)  # what the records of this round must stay
    if _committed_before(c, n, trailers):
        return git.head(c.groot)  # committed before a crash
    return git.commit_only(c.groot, c.kernel_git, msg + trailers) or git.head(c.groot)


def _committed_before(c: CampaignContext, n: int, trailers: str) -> bool:
    """Whether HEAD is this very round's commit, made before a crash: its subject names the
    round and it carries the round's sealed trailers. The subject alone is not enough: the
    start of a second campaign on the same op may be an earlier campaign's commit of the same
    round number, and taking it for this round's would leave the change uncommitted."""
    message = git.log_message(c.groot)
    marker = f"[optimize] {c.m.target_op} {c.m.target_backend} round-{n}:"
    lines = set(message.splitlines())
    return message.startswith(marker) and all(t in lines for t in trailers.split("\n") if t)
