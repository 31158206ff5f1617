"""The incumbent as runnable code: a git worktree the paired A/B measures next to the candidate.

``<campaign_dir>/.incumbent`` is a detached worktree of the project. It is checked out at the
incumbent commit (or, without per-round commits, at the starting commit with the incumbent
round's kernel snapshot written over it), and the user's own uncommitted non-kernel files are
mirrored into it, so the two sides differ in the kernel files alone. The worktree belongs to
the campaign: nothing in the user's tree is touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.lineage import git, tree_seal
from kernel_ratchet.campaign.lineage.kernel import incumbent_bytes, incumbent_commit
from kernel_ratchet.campaign.lineage.workspace import is_workspace

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

WORKTREE = ".incumbent"


def incumbent_tree(c: CampaignContext) -> Path:
    """Prepare the worktree and return the project root inside it (the profile's directory)."""
    return prepare_tree(c, incumbent_worktree(c))


def incumbent_worktree(c: CampaignContext) -> Path:
    """The incumbent's worktree (prepared or not)."""
    return c.incumbent_dir or c.dir / WORKTREE


def remove_incumbent_tree(c: CampaignContext) -> bool:
    """Remove the incumbent's worktree once the campaign has ended, unregistered from git;
    True when there was one. Its code is a commit or a round's kernel snapshot, its other
    files copies of the user's: nothing is lost, and ``git worktree list`` no longer shows a
    detached tree per ended campaign."""
    wt = incumbent_worktree(c)
    if not wt.exists():
        return False
    git.git(c.groot, "worktree", "remove", "--force", str(wt), check=False)
    if wt.exists():  # not a registered worktree (or git refused): the directory alone
        shutil.rmtree(wt, ignore_errors=True)
    git.git(c.groot, "worktree", "prune", check=False)
    return True


def _mirror_workspace(src: Path, root: Path, kernel: set[str]) -> None:
    """A workspace's ``src/`` is git-excluded, so a worktree of the project lacks it: copy its
    files other than the kernel's (the package overlays that make ``src/`` shadow the project)
    to ``root``, so the incumbent imports its kernel files as the candidate imports its own."""
    for path in src.rglob("*"):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and rel not in kernel and "__pycache__" not in path.parts:
            _put(root / rel, path.read_bytes())


def _put(path: Path, data: bytes) -> None:
    """``path`` holding ``data``, rewritten only when it holds something else (a file kept
    keeps its time, so its compiled module stays valid: :mod:`.tree_seal`)."""
    with contextlib.suppress(OSError):
        if path.is_file() and path.read_bytes() == data:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def prepare_tree(c: CampaignContext, wt: Path) -> Path:
    """Make ``wt`` a detached worktree holding the incumbent exactly (its commit, its kernel
    files, the user's mirrored uncommitted files); returns the project root inside it. The
    first preparation of a round (:func:`.tree_seal.reset`) also removes what earlier rounds'
    code left in the tree (a module shadowing the kernel's), then seals it."""
    commit = incumbent_commit(c) or git.head(c.groot)
    root = wt / os.path.relpath(c.root, c.groot)
    first = not tree_seal.sealed(wt)
    if not (wt / ".git").exists():
        if wt.exists():
            shutil.rmtree(wt)
        git.git(c.groot, "worktree", "prune")
        git.git(c.groot, "worktree", "add", "--detach", "--force", str(wt), commit)
    else:
        git.git(wt, "checkout", "--detach", "--force", commit)
        if first:  # ignored files too: an ignore rule (.git/info/exclude) is the round's to add
            git.git(wt, "clean", "-fdqx")
    if is_workspace(c.m):
        _mirror_workspace(c.root, root, set(c.m.kernel_source))
    for rel in c.m.kernel_source:  # the incumbent's kernel files, exactly
        data, path = incumbent_bytes(c, rel), root / rel
        if data is None:
            path.unlink(missing_ok=True)
        else:
            _put(path, data)
    kernel = set(c.kernel_git)
    for rel in c.state.ambient:  # the user's own uncommitted files, mirrored
        if rel in kernel:
            continue
        src, dst = c.groot / rel, wt / rel
        if src.is_file():
            _put(dst, src.read_bytes())
        elif not src.exists():
            dst.unlink(missing_ok=True)
    if first:
        tree_seal.seal(wt)
    return root
