"""Keeping what recovery would overwrite: a change to the kernel files it did not make.

Recovery closes a round found in flight from its ``kernel_snapshot`` (the candidate it
measured): it commits that candidate or restores the incumbent. Kernel files in the working tree
that differ from the snapshot were changed after the round started (typically a new edit made
after a crash, before the next command ran); they are *displaced*. Before anything is written
over them they are kept twice, so they are never lost:

* ``rounds/round-<n>/artifacts/displaced.patch``: a unified diff from the incumbent's kernel
  files to the displaced ones;
* ``refs/ratchet/<campaign>/displaced/<n>``: a commit (parent HEAD) whose tree is HEAD's with
  the displaced kernel files, made with git plumbing on a private index (HEAD, the index and
  the branches stay as they are). ``git checkout <ref> -- <files>`` brings them back.

Then the snapshot is written back into the working tree, so recovery commits or rolls back
exactly the candidate the round measured.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import incumbent_bytes

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

PATCH = "displaced.patch"


@dataclass(frozen=True)
class Displaced:
    """Where a displaced change was kept: ``files`` (kernel_source paths), ``patch`` and
    ``ref``."""

    round: int
    files: tuple[str, ...]
    patch: Path
    ref: str
    commit: str

    def note(self, campaign_dir: Path) -> str:
        """One sentence for the user and the record: what was kept, where, how to get it."""
        files = " ".join(self.files)
        return (
            f"the working tree's later change to {', '.join(self.files)} (not round-"
            f"{self.round}'s measured candidate) was kept as {self.ref} and "
            f"{os.path.relpath(self.patch, campaign_dir)}; get it back with "
            f"`git checkout {self.ref} -- {files}`"
        )


def displaced_ref(campaign: str, n: int) -> str:
    """The ref that keeps the change displaced while round ``n`` of ``campaign`` closed."""
    return f"refs/ratchet/{campaign}/displaced/{n}"


def _snapshot_files(rdir: Path) -> dict[str, bytes | None] | None:
    """The kernel files of ``rdir``'s snapshot (None: no complete snapshot)."""
    meta_path = rdir / "kernel_snapshot" / "SNAPSHOT.json"
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    snap = rdir / "kernel_snapshot"
    return {
        rel: None if sha is None else (snap / rel).read_bytes()
        for rel, sha in meta["files"].items()
    }


def _working(c: CampaignContext, rel: str) -> bytes | None:
    path = c.root / rel
    return path.read_bytes() if path.exists() else None


def _patch(c: CampaignContext, changed: dict[str, bytes | None]) -> str:
    chunks = []
    for rel, new in changed.items():
        old = incumbent_bytes(c, rel)
        a = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
        b = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
        chunks.append("".join(difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}")))
    return "".join(chunks)


def keep_displaced(c: CampaignContext, n: int) -> Displaced | None:
    """Keep the working tree's kernel files that differ from round ``n``'s snapshot (patch and
    ref), then write the snapshot back over them. None when nothing differs or the round has
    no snapshot. Idempotent: after it, the working tree equals the snapshot. Raises GitError
    when the ref cannot be made (nothing is overwritten then)."""
    rdir = c.round_dir(n)
    snap = _snapshot_files(rdir)
    if snap is None:
        return None
    changed = {rel: _working(c, rel) for rel in snap if _working(c, rel) != snap[rel]}
    if not changed:
        return None
    if all(data == incumbent_bytes(c, rel) for rel, data in changed.items()):
        _write_back(c, snap, changed)  # the incumbent's own files (an edit undone): nothing lost
        return None
    patch = rdir / "artifacts" / PATCH
    patch.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(patch, _patch(c, changed))
    ref = displaced_ref(c.m.campaign, n)
    to_git = {os.path.relpath(c.root / rel, c.groot): data for rel, data in changed.items()}
    commit = git.keep_files(
        c.groot, to_git, ref, f"[ratchet] change displaced while round-{n} closed\n"
    )
    _write_back(c, snap, changed)
    return Displaced(n, tuple(changed), patch, ref, commit)


def _write_back(c: CampaignContext, snap: dict[str, bytes | None], changed: dict) -> None:
    """The snapshot's version of each ``changed`` kernel file written over the working tree."""
    for rel in changed:
        data, path = snap[rel], c.root / rel
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
