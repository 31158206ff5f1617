"""The work inside one round: snapshot, scope check, rebuild, focused test, harness, decision,
rollback of the kernel files, and the round's records. Called by ``engine.Campaign``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign import git, workspace
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.create import harness_command, write_harness
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text, file_sha256
from kernel_ratchet.campaign.paired_round import PairedFailure, paired_decision
from kernel_ratchet.campaign.record import (
    LEVELS,
    Category,
    RoundDraft,
    RoundRecord,
    category_of,
)
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.campaign.state import PendingRound
from kernel_ratchet.campaign.steps import run_step
from kernel_ratchet.campaign.transfer_round import dynamic_check
from kernel_ratchet.errors import CampaignError, SchemaError
from kernel_ratchet.guard import StaticAudit, audit_change, skew_robustness
from kernel_ratchet.guard.static_audit import BUCKETS, REJECT
from kernel_ratchet.harness.ab import SEED_POLICY
from kernel_ratchet.harness.provenance import collect_provenance
from kernel_ratchet.harness.provenance import write_provenance as save_provenance
from kernel_ratchet.scoring.decision import decide

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign

TEST_TIMEOUT_S = 1800.0
HARNESS_TIMEOUT_S = 3600.0
ESCALATE_BELOW = 0.05  # a quick gain under 5% is confirmed on the full set (SPEC section 5)


# -- kernel files ------------------------------------------------------------------------------
def snapshot(c: Campaign, rdir: Path) -> None:
    """Copy the working-tree kernel files into ``rdir/kernel_snapshot`` (missing ones listed)."""
    snap = rdir / "kernel_snapshot"
    files = {}
    for rel in c.m.kernel_source:
        src = c.root / rel
        if src.exists():
            data = src.read_bytes()
            dest = snap / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            files[rel] = file_sha256(src)
        else:
            files[rel] = None
    atomic_write_json(snap / "SNAPSHOT.json", {"taken": now(), "files": files})


def incumbent_bytes(c: Campaign, rel: str) -> bytes | None:
    """A kernel file's content in the incumbent (commit, or the incumbent round's snapshot)."""
    if c.m.git_commit and c.state.incumbent_commit:
        return git.show(c.groot, c.state.incumbent_commit, os.path.relpath(c.root / rel, c.groot))
    snap = c.round_dir(c.state.incumbent_round or 1) / "kernel_snapshot"
    meta = json.loads((snap / "SNAPSHOT.json").read_text())
    return None if meta["files"].get(rel) is None else (snap / rel).read_bytes()


def restore_incumbent(c: Campaign) -> list[str]:
    """Write the incumbent's kernel files over the working tree; touch nothing else."""
    restored = []
    for rel in c.m.kernel_source:
        data, path = incumbent_bytes(c, rel), c.root / rel
        if data is None:
            if path.exists():
                path.unlink()
                restored.append(rel)
        elif not path.exists() or path.read_bytes() != data:
            atomic_write_text(path, data.decode("utf-8"))
            restored.append(rel)
    return restored


def kernel_changed(c: Campaign) -> bool:
    for rel in c.m.kernel_source:
        path = c.root / rel
        current = path.read_bytes() if path.exists() else None
        if current != incumbent_bytes(c, rel):
            return True
    return False


def ambient(c: Campaign) -> dict[str, str | None]:
    """Fingerprints of the user's own uncommitted changes outside the kernel files."""
    if workspace.is_workspace(c.m):  # the workspace's own files, not the project's
        return workspace.ambient(c)
    kernel = set(c.kernel_git)
    tips = os.path.relpath(c.profile.tips_root_path, c.groot) + "/"  # the tool writes tips
    return {
        p: file_sha256(c.groot / p)
        for p in git.changed_paths(c.groot)
        if p not in kernel and not p.startswith(tips)
    }


def out_of_scope(c: Campaign) -> list[str]:
    """Files outside kernel_source changed since the last round closed."""
    now_ = ambient(c)
    before = c.state.ambient
    return sorted(p for p in set(now_) | set(before) if now_.get(p, "-") != before.get(p, "-"))


