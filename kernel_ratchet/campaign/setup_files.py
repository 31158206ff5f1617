"""The files that describe an op to ratchet (``ratchet.yaml``, the adapter's module) that the
starting commit of a new campaign does not hold: the campaign runs the working tree's copies
(mirrored into its worktrees), but acceptance takes only kernel files on the campaign's branch,
so they belong in a commit of the user's own branch, before ``ratchet init`` or after
``ratchet accept``."""

from __future__ import annotations

import os

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.errors import GitError
from kernel_ratchet.profile.scaffold import module_file
from kernel_ratchet.profile.schema import Profile


def uncommitted_setup(profile: Profile, op: str) -> list[str]:
    """``ratchet.yaml`` and the op's adapter module where they differ from HEAD or are
    untracked (paths relative to the project root); [] outside a git repository."""
    try:
        groot = git.toplevel(profile.root)
        changed = set(git.changed_paths(groot))
    except GitError:  # no repository: init says so itself
        return []
    adapter = profile.root / module_file(profile.root, profile.op(op).adapter)
    return [
        os.path.relpath(path, profile.root)
        for path in (profile.path, adapter)
        if os.path.relpath(path, groot) in changed
    ]


def setup_note(profile: Profile, op: str) -> str:
    """One sentence for ``ratchet init`` when :func:`uncommitted_setup` finds files; ""
    otherwise."""
    files = uncommitted_setup(profile, op)
    if not files:
        return ""
    one = len(files) == 1
    is_, it = ("is", "it") if one else ("are", "them")
    return (
        f"note: {', '.join(files)} {is_} not committed: the campaign runs the working tree's "
        f"{'copy' if one else 'copies'}, but its starting commit does not hold {it}. Commit "
        f"{it} on your own branch after `ratchet accept` (or before `ratchet init`): a commit "
        f"of {it} on the campaign's branch makes acceptance refuse the campaign, which takes "
        "kernel files only"
    )
