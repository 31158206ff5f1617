"""One round's measuring pipeline: scope -> transfer audit -> rebuild -> focused test ->
levels (harness, gates, paired A/B, transfer check). A failing candidate ends here as a
ROLLED BACK record (:meth:`~kernel_ratchet.campaign.record.RoundDraft.failed`), never as an
exception; ``engine.Campaign.validate`` writes what :func:`measure` returns.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.lineage import tree_seal
from kernel_ratchet.campaign.lineage.kernel import (
    candidate_diff,
    edited_meanwhile,
    kernel_texts,
    out_of_scope,
    scope_reason,
)
from kernel_ratchet.campaign.lineage.worktree import incumbent_worktree
from kernel_ratchet.campaign.patch_scope import patch_paths
from kernel_ratchet.campaign.quick_bench import EarlyHarness
from kernel_ratchet.campaign.record import OVERLAP_STEP, RoundDraft, RoundRecord
from kernel_ratchet.campaign.rounds.levels import measure_levels
from kernel_ratchet.campaign.rounds.partial import paired_so_far
from kernel_ratchet.campaign.rounds.reach import note_unreached
from kernel_ratchet.campaign.rounds.shared import note_sharing, run_shared_tests
from kernel_ratchet.campaign.rounds.workers import RoundWorkers
from kernel_ratchet.campaign.scope import split_ignored
from kernel_ratchet.campaign.seal import changed_records
from kernel_ratchet.campaign.state import PendingRound
from kernel_ratchet.campaign.steps import (
    NO_GPU_ENV,
    TEST_TIMEOUT_S,
    StepResult,
    ran_out_of_memory,
    run_step,
    start_step,
)
from kernel_ratchet.guard import StaticAudit, audit_change
from kernel_ratchet.guard.backend import backend_audit
from kernel_ratchet.guard.static_audit import REJECT
from kernel_ratchet.guard.tool_reach import tool_reach
from kernel_ratchet.harness import strays
from kernel_ratchet.harness.pinning import beside_cpus
from kernel_ratchet.scoring.decision import Status

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def transfer_audit(c: CampaignContext, declared: str) -> StaticAudit:
    """The static transfer audit (SPEC section 8) of the working tree against the incumbent."""
    before, after = kernel_texts(c)
    return audit_change(before, after, declared_bucket=declared)


def backend_change(c: CampaignContext) -> str | None:
    """Why the candidate hands the work to the vendor library or the reference (a change of
    backend, which the user consents to by declaring that backend in ratchet.yaml), or None."""
    before, after = kernel_texts(c)
    found = backend_audit(before, after, c.m.target_backend)
    if not found.flagged:
        return None
    return (
        f"{found.reason}. A change of backend is not a kernel gain: to measure that path, "
        "declare its backend for the op in ratchet.yaml and start a campaign on it"
    )


def measure(c: CampaignContext, n: int, p: PendingRound) -> RoundRecord:
    """Scope check, rebuild, focused test, harness, decision. Returns the round record; its
    ``seconds`` say where the round's wall time went (monotonic clock, per step that ran:
    rebuild, test, workers (the wait for the workers' start and checks), harness_quick/_full,
    ab_quick/_full, transfer; measure = the whole round; overlap: see
    :data:`~kernel_ratchet.campaign.record.OVERLAP_STEP`)."""
    t0 = time.monotonic()
    tree_seal.reset()  # the round's first preparation of the incumbent's tree seals it
    c.hold_incumbent()  # its CSVs as they are now, before any code of the round runs
    with strays.Watch():  # before any code of the round runs: see :mod:`.strays`
        record = _unless_edited_meanwhile(c, _measure(c, n, p))
    record = _unless_records_touched(c, _unless_incumbent_touched(c, record))
    return record.with_seconds("measure", time.monotonic() - t0)


def _unless_records_touched(c: CampaignContext, record: RoundRecord) -> RoundRecord:
    """``record``, rolled back as a cheat when a sealed file of the campaign (its manifest,
    whose thresholds and commands the gates read, or a closed round's record) changed while
    the round ran: every command checks them before it starts, so code of the round wrote
    them. The next command still refuses until they are restored."""
    touched = changed_records(c)
    if not touched:
        return record
    why = (
        f"sealed files of the campaign changed while the round ran ({', '.join(touched[:8])}): "
        f"code of the round wrote them, and the gates read them; restore them before the next "
        f"command ({record.status.value} otherwise: {record.reason})"
    )
    return replace(record, status=Status.ROLLED_BACK, category=Category.CHEAT, reason=why)


def _unless_incumbent_touched(c: CampaignContext, record: RoundRecord) -> RoundRecord:
    """``record``, rolled back as a cheat when code files of the incumbent's worktree changed
    while the round ran (:mod:`~kernel_ratchet.campaign.lineage.tree_seal`): the incumbent
    was not measured as committed. Its measurement is kept in the record."""
    touched = tree_seal.broken(incumbent_worktree(c))
    if record.category is Category.SCOPE:  # the user's own out-of-scope edits are mirrored
        mirrored = set(record.out_of_scope or ())
        touched = [t for t in touched if t.rsplit(" (", 1)[0] not in mirrored]
    if not touched:
        return record
    why = (
        f"code files of the incumbent's worktree changed while the round ran "
        f"({', '.join(touched[:8])}{', ...' if len(touched) > 8 else ''}): code of the round "
        f"wrote them, so the incumbent was not measured as committed and nothing this round "
        f"measured can be credited ({record.status.value} otherwise: {record.reason})"
    )
    return replace(record, status=Status.ROLLED_BACK, category=Category.CHEAT, reason=why)


def _unless_edited_meanwhile(c: CampaignContext, record: RoundRecord) -> RoundRecord:
    """``record``, rolled back for its scope when files outside kernel_source changed while
    the round ran: its test, workers and harness may have read them (an edited reference or a
    loosened test), so nothing it measured can be credited to the kernel. Its measurement is
    kept in the record."""
    if record.category is Category.SCOPE:
        return record
    scope = edited_meanwhile(c)
    if not scope:
        return record
    why = (
        f"files outside kernel_source changed while the round ran, so what it measured may "
        f"have read them ({record.status.value} otherwise: {record.reason}); "
        + scope_reason(c, scope)
    )
    return replace(
        record, status=Status.ROLLED_BACK, category=Category.SCOPE, reason=why, out_of_scope=scope
    )


def _draft(c: CampaignContext, n: int, p: PendingRound, diff: str) -> RoundDraft:
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


def _measure(c: CampaignContext, n: int, p: PendingRound) -> RoundRecord:
    rdir = c.round_dir(n)
    art = rdir / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    diff = candidate_diff(c)
    (art / "candidate.diff").write_text(diff)
    draft = _draft(c, n, p, diff)
    scope, draft.ignored = split_ignored(out_of_scope(c))
    if scope:
        return draft.failed(Category.SCOPE, scope_reason(c, scope), now(), out_of_scope=scope)
    note_sharing(c, draft, p.test_shared)
    broken = _syntax_error(c)
    if broken:
        return draft.failed(Category.COMPILE, f"the candidate does not parse: {broken}", now())
    audit = transfer_audit(c, draft.bucket)
    draft.transfer_static = audit
    if audit.verdict == REJECT:
        why = f"REJECT-as-overfit before any benchmark ({audit.bucket}): {audit.reason}"
        return draft.failed(Category.OVERFIT, why, now())
    swapped = backend_change(c)
    if swapped:
        return draft.failed(Category.BACKEND, swapped, now())
    texts = kernel_texts(c)  # the candidate as measured, whatever the round does to the tree
    reach = tool_reach(*texts)
    if reach:
        return draft.failed(Category.CHEAT, f"{reach}; refused before any measurement", now())
    early = EarlyHarness(c, draft.level, art / "benchmark.csv", art / "benchmark.log")
    with RoundWorkers(c, art) as workers, early:
        if not c.op.test_gpu and timing_on_gpu():
            record = _measure_beside_test(c, n, draft, art, workers, early)
        else:
            failed = _build_and_test(c, n, draft, art, workers, early)
            record = failed or measure_levels(c, n, draft, art, workers, early)
    return note_unreached(c, record, art, texts)


def _syntax_error(c: CampaignContext) -> str | None:
    """The first SyntaxError in the candidate's Python kernel files, or None: a typo is a
    failure to compile, not a change the transfer audit could judge as overfit."""
    for rel in c.m.kernel_source:
        path = c.root / rel
        if rel.endswith(".py") and path.exists():
            try:
                compile(path.read_bytes(), rel, "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", None)
                return f"{rel}{f':{line}' if line else ''}: {type(exc).__name__}: {exc}"
    return None


def _rebuild(c: CampaignContext, n: int, draft: RoundDraft, art: Path) -> RoundRecord | None:
    """The campaign's rebuild command, when it has one; the record of its failure."""
    if not c.m.rebuild_command:
        return None
    c.say(f"round-{n}: rebuild")
    cmd, log = c.m.rebuild_command, art / "rebuild.log"
    b = run_step("rebuild", cmd, cwd=c.root, log_path=log, timeout_s=TEST_TIMEOUT_S)
    draft.timed("rebuild", b.seconds)
    return None if b.ok else draft.failed(Category.BUILD, f"build failed: {b.reason}", now())


def _start_beside(
    c: CampaignContext, draft: RoundDraft, workers: RoundWorkers, early: EarlyHarness
) -> None:
    """Start the round's workers, their correctness checks and its gated harness (only the
    harness where the incumbent passes no shape: nothing is paired with it)."""
    if c.incumbent_passes_none():  # nothing to pair with: the candidate's own checks
        workers.start(candidate_only=True)
        early.start()
        workers.check_early(c.m.level_shape_dicts("full"))
        return
    workers.start()
    early.start()
    fails = c.incumbent_fails()
    workers.check_early([d for d in c.m.level_shape_dicts(draft.level) if d["label"] not in fails])


def _build_and_test(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    workers: RoundWorkers,
    early: EarlyHarness,
) -> RoundRecord | None:
    """The rebuild (when the campaign has one) and the focused test; their failure's record.
    The round's workers and its gated harness start (on the rebuilt tree) as the focused test
    starts: their start-up runs beside the test, which times nothing."""
    built = _rebuild(c, n, draft, art)
    if built is not None:
        return built
    beside = (
        "the harness and the candidate's worker start beside it, the worker checks the "
        "shapes' correctness"
        if c.incumbent_passes_none()
        else "the harness and the A/B's workers start beside it, the workers check the "
        "shapes' correctness"
    )
    c.say(f"round-{n}: focused test ({beside})")
    test = start_step("focused test", c.m.test_command, cwd=c.root, log_path=art / "test.log")
    try:  # the test first: what the workers' start costs here (torch's import) runs beside it
        _start_beside(c, draft, workers, early)
    except BaseException:
        test.stop()
        raise
    t = test.wait(TEST_TIMEOUT_S)
    draft.timed("test", t.seconds)
    if not t.ok and workers.checked_early and ran_out_of_memory(Path(t.log)):
        # the workers' checks of the largest shapes held the device memory the test needed:
        # not the candidate's fault. Their memory is freed and the test runs again alone; the
        # A/B then starts fresh workers and checks the shapes itself.
        c.say(
            f"round-{n}: the focused test ran out of device memory beside the workers' checks; "
            "running it again alone"
        )
        workers.close()
        Path(t.log).rename(art / "test-beside-checks.log")
        t = _focused_test(c, art)
        draft.timed("test", (draft.seconds or {}).get("test", 0.0) + t.seconds)
    return _after_test(c, draft, art, t)


def _after_test(
    c: CampaignContext, draft: RoundDraft, art: Path, t: StepResult
) -> RoundRecord | None:
    """The record of a failed focused test, or of a failed focused test of an op sharing a
    changed file; None when both passed."""
    if not t.ok:
        reason = f"focused test failed: {t.reason}"
        return draft.failed(Category.TEST, reason, now(), failed_tests=t.failed_tests)
    shared = run_shared_tests(c, draft, art) if draft.shared_tested else None
    if shared is None:
        return None
    reason, failed_tests = shared
    return draft.failed(Category.TEST, reason, now(), failed_tests=failed_tests)


def timing_on_gpu() -> bool:
    """Whether the round times a GPU. Without one the harness and the A/B time the CPU, and a
    test beside them would share it: on two cores, torch's thread pools of the test and of both
    workers made an honest 36x faster kernel read 0.35x. So a CPU round runs its focused test
    first, whatever ``test_gpu`` says."""
    import torch

    return torch.cuda.is_available()


def _measure_beside_test(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    workers: RoundWorkers,
    early: EarlyHarness,
) -> RoundRecord:
    """A round whose focused test uses no GPU (``test_gpu: false`` in ratchet.yaml): the test
    runs with no device visible, beside the harness and the paired A/B, which time only the
    GPU. The round's outcome waits for it: a failed test rolls the round back whatever was
    measured. ``seconds``: the test's own, and under ``overlap`` how much of it ran beside."""
    built = _rebuild(c, n, draft, art)
    if built is not None:
        return built
    c.say(f"round-{n}: focused test, with no GPU visible, beside the harness and the A/B")
    test = start_step(
        "focused test",
        c.m.test_command,
        cwd=c.root,
        log_path=art / "test.log",
        env=NO_GPU_ENV,
        cpus=beside_cpus(),  # not the A/B workers' CPU, which a thread pool would stall on
    )

    def failed_already() -> str | None:  # no A/B for a candidate whose test has failed
        rc = test.proc.poll()
        return None if rc in (None, 0) else f"focused test failed (exit code {rc})"

    try:
        _start_beside(c, draft, workers, early)
        measured = measure_levels(c, n, draft, art, workers, early, failed_already)
    except BaseException:
        test.stop()
        raise
    measured_at = time.monotonic()
    t = test.wait(TEST_TIMEOUT_S)
    beside = max(0.0, t.seconds - (time.monotonic() - measured_at))
    draft.timed("test", t.seconds)
    draft.timed(OVERLAP_STEP, beside)
    failed = _after_test(c, draft, art, t)
    if failed is not None:
        return failed
    return measured.with_seconds("test", t.seconds).with_seconds(OVERLAP_STEP, beside)


def _focused_test(c: CampaignContext, art: Path) -> StepResult:
    return run_step(
        "focused test",
        c.m.test_command,
        cwd=c.root,
        log_path=art / "test.log",
        timeout_s=TEST_TIMEOUT_S,
    )


def _diffstat(diff: str) -> str:
    added = sum(1 for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    where = ", ".join(patch_paths(diff)) or "kernel files"
    return f"{where}: +{added} -{removed} lines (artifacts/candidate.diff)"


def interrupted_record(c: CampaignContext, n: int, p: PendingRound, how: str) -> RoundRecord:
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
    so_far = paired_so_far(c.round_dir(n), c.m.campaign_type)
    if so_far:
        why = f"{why}; {so_far}"
    record = draft.failed(Category.INTERRUPTED, why, now())
    return record.as_rehearsal() if p.rehearsal or c.state.rehearsal else record