# -- the measuring pipeline --------------------------------------------------------------------
def preconditions(c: Campaign, hypothesis: str, bucket: str, level: str) -> None:
    st = c.state
    if st.phase.value == "INITIALIZED":
        raise CampaignError("no baseline yet: run `ratchet baseline` first")
    if st.phase.value != "OPTIMIZING" or st.termination:
        why = st.termination.reason if st.termination else st.phase.value
        raise CampaignError(
            f"the campaign has ended ({why}); run `ratchet report`, or start a "
            "new campaign with `ratchet init`"
        )
    if not hypothesis.strip():
        raise CampaignError("state the round's hypothesis: --hypothesis 'what and why'")
    if bucket not in BUCKETS:
        raise CampaignError(f"bucket must be one of {', '.join(BUCKETS)} (SPEC section 8)")
    if level not in LEVELS:
        raise CampaignError(f"level must be quick or full, not {level!r}")
    for rel in ("logs/optimize.md", "logs/performance_trend.md"):
        c.log(rel).verify()  # an edited log stops the campaign before any work is spent
    if file_sha256(c.dir / "quick_test_bench.py") != st.harness_sha256:
        _restore_harness(c)
    if not kernel_changed(c):
        raise CampaignError(
            f"the kernel files ({', '.join(c.m.kernel_source)}) equal the incumbent's: edit "
            "them with this round's single change, then run validate"
        )


def _restore_harness(c: Campaign) -> None:
    sha = write_harness(
        c.dir, c.m, c.root, shapes=c.m.representative_shape_dicts, target_shapes=c.m.target_shapes
    )
    c.log("logs/optimize.md").append(
        f"> {now()}: quick_test_bench.py had been edited outside the tool; it was regenerated "
        "from manifest.yaml before any measurement.\n\n"
    )
    c.save()
    if sha != c.state.harness_sha256:
        raise CampaignError(
            "the regenerated harness does not match the campaign's record; "
            "manifest.yaml may have been edited: start a new campaign"
        )
    raise CampaignError(
        f"{c.dir / 'quick_test_bench.py'} was edited; the harness is generated and must not "
        "change during a campaign. It was regenerated from manifest.yaml: run validate again"
    )


def transfer_audit(c: Campaign, declared: str) -> StaticAudit:
    """The static transfer audit (SPEC section 8) of the working tree against the incumbent."""
    before, after = {}, {}
    for rel in c.m.kernel_source:
        if not rel.endswith(".py"):
            continue
        old, path = incumbent_bytes(c, rel), c.root / rel
        if old is not None:
            before[rel] = old.decode("utf-8", errors="replace")
        if path.exists():
            after[rel] = path.read_text(encoding="utf-8", errors="replace")
    return audit_change(before, after, declared_bucket=declared)


def _skew_gate(d: RoundDecision) -> tuple[RoundDecision, bool]:
    """Grouped ops: a gain on uniform token distributions that does not hold on skewed ones is
    over-fitting (SPEC section 8): an ACCEPT becomes a rollback. Returns (decision, whether it
    was rejected as overfit)."""
    gains = {s.label: s.delta for s in d.per_shape}
    if not gains or any(g <= -1 for g in gains.values()):
        return d, False
    verdict, why = skew_robustness(gains)
    d = replace(d, skew=(verdict, why))
    if verdict == REJECT and d.accepted:
        return d.rejected_as_overfit(why), True
    return d, False


def _run_harness(c: Campaign, art: Path, level: str, name: str):
    csv = art / name
    log = art / name.replace(".csv", ".log")
    h = run_step(
        "harness",
        harness_command(c.dir, level, csv),
        cwd=c.root,
        log_path=log,
        timeout_s=HARNESS_TIMEOUT_S,
    )
    return h, csv


def _gates(c: Campaign, cand_rel: str, inc_rel: str) -> RoundDecision:
    cand = c.table(cand_rel)
    inc = c.table(inc_rel).restrict([r.label for r in cand.rows])
    d = decide(inc, cand, c.m.campaign_type, regression_threshold=c.m.regression_threshold)
    return RoundDecision.from_gates(d)


def measure(c: Campaign, n: int, p: PendingRound) -> RoundRecord:
    """Scope check, rebuild, focused test, harness, decision. Returns the round record; its
    ``seconds`` say where the round's wall time went (monotonic clock, per step that ran:
    rebuild, test, harness_quick/_full, ab_quick/_full, transfer; measure = all of them)."""
    t0 = time.monotonic()
    record = _measure(c, n, p)
    return record.with_seconds("measure", time.monotonic() - t0)


