"""A round's measurement at one level, and its decision: harness, gates, paired A/B.

At the round's level the harness measures the candidate (the round's CSV); the CSV's gates
(correctness, the shape set) come first, then the paired A/B against the incumbent
(:mod:`.paired`), the skew check of grouped ops, and, for a quick gain under 5%, the same at
the full level, unless the quick shapes already are the full set (never measured twice). An
accepted paired decision then faces the dynamic transfer check (:mod:`.transfer`). Every
outcome is a :class:`LevelResult`: a decision with its category, or the record of the failure
that ended the round.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.quick_bench import (
    EarlyHarness,
)
from kernel_ratchet.campaign.record import RoundDraft, RoundRecord, category_of
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.campaign.rounds.correctness_only import judge_on_correctness
from kernel_ratchet.campaign.rounds.level_harness import level_harness
from kernel_ratchet.campaign.rounds.paired import PairedFailure, paired_decision
from kernel_ratchet.campaign.rounds.transfer import dynamic_check
from kernel_ratchet.errors import SchemaError
from kernel_ratchet.guard import skew_robustness
from kernel_ratchet.guard.static_audit import REJECT
from kernel_ratchet.harness import failures
from kernel_ratchet.scoring.decision import decide

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.rounds.workers import RoundWorkers
    from kernel_ratchet.harness.worker import Worker

ESCALATE_BELOW = 0.05  # a quick gain under 5% is confirmed on the full set (SPEC section 5)
QUICK_IS_FULL = (
    "The quick shapes are all the target shapes: the quick result is the full validation "
    "(not re-measured)"
)


def _quick_is_full(c: CampaignContext) -> bool:
    """Whether the representative shapes are the whole target set (full = quick)."""
    return set(c.m.representative_shapes) == {s["label"] for s in c.m.target_shapes}


def _skew_gate(d: RoundDecision, c: CampaignContext) -> tuple[RoundDecision, bool]:
    """Grouped ops: a gain on uniform token distributions that does not hold on skewed ones is
    over-fitting (SPEC section 8): an ACCEPT becomes a rollback. Shapes of equal groups, N and
    K are the same layer (twins). Returns (decision, whether it was rejected as overfit)."""
    gains = {s.label: s.delta for s in d.per_shape}
    if not gains or any(g <= -1 for g in gains.values()):
        return d, False
    layers = {s["label"]: (s.get("B"), s.get("N"), s.get("K")) for s in c.m.target_shapes}
    verdict, why = skew_robustness(gains, layers=layers)
    d = replace(d, skew=(verdict, why))
    if verdict == REJECT and d.accepted:
        return d.rejected_as_overfit(why), True
    return d, False


def _gates(c: CampaignContext, cand_rel: str, inc_rel: str) -> RoundDecision:
    cand = c.table(cand_rel)
    inc = c.table(inc_rel).restrict([r.label for r in cand.rows])
    d = decide(inc, cand, c.m.campaign_type, regression_threshold=c.m.regression_threshold)
    return RoundDecision.from_gates(d)


@dataclass(frozen=True)
class LevelResult:
    """One level's outcome: its CSV and decision with the decision's category, or the record
    of the failure that ended the round there."""

    csv: Path | None = None
    decision: RoundDecision | None = None
    category: Category | None = None
    failed: RoundRecord | None = None


def _level(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    level: str,
    name: str,
    workers: RoundWorkers | None = None,
    early: EarlyHarness | None = None,
    abandon: Callable[[], str | None] | None = None,
) -> LevelResult:
    """Harness at ``level`` (the round's CSV), then the decision against the incumbent:
    correctness and shape-set gates on the CSV, then the paired A/B (in the round's
    ``workers`` when given; they are idle before the harness times anything). ``abandon``:
    why the round stops before its harness or its A/B (a focused test running beside them
    failed), or None."""
    if workers is not None:
        t0 = time.monotonic()
        workers.settle()
        if (waited := time.monotonic() - t0) >= 0.1:  # their start and checks outlasted the test
            draft.timed("workers", waited)
        workers.release()  # their cached device memory, before the harness needs it
    if (stop := abandon and abandon()) is not None:
        return LevelResult(failed=draft.failed(Category.TEST, stop, now()))
    shapes = len(c.m.level_shape_dicts(level))
    c.say(f"round-{n}: harness, {level} level ({shapes} shapes)")
    csv, failed = level_harness(c, draft, art, level, name, early)
    if failed is not None:
        return LevelResult(failed=failed)
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    try:
        gates = _gates(c, c.rel(csv), inc_rel)
    except SchemaError as exc:
        why = f"benchmark CSV schema drift: {exc}"
        return LevelResult(failed=draft.failed(Category.SCHEMA, why, now()))
    fails = c.incumbent_fails(inc_rel)  # the BASELINE stands on the shapes that pass
    if any(not r.passed and r.label not in fails for r in c.table(c.rel(csv)).rows):
        if why := failures.summary(failures.read(csv)):  # what to fix, not only where
            gates = replace(gates, reason=f"{gates.reason} ({why})")
        return LevelResult(csv, gates, Category.CORRECTNESS)
    if (stop := abandon and abandon()) is not None:
        return LevelResult(failed=draft.failed(Category.TEST, stop, now()))
    return _paired_level(c, n, draft, art, (level, csv, inc_rel), gates, workers)


def _paired_level(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    where: tuple[str, Path, str],
    gates: RoundDecision,
    workers: RoundWorkers | None,
) -> LevelResult:
    """The paired A/B of a level whose harness passed (``where``: level, its CSV, the
    incumbent's CSV) and the decision on it, ``gates`` (the harness's own) kept beside."""
    level, csv, inc_rel = where
    t0 = time.monotonic()
    lend = workers.lend() if workers is not None else None
    own = workers is not None and level == draft.level  # the level its workers checked early
    outcome = paired_decision(
        c,
        n,
        art,
        c.rel(csv),
        inc_rel,
        worker_factory=lend,
        secret=workers.secret if own else None,
        prechecked=workers.prechecked() if own else None,
    )
    draft.timed(f"ab_{level}", time.monotonic() - t0)
    if isinstance(outcome, PairedFailure):
        record = draft.failed(
            outcome.category, outcome.reason, now(), csv=c.rel(csv), failure=outcome.failure
        )
        return LevelResult(failed=record)
    harness_only = {"status": gates.status.value, "reason": gates.reason, "gain": gates.gain}
    d = replace(outcome, harness_only=harness_only)
    d, overfit = _skew_gate(d, c)
    category = Category.OVERFIT if overfit else category_of(d, c.m.regression_threshold)
    return LevelResult(csv, d, category)


def measure_levels(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    workers: RoundWorkers | None = None,
    early: EarlyHarness | None = None,
    abandon: Callable[[], str | None] | None = None,
) -> RoundRecord:
    """The round's level (and the full level after a quick gain under 5%), then the transfer
    check of an accepted paired decision; returns the round's record. ``workers``: the
    round's started workers (:mod:`.workers`), reused by its A/B and transfer check;
    ``early``: its harness, started beside the focused test; ``abandon``: see :func:`_level`.
    A fix against an incumbent that passes no shape is judged on correctness alone
    (:mod:`.correctness_only`)."""
    if c.incumbent_passes_none():  # a fix round: nothing to pair with (see the module)
        return judge_on_correctness(c, n, draft, art, workers, early, abandon)
    level = draft.level
    inc_rel = c.state.incumbent_quick_csv if level == "quick" else c.state.incumbent_full_csv
    res = _level(c, n, draft, art, level, "benchmark.csv", workers, early, abandon)
    if res.failed is not None:
        return res.failed
    csv, d, category = res.csv, res.decision, res.category
    escalated = False
    if level == "quick" and d.accepted and d.gain < ESCALATE_BELOW and _quick_is_full(c):
        d = replace(d, reason=f"{d.reason}. {QUICK_IS_FULL}")
    elif level == "quick" and d.accepted and d.gain < ESCALATE_BELOW:
        c.say(f"round-{n}: quick gain {d.gain * 100:+.2f}% < 5%: full validation")
        quick = art / "benchmark_quick.csv"
        os.replace(csv, quick)
        draft.quick_csv = c.rel(quick)
        res = _level(c, n, draft, art / "full", "full", "benchmark.csv", workers, None, abandon)
        if res.failed is not None:
            return res.failed
        final = art / "benchmark.csv"
        os.replace(res.csv, final)
        csv, d, category = final, res.decision, res.category
        level, inc_rel, escalated = "full", c.state.incumbent_full_csv, True
    if d.accepted and d.paired:
        live = workers.live() if workers is not None else None
        d, category = _transfer_gate(c, n, draft, art, c.rel(csv), d, category, live)
    return draft.decided(
        d, category, now(), level=level, csv=c.rel(csv), incumbent_csv=inc_rel, escalated=escalated
    )


def _transfer_gate(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    csv_rel: str,
    d: RoundDecision,
    category: Category,
    live: dict[str, Worker] | None = None,
) -> tuple[RoundDecision, Category]:
    """The dynamic transfer check of an accepted paired decision: an OVERFIT verdict rolls
    the round back as REJECT-as-overfit."""
    c.say(f"round-{n}: transfer check (fresh tensors vs the benchmark idiom)")
    t0 = time.monotonic()
    dyn = dynamic_check(c, art, [r.label for r in c.table(csv_rel).rows], live)
    draft.timed("transfer", time.monotonic() - t0)
    d = replace(d, dynamic=dyn)
    if dyn["verdict"] == "OVERFIT":
        return d.rejected_as_overfit(dyn["reason"]), Category.OVERFIT
    return d, category
