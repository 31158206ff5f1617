"""Workspace-mode's sync-back (SPEC section 3): the integration gate of an extracted stack.

:func:`sync_back` writes the incumbent's kernel files (and only them) into the project, re-runs
the original focused test and a project-rooted harness on all target shapes there, and commits
only the kernel files when both pass; otherwise it restores the project's kernel files. It
refuses when a kernel file changed upstream since extraction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.context import primary_vs_base
from kernel_ratchet.campaign.fsutil import (
    atomic_write_json,
    atomic_write_text,
    file_sha256,
    sha256_bytes,
)
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.kernel import incumbent_bytes
from kernel_ratchet.campaign.lineage.workspace import is_workspace, load_workspace
from kernel_ratchet.campaign.quick_bench import write_harness
from kernel_ratchet.campaign.record import read_record
from kernel_ratchet.campaign.render import commit_message, cut_words, round_record
from kernel_ratchet.campaign.steps import (
    HARNESS_TIMEOUT_S,
    TEST_TIMEOUT_S,
    python_command,
    run_step,
)
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.scoring.metrics import aggregates

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.engine import Campaign

SYNC_DIR = "sync-back"


@dataclass(frozen=True)
class SyncResult:
    """The outcome of ``sync_back``; ``ok`` is the integration gate's verdict."""

    ok: bool
    round: int
    files: tuple[str, ...]
    commit: str | None
    details: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "round": self.round,
            "files": list(self.files),
            "commit": self.commit,
            "details": list(self.details),
        }


def _upstream_changes(c: CampaignContext, ws: dict[str, Any], incumbent: dict[str, bytes | None]):
    """Kernel files whose project copy is neither the extracted one nor an accepted round's
    (the incumbent's, or one an earlier sync-back wrote and committed)."""
    root, groot = c.profile.root, c.groot
    changed = []
    for rel, extracted in ws["kernel_files"].items():
        path = root / rel
        cur = file_sha256(path) if path.exists() else None
        head = git.show(groot, "HEAD", os.path.relpath(root / rel, groot))
        inc = incumbent[rel]
        allowed = {extracted, None if inc is None else _sha(inc), *_accepted(c, rel)}
        head_sha = None if head is None else _sha(head)
        if cur not in allowed or head_sha not in allowed:
            changed.append(rel)
    return changed


def _accepted(c: CampaignContext, rel: str) -> set[str | None]:
    """The sha256 of kernel file ``rel`` in every accepted round's snapshot."""
    return {
        file_sha256(c.round_dir(e.round) / "kernel_snapshot" / rel)
        for e in c.state.closed
        if e.status.value == "ACCEPTED"
    } - {None}


def _sha(data: bytes) -> str:
    return sha256_bytes(data)


def _write_kernel(root: Path, rel: str, data: bytes | None) -> None:
    path = root / rel
    if data is None:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, data.decode("utf-8"))


def sync_back(c: Campaign, *, commit: bool = True) -> SyncResult:
    """Apply the incumbent's kernel files to the project and re-validate them there.

    Preconditions (CampaignError otherwise): a workspace-mode campaign with an accepted round,
    no round in flight, and project kernel files unchanged upstream since extraction (or
    already holding an accepted round's, which an earlier sync-back wrote). The gate: the
    original focused test passes in the project and a project-rooted harness measures every
    target shape with Check=PASS (its aggregate against the baseline's is shown, a diagnostic).
    On PASS the kernel files (only them) are committed when ``commit``; on FAIL they are
    restored.
    """
    if not is_workspace(c.m):
        raise CampaignError(
            f"{c.m.campaign} is a {c.m.execution_mode}-mode campaign: its "
            "accepted rounds are commits in the project already"
        )
    c.recover()
    return _sync(c.ctx, commit)