def _draft(c: Campaign, n: int, p: PendingRound, diff: str) -> RoundDraft:
    return RoundDraft(
        round=n,
        hypothesis=p.hypothesis or "",
        bucket=p.bucket or "-",
        change=p.notes.get("change") or _diffstat(diff),
        level=p.level or "quick",
        started=p.started,
        test_command=c.m.test_command,
        incumbent_round=c.state.incumbent_round,
        notes=p.notes,
    )


def _measure(c: Campaign, n: int, p: PendingRound) -> RoundRecord:
    rdir = c.round_dir(n)
    art = rdir / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    if workspace.is_workspace(c.m):
        diff = workspace.candidate_diff(c)
    else:
        diff = (
            git.diff(c.groot, c.state.incumbent_commit, c.kernel_git)
            if c.m.git_commit and c.state.incumbent_commit
            else ""
        )
    (art / "candidate.diff").write_text(diff)
    draft = _draft(c, n, p, diff)
    scope = out_of_scope(c)
    if scope:
        why = (
            f"files outside kernel_source changed: {scope}; a round may change only the "
            "kernel files. Revert them before the next round"
        )
        return draft.failed(Category.SCOPE, why, now(), out_of_scope=scope)
    audit = transfer_audit(c, draft.bucket)
    draft.transfer_static = audit
    if audit.verdict == REJECT:
        why = f"REJECT-as-overfit before any benchmark ({audit.bucket}): {audit.reason}"
        return draft.failed(Category.OVERFIT, why, now())
    failed = _build_and_test(c, n, draft, art)
    return failed or _measure_levels(c, n, draft, art)


def _build_and_test(c: Campaign, n: int, draft: RoundDraft, art: Path) -> RoundRecord | None:
    """The rebuild (when the campaign has one) and the focused test; their failure's record."""
    if c.m.rebuild_command:
        c.say(f"round-{n}: rebuild")
        b = run_step(
            "rebuild",
            c.m.rebuild_command,
            cwd=c.root,
            log_path=art / "rebuild.log",
            timeout_s=TEST_TIMEOUT_S,
        )
        draft.timed("rebuild", b.seconds)
        if not b.ok:
            return draft.failed(Category.BUILD, f"build failed: {b.reason}", now())
    c.say(f"round-{n}: focused test")
    t = run_step(
        "focused test",
        c.m.test_command,
        cwd=c.root,
        log_path=art / "test.log",
        timeout_s=TEST_TIMEOUT_S,
    )
    draft.timed("test", t.seconds)
    if not t.ok:
        return draft.failed(Category.TEST, f"focused test failed: {t.reason}", now())
    return None


@dataclass(frozen=True)
class LevelResult:
    """One level's outcome: its CSV and decision with the decision's category, or the record
    of the failure that ended the round there."""

    csv: Path | None = None
    decision: RoundDecision | None = None
    category: Category | None = None
    failed: RoundRecord | None = None


def _level(c: Campaign, n: int, draft: RoundDraft, art: Path, level: str, name: str):
    """Harness at ``level`` (the round's CSV), then the decision against the incumbent:
    correctness and shape-set gates on the CSV, then the paired A/B."""
    shapes = len(c.m.representative_shapes) if level == "quick" else len(c.m.target_shapes)
    c.say(f"round-{n}: harness, {level} level ({shapes} shapes)")
    h, csv = _run_harness(c, art, level, name)
    draft.timed(f"harness_{level}", h.seconds)
    draft.harness_command = draft.harness_command or h.command
    if not h.ok or not csv.exists():
        why = f"the {level}-level harness failed: {h.reason}"
        return LevelResult(failed=draft.failed(Category.HARNESS, why, now()))
    write_provenance(c, art, level)
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    try:
        gates = _gates(c, c.rel(csv), inc_rel)
    except SchemaError as exc:
        why = f"benchmark CSV schema drift: {exc}"
        return LevelResult(failed=draft.failed(Category.SCHEMA, why, now()))
    if any(not r.passed for r in c.table(c.rel(csv)).rows):
        return LevelResult(csv, gates, Category.CORRECTNESS)
    t0 = time.monotonic()
    outcome = paired_decision(c, n, art, c.rel(csv), inc_rel)
    draft.timed(f"ab_{level}", time.monotonic() - t0)
    if isinstance(outcome, PairedFailure):
        record = draft.failed(
            outcome.category, outcome.reason, now(), csv=c.rel(csv), failure=outcome.failure
        )
        return LevelResult(failed=record)
    harness_only = {"status": gates.status.value, "reason": gates.reason, "gain": gates.gain}
    d = replace(outcome, harness_only=harness_only)
    d, overfit = _skew_gate(d)
    category = Category.OVERFIT if overfit else category_of(d, c.m.regression_threshold)
    return LevelResult(csv, d, category)


