"""The campaign's ``optimize/`` branch when the campaign ends.

``ratchet init`` creates the branch at the starting commit and switches to it. A campaign that
ends with nothing committed on it would leave an empty branch behind, one per campaign, and the
project on it; at the end the project goes back to the branch it started from (when that
branch's tip is still the starting commit, so no file changes), and the empty branch is
deleted then, and only then: a branch that holds a commit beyond the starting commit, is checked
out, or whose tip no other branch or tag holds, is kept, and the caller says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.errors import GitError

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def drop_empty_branch(c: CampaignContext) -> str:
    """Hand the project back on its starting branch and delete the campaign's branch when it
    holds no work (see the module); returns what was done, one sentence for the output (""
    when the campaign has no branch, or it is gone)."""
    name, start = c.m.branch_name, c.m.starting_commit
    if not name or not start or not git.branch_exists(c.groot, name):
        return ""
    short = start[:12]
    try:
        beyond = git.commits_beyond(c.groot, start, name)
    except GitError as exc:  # the start rewritten away: nothing to compare with, nothing lost
        return f"branch {name} kept: it could not be compared with the start {short} ({exc})"
    if beyond:
        return f"branch {name} kept: it holds {beyond} commit(s) beyond the start {short}"
    back = _switch_back(c, name, start)
    where = git.checked_out_at(c.groot, name)
    if where is not None:
        return (
            f"branch {name} kept: it is checked out in {where}. It holds no commit beyond the "
            f"start {short}: switch to another branch, then `git branch -D {name}` removes it"
            + back
        )
    if not git.held_elsewhere(c.groot, name):
        return f"branch {name} kept: no other branch or tag holds its commit {short}" + back
    git.delete_branch(c.groot, name)
    return f"branch {name} deleted: it held no commit beyond the start {short}" + back


def _switch_back(c: CampaignContext, name: str, start: str) -> str:
    """Switch the project from the empty branch ``name`` back to the branch the campaign
    started from, where its tip is still ``start`` (the working tree and its changes stay as
    they are); returns what to add to the sentence ("" when the campaign did not record one)."""
    orig = c.m.original_branch
    if not orig or orig == name:
        return ""
    if git.current_branch(c.groot) != name or not git.branch_exists(c.groot, orig):
        return f" (the campaign started on {orig})"
    if git.git(c.groot, "rev-parse", f"refs/heads/{orig}").strip() != start:
        return f" (the campaign started on {orig})"
    try:
        git.git(c.groot, "switch", "--", orig)
    except GitError as exc:  # e.g. checked out in another worktree
        return f" (the campaign started on {orig}; switching back failed: {exc})"
    return f"; no round was accepted, so the project is back on {orig}"
