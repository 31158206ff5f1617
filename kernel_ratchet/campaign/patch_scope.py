"""Whether a prepared patch fits one round of an op: the files it changes outside the op's
kernel_source, which ``ratchet validate`` would refuse after the campaign's BASELINE has run,
and whether git applies it to the kernel files as committed (the incumbent a campaign starts
from).

Read before ``ratchet init``, so a change to tests or docs is split off (landed before
``init`` or after ``accept``) without spending a baseline on it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.errors import GitError
from kernel_ratchet.profile.items import CheckItem, item
from kernel_ratchet.profile.schema import Profile

#: ``--- a/x`` / ``+++ b/x`` headers of a unified diff (``/dev/null`` for a new or gone file).
_HEADER = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)")


def patch_paths(text: str) -> list[str]:
    """The files a unified diff (``git diff`` or ``diff -u``) changes, relative to its root."""
    found = {m.group(1) for line in text.splitlines() if (m := _HEADER.match(line))}
    return sorted(found - {"/dev/null"})


def kernel_in_repo(root: Path, kernel_source: Iterable[str]) -> list[str]:
    """The kernel files of the project at ``root`` as a diff names them: from the top of the
    repository that holds it (where ``git diff`` writes paths from)."""
    top = git.toplevel(root)
    return [os.path.relpath(Path(root) / k, top) for k in kernel_source]


def patch_scope(profile: Profile, op: str, patch: Path) -> CheckItem:
    """One check line: the patch's files all within ``op``'s kernel_source and the patch
    applying to them (or already applied in the tree), or what is wrong and what to do."""
    o = profile.op(op)
    try:
        text = patch.read_text()
    except OSError as exc:
        return item(o, "patch scope", False, f"cannot read {patch}: {exc}", "give a patch file")
    paths = patch_paths(text)
    if not paths:
        return item(o, "patch scope", False, f"{patch} names no file", "give a unified diff")
    groot = git.toplevel(profile.root)
    kernel = set(kernel_in_repo(profile.root, o.kernel_source))
    outside = [p for p in paths if p not in kernel]
    if not outside:
        fits = f"{len(paths)} kernel file(s): one round can take it"
        if _applies(groot, text):
            return item(o, "patch scope", True, fits)
        if _applies(groot, text, "-R"):
            held = [p for p in paths if p in kernel]
            return item(
                o,
                "patch scope",
                True,
                f"{fits}; the tree holds it already: restore the kernel files (`git checkout -- "
                f"{' '.join(held)}`) before `ratchet init`, which baselines them as committed, "
                f"then `ratchet validate --patch {patch}`",
            )
        return _not_applying(o, patch)
    return item(
        o,
        "patch scope",
        False,
        f"{patch} changes {', '.join(outside)}, outside kernel_source; `ratchet validate` "
        "refuses such a round",
        "split those files off: land them before `ratchet init` (a test that fails until the "
        "fix lands goes in after `ratchet accept`), or list a kernel module in kernel_source",
    )


def _applies(groot: Path, text: str, *args: str) -> bool:
    try:
        git.git(groot, "apply", "--check", *args, "-", input=text)
    except GitError:
        return False
    return True


def _not_applying(o, patch: Path) -> CheckItem:
    """The scope line of a kernel-only patch that git applies neither way to the tree."""
    return item(
        o,
        "patch scope",
        False,
        f"{patch} changes kernel files only, but does not apply to them as they are "
        f"(`git apply --check {patch}` names the hunk)",
        "make it against the kernel files as committed: the incumbent a campaign starts from",
    )