def _measure_levels(c: Campaign, n: int, draft: RoundDraft, art: Path) -> RoundRecord:
    level = draft.level
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    res = _level(c, n, draft, art, level, "benchmark.csv")
    if res.failed is not None:
        return res.failed
    csv, d, category = res.csv, res.decision, res.category
    escalated = False
    if level == "quick" and d.accepted and d.gain < ESCALATE_BELOW:
        c.say(f"round-{n}: quick gain {d.gain * 100:+.2f}% < 5%: full validation")
        quick = art / "benchmark_quick.csv"
        os.replace(csv, quick)
        draft.quick_csv = c.rel(quick)
        res = _level(c, n, draft, art / "full", "full", "benchmark.csv")
        if res.failed is not None:
            return res.failed
        final = art / "benchmark.csv"
        os.replace(res.csv, final)
        csv, d, category = final, res.decision, res.category
        level, inc_rel, escalated = "full", c.state.incumbent_full_csv, True
    if d.accepted and d.paired:
        d, category = _transfer_gate(c, n, draft, art, c.rel(csv), d, category)
    return draft.decided(
        d, category, now(), level=level, csv=c.rel(csv), incumbent_csv=inc_rel, escalated=escalated
    )


def _transfer_gate(c, n, draft, art, csv_rel, d: RoundDecision, category: Category):
    """The dynamic transfer check of an accepted paired decision: an OVERFIT verdict rolls
    the round back as REJECT-as-overfit."""
    c.say(f"round-{n}: transfer check (fresh tensors vs the benchmark idiom)")
    t0 = time.monotonic()
    dyn = dynamic_check(c, art, [r.label for r in c.table(csv_rel).rows])
    draft.timed("transfer", time.monotonic() - t0)
    d = replace(d, dynamic=dyn)
    if dyn["verdict"] == "OVERFIT":
        return d.rejected_as_overfit(dyn["reason"]), Category.OVERFIT
    return d, category


def _diffstat(diff: str) -> str:
    added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    files = [ln[6:] for ln in diff.splitlines() if ln.startswith("+++ b/")]
    where = ", ".join(files) or "kernel files"
    return f"{where}: +{added} -{removed} lines (artifacts/candidate.diff)"


def interrupted_record(c: Campaign, n: int, p: PendingRound, how: str) -> RoundRecord:
    """The ROLLED BACK record of round ``n``, interrupted by ``how`` before its decision."""
    notes = {k: v for k, v in p.notes.items() if k not in ("lesson", "takeaway")}
    draft = RoundDraft(
        round=n,
        hypothesis=p.hypothesis or "",
        bucket=p.bucket or "-",
        change=p.notes.get("change", "see kernel_snapshot"),
        level=p.level or "quick",
        started=p.started,
        test_command=c.m.test_command,
        incumbent_round=c.state.incumbent_round,
        notes=notes,
        seconds=None,
    )
    why = (
        f"interrupted by {how} before a decision; the candidate is kept in "
        f"rounds/round-{n}/kernel_snapshot and the kernel files were restored to the incumbent"
    )
    return draft.failed(Category.INTERRUPTED, why, now())


def write_provenance(c: Campaign, art: Path, level: str) -> None:
    """``provenance.json`` next to a harness CSV: how its numbers were measured (engine and
    parameters, GPU and clocks, driver, versions, commit, seed policy, environment hash)."""
    import torch

    prov = collect_provenance(
        {"engine": c.m.timing_engine, **c.m.timing_params},
        candidate_commit=git.head(c.groot),
        seed_policy=f"harness inputs from the campaign seed {c.m.seed}, fresh per shape; "
        f"paired A/B: {SEED_POLICY}",
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
    prov["level"] = level
    save_provenance(art / "provenance.json", prov)
