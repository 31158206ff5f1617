"""``ratchet validate --patch FILE``: a round's candidate handed over as a unified diff.

The diff is applied to the campaign's working tree only when it fits one round: every file it
names is a kernel file of the op, the kernel files still equal the incumbent's (a second change
in the tree would make the round measure two), and git applies it cleanly. If the round then
refuses to start (no baseline, an ended campaign, an empty hypothesis), the diff is taken back,
so a refused round leaves the tree as it found it; once the round has started it owns the
kernel files, restoring them on a roll-back as it does for a change edited in place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import changed_kernel_files
from kernel_ratchet.campaign.patch_scope import kernel_in_repo, patch_paths
from kernel_ratchet.errors import CampaignError, GitError, UsageError

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.record import RoundRecord


def _read(patch: Path) -> tuple[str, list[str]]:
    try:
        text = patch.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the patch {patch}: {exc}") from exc
    paths = patch_paths(text)
    if not paths:
        raise UsageError(f"{patch} names no file: give a unified diff (`git diff > FILE`)")
    return text, paths


def _apply_args(c: CampaignContext) -> list[str]:
    """``git apply`` options that take a diff of the project's repository (paths from its top
    level, ``a/`` and ``b/`` prefixes) to ``c``'s tree (a workspace's copies, or the project
    itself)."""
    mine = os.path.relpath(c.profile.root, git.toplevel(c.profile.root))
    theirs = os.path.relpath(c.root, c.groot)
    if mine == theirs:
        return []
    depth = 0 if mine == "." else len(Path(mine).parts)
    return [f"-p{1 + depth}"] + ([] if theirs == "." else [f"--directory={theirs}"])


def apply_patch(c: CampaignContext, patch: Path) -> str:
    """Apply ``patch`` (paths from the project repository's top level) to the kernel files of
    ``c``'s working tree; its text. Raises UsageError for an unreadable or empty diff,
    CampaignError (nothing applied) for one that names other files, meets kernel files already
    changed, or does not apply."""
    text, paths = _read(patch)
    kernel = kernel_in_repo(c.profile.root, c.m.kernel_source)
    outside = [p for p in paths if p not in kernel]
    if outside:
        raise CampaignError(
            f"{patch} changes {', '.join(outside)}, outside the op's kernel files "
            f"({', '.join(kernel)}): a round may change only those. Split them off (land them "
            "before `ratchet init`, or after `ratchet accept`) and give the kernel part alone"
        )
    changed = changed_kernel_files(c)
    if changed:
        raise CampaignError(
            f"the kernel files already differ from the incumbent's ({', '.join(changed)}): "
            "validate that change without --patch, or restore them (`git checkout -- "
            f"{' '.join(changed)}`) and run again"
        )
    args = _apply_args(c)
    try:
        git.git(c.groot, "apply", "--check", *args, "-", input=text)
    except GitError as exc:
        here = ", ".join(os.path.relpath(c.root / k, c.profile.root) for k in c.m.kernel_source)
        raise CampaignError(
            f"{patch} does not apply to the incumbent's kernel files ({here}); make it "
            f"against them ({exc})"
        ) from exc
    git.git(c.groot, "apply", *args, "-", input=text)
    return text


def validate_patch(
    c: Campaign, hypothesis: str, patch: Path | None = None, **kwargs
) -> RoundRecord:
    """``c.validate(hypothesis, **kwargs)``, on ``patch`` applied first where given
    (:func:`apply_patch`); the patch taken back if the round refuses to start."""
    if patch is None:
        return c.validate(hypothesis, **kwargs)
    first = c.state.next_round
    text = apply_patch(c.ctx, Path(patch))
    try:
        return c.validate(hypothesis, **kwargs)
    except BaseException:
        if c.state.next_round == first and c.state.pending is None:  # no round started
            back = [*_apply_args(c.ctx), "-R", "-"]
            git.git(c.ctx.groot, "apply", *back, input=text, check=False)
        raise
