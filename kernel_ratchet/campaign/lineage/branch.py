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
    """Delete the campaign's branch when it holds no work (see the module); returns what was
    done, one sentence for the output ("" when the campaign has no branch, or it is gone)."""
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
    where = git.checked_out_at(c.groot, name)
    if where is not None:
        return (
            f"branch {name} kept: it is checked out in {where}. It holds no commit beyond the "
            f"start {short}: switch to another branch, then `git branch -D {name}` removes it"
        )
    if not git.held_elsewhere(c.groot, name):
        return f"branch {name} kept: no other branch or tag holds its commit {short}"
    git.delete_branch(c.groot, name)
    return f"branch {name} deleted: it held no commit beyond the start {short}"


def leave_empty_branch(c: CampaignContext) -> str:
    """At the end of a campaign that committed nothing: switch the project back to the branch
    it started from when that is safe (its tip is still the starting commit, so the working
    tree and its changes stay as they are), then :func:`drop_empty_branch`. Returns what was
    done, one sentence ("" when the campaign has no branch)."""
    name, start, orig = c.m.branch_name, c.m.starting_commit, c.m.original_branch
    if not name or not start or not git.branch_exists(c.groot, name):
        return ""
    try:
        beyond = git.commits_beyond(c.groot, start, name)
    except GitError:  # the start rewritten away: drop_empty_branch says so
        beyond = -1
    if beyond:
        return drop_empty_branch(c)  # kept, and says why
    back = ""
    if (
        orig
        and orig != name
        and git.current_branch(c.groot) == name
        and git.branch_exists(c.groot, orig)
        and git.git(c.groot, "rev-parse", f"refs/heads/{orig}").strip() == start
    ):
        try:
            git.git(c.groot, "switch", "--", orig)
            back = f"; no round was accepted, so the project is back on {orig}"
        except GitError as exc:  # e.g. checked out in another worktree
            back = f" (the campaign started on {orig}; switching back failed: {exc})"
    elif orig and orig != name:
        back = f" (the campaign started on {orig})"
    return drop_empty_branch(c) + back
