"""Kernel files a round changed that other ops of the profile also run.

A launcher or a quantization module is often shared: the bf16 GEMM, three FP8 recipes and a
shape-set variant may all name ``launch.py`` in their ``kernel_source``. A round gates on its
own op's focused test and measures its own op's shapes, so a change to a shared file can break
or slow an op the campaign never looks at. Each round therefore records which other ops list
the files it changed, or import them from the files they list (:func:`sharing_ops`).
``ratchet validate --test-shared``, or ``test_shared: true`` on the op in ``ratchet.yaml``
(every round of every driver: ``validate``, ``run``, ``resume``), runs those ops' focused
tests after the campaign's own (:func:`shared_tests`), failing the round on the first that fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.lineage.kernel import changed_kernel_files
from kernel_ratchet.campaign.lineage.workspace import is_workspace
from kernel_ratchet.campaign.steps import TEST_TIMEOUT_S, run_step
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.profile.sharing import shared_tests, sharing_ops

if TYPE_CHECKING:
    from pathlib import Path

    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.record import RoundDraft


def describe(sharing: Mapping[str, list[str]], tested: bool) -> str:
    """One line for the round summary: who else lists the changed files (ops listing the same
    ones named together), and whether their tests gated the round."""
    if not sharing:
        return ""
    by_files: dict[tuple[str, ...], list[str]] = {}
    for op, files in sharing.items():
        by_files.setdefault(tuple(files), []).append(op)
    who = "; ".join(f"{', '.join(ops)} ({', '.join(files)})" for files, ops in by_files.items())
    gate = (
        "their focused tests ran after this op's and gated the round"
        if tested
        else "their focused tests did not gate this round (`ratchet validate --test-shared`, "
        "or `test_shared: true` on the op in ratchet.yaml, runs them) and their shapes were "
        "not measured"
    )
    return f"Also run by (listed in or imported by the kernel_source of): {who}; {gate}."


def refuse_in_workspace(c: CampaignContext, test_shared: bool) -> None:
    """CampaignError when the sharing ops' tests are asked for in a workspace campaign: the
    workspace carries its own op's tests only, rewritten to run in it."""
    if (test_shared or c.op.test_shared) and is_workspace(c.m):
        raise CampaignError(
            "the focused tests of ops sharing a kernel file (--test-shared, or test_shared: "
            f"true on ops.{c.m.target_op}) need a repo-mode campaign: a workspace campaign "
            "carries only its own op's tests. Drop the flag (set test_shared: false) for this "
            "campaign, or run it with execution_mode: repo"
        )


def note_sharing(c: CampaignContext, draft: RoundDraft, test_shared: bool) -> None:
    """Fill ``draft.shared_with``; ``draft.shared_tested`` says the sharing ops' tests are to
    gate the round (``--test-shared``, or ``test_shared: true`` on the op in ratchet.yaml, and
    at least one such op)."""
    draft.shared_with = sharing_ops(c.profile, c.m.target_op, changed_kernel_files(c))
    wanted = (test_shared or c.op.test_shared) and not is_workspace(c.m)  # see refuse_in_workspace
    draft.shared_tested = wanted and bool(draft.shared_with)


def run_shared_tests(
    c: CampaignContext, draft: RoundDraft, art: Path
) -> tuple[str, tuple[str, ...]] | None:
    """Run the sharing ops' focused tests (``test.<op>.log`` beside the round's own); the
    reason of the first failure and the tests it reported failed, or None when all pass."""
    for op, cmd in shared_tests(c.profile, c.op.test, draft.shared_with):
        c.say(f"round-{draft.round}: focused test of {op}, which shares the changed files")
        t = run_step(
            f"focused test of {op}",
            cmd,
            cwd=c.root,
            log_path=art / f"test.{op}.log",
            timeout_s=TEST_TIMEOUT_S,
        )
        draft.timed(f"test.{op}", t.seconds)
        if not t.ok:
            files = ", ".join(draft.shared_with[op])
            return f"focused test of {op} (it shares {files}) failed: {t.reason}", t.failed_tests
    return None
