"""The incumbent as runnable code: a git worktree the paired A/B measures next to the candidate.

``<campaign_dir>/.incumbent`` is a detached worktree of the project. It is checked out at the
incumbent commit (or, without per-round commits, at the starting commit with the incumbent
round's kernel snapshot written over it), and the user's own uncommitted non-kernel files are
mirrored into it, so the two sides differ in the kernel files alone. The worktree belongs to
the campaign: nothing in the user's tree is touched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import incumbent_bytes
from kernel_ratchet.campaign.lineage.workspace import is_workspace

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

WORKTREE = ".incumbent"


def incumbent_tree(c: CampaignContext) -> Path:
    """Prepare the worktree and return the project root inside it (the profile's directory)."""
    return prepare_tree(c, c.incumbent_dir or c.dir / WORKTREE)


def _mirror_workspace(src: Path, root: Path, kernel: set[str]) -> None:
    """A workspace's ``src/`` is git-excluded, so a worktree of the project lacks it: copy its
    files other than the kernel's (the package overlays that make ``src/`` shadow the project)
    to ``root``, so the incumbent imports its kernel files as the candidate imports its own."""
    for path in src.rglob("*"):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and rel not in kernel and "__pycache__" not in path.parts:
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dst)


def prepare_tree(c: CampaignContext, wt: Path) -> Path:
    """Make ``wt`` a detached worktree holding the incumbent exactly (its commit, its kernel
    files, the user's mirrored uncommitted files); returns the project root inside it."""
    commit = c.state.incumbent_commit if c.m.git_commit else c.m.starting_commit
    commit = commit or git.head(c.groot)
    if not (wt / ".git").exists():
        if wt.exists():
            shutil.rmtree(wt)
        git.git(c.groot, "worktree", "prune")
        git.git(c.groot, "worktree", "add", "--detach", "--force", str(wt), commit)
    else:
        git.git(wt, "checkout", "--detach", "--force", commit)
    root = wt / os.path.relpath(c.root, c.groot)
    if is_workspace(c.m):
        _mirror_workspace(c.root, root, set(c.m.kernel_source))
    for rel in c.m.kernel_source:  # the incumbent's kernel files, exactly
        data, path = incumbent_bytes(c, rel), root / rel
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    kernel = set(c.kernel_git)
    for rel in c.state.ambient:  # the user's own uncommitted files, mirrored
        if rel in kernel:
            continue
        src, dst = c.groot / rel, wt / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        elif not src.exists():
            dst.unlink(missing_ok=True)
    return root