def _sync(c: CampaignContext, commit: bool) -> SyncResult:
    st = c.state
    if st.phase.value == "INITIALIZED" or not st.incumbent_round or st.incumbent_round < 2:
        raise CampaignError("no accepted round to sync back yet: the incumbent is the baseline")
    ws = load_workspace(c.dir)
    n = st.incumbent_round
    incumbent = {rel: incumbent_bytes(c, rel) for rel in c.m.kernel_source}
    changed = _upstream_changes(c, ws, incumbent)
    if changed:
        raise CampaignError(
            f"the project's kernel files changed upstream since extraction at "
            f"{ws['upstream_commit'][:12]}: {', '.join(changed)}. Sync-back would overwrite "
            f"that work: port round-{n}'s change by hand (rounds/round-{n}/kernel_snapshot, "
            "artifacts/candidate.diff) or start a new workspace campaign from the current project"
        )
    root = c.profile.root
    before = {
        rel: (root / rel).read_bytes() if (root / rel).exists() else None
        for rel in c.m.kernel_source
    }
    for rel, data in incumbent.items():
        if before[rel] != data:
            _write_kernel(root, rel, data)
    ok, details, after = _revalidate(c, ws)
    sha = None
    kernel_git = [os.path.relpath(root / k, c.groot) for k in c.m.kernel_source]
    if ok and commit:
        sha = _commit(c, n, kernel_git, after)
    elif not ok:
        for rel, data in before.items():
            _write_kernel(root, rel, data)
        details.append("- The project's kernel files were restored to their state before sync-back")
    res = SyncResult(ok, n, tuple(c.m.kernel_source), sha, tuple(details))
    atomic_write_json(c.dir / SYNC_DIR / "result.json", {**res.to_dict(), "finished": now()})
    c.log("logs/optimize.md").append(
        f"## Sync-back of round-{n} ({now()}) — {'PASSED' if ok else 'FAILED'}\n"
        + "\n".join(details)
        + (f"\n- Commit: {sha}" if sha else "")
        + "\n\n"
    )
    c.save()
    return res


def _revalidate(c: CampaignContext, ws: dict[str, Any]) -> tuple[bool, list[str], float | None]:
    """Focused test + harness on all target shapes, both run in the project."""
    root, m, out = c.profile.root, c.m, c.dir / SYNC_DIR
    out.mkdir(parents=True, exist_ok=True)
    c.say(f"sync-back: focused test in the project ({ws['original_test_command']})")
    t = run_step(
        "focused test",
        ws["original_test_command"],
        cwd=root,
        log_path=out / "test.log",
        timeout_s=TEST_TIMEOUT_S,
    )
    details = [f"- Focused test in the project: {'PASS' if t.ok else 'FAIL'} ({t.reason})"]
    if not t.ok:
        return False, details, None
    harness = out / "quick_test_bench.py"
    write_harness(out, m, root, shapes=m.representative_shape_dicts, target_shapes=m.target_shapes)
    csv = out / "benchmark.csv"
    c.say(f"sync-back: harness in the project on all {len(m.target_shapes)} target shapes")
    h = run_step(
        "harness",
        python_command(harness, "--level", "full", "--summary-csv", str(csv)),
        cwd=root,
        log_path=out / "harness.log",
        timeout_s=HARNESS_TIMEOUT_S,
    )
    if not h.ok or not csv.exists():
        return False, [*details, f"- Harness in the project: FAIL ({h.reason})"], None
    table = c.table(c.rel(csv))
    failed = [r.label for r in table.rows if not r.passed]
    missing = sorted({s["label"] for s in m.target_shapes} - {r.label for r in table.rows})
    gain = primary_vs_base(c, table)
    agg = aggregates(table, m.campaign_type).primary_avg
    # The gain was decided by the campaign's paired A/Bs; this run against the BASELINE's,
    # timed apart, is a diagnostic, never a gate (noise alone can read it either way).
    ok = not failed and not missing
    details.append(
        f"- Harness in the project ({c.rel(csv)}): {len(table.rows) - len(failed)}/"
        f"{len(table.rows)} shapes PASS"
        + (f"; FAIL: {', '.join(failed)}" if failed else "")
        + (f"; missing: {', '.join(missing)}" if missing else "")
        + f"; {m.primary_metric} aggregate {agg:.4g}, vs baseline "
        + ("-" if gain is None else f"{gain * 100:+.2f}%")
        + " (two runs timed apart: a diagnostic; the paired chain is the campaign's gain)"
    )
    return ok, details, agg


def _commit(c: CampaignContext, n: int, kernel_git: list[str], after: float | None) -> str | None:
    rec = read_record(c.round_dir(n) / "round.json")
    baseline = c.baseline_table()
    before = aggregates(baseline, c.m.campaign_type).primary_avg
    msg = commit_message(
        c.m.target_op,
        c.m.target_backend,
        n,
        f"{cut_words(rec.summary or rec.hypothesis, 50)} (workspace sync-back)",
        rec.hypothesis,
        before,
        after or before,
        f"{os.path.relpath(c.dir, c.groot)}/logs/optimize.md",
        metric=f"{c.m.primary_metric} (baseline vs the project's harness run)",
        record=round_record(c.m.campaign, n),
    )
    return git.commit_only(c.groot, kernel_git, msg) or git.head(c.groot)
