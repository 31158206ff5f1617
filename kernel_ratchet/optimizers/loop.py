"""The unattended loop: init -> BASELINE -> (ANALYZE -> propose -> apply -> VALIDATE)* -> REPORT.

:func:`run_campaign` drives the same :class:`~kernel_ratchet.campaign.engine.Campaign` API the
CLI commands use; the optimizer only proposes. It stops when the engine records a termination
(T1-T3), when the measured efficiency reaches ``efficiency_target`` (T2), or on T4: the
optimizer has nothing left, this run's iteration or time budget is spent, or ``stop_flag`` is
set (the first Ctrl+C, see :func:`.budget.graceful_interrupt`); then it writes the REPORT. A second
Ctrl+C raises KeyboardInterrupt at once: the engine closes the round in flight as rolled back
and ``ratchet resume`` continues the campaign later. With ``pause_at_budget`` a spent
iteration or time budget of this run pauses instead (no REPORT, the campaign stays open for
``ratchet resume``): a campaign split over several machine sessions; T1-T3 still end it.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.analyze import analyze_campaign
from kernel_ratchet.campaign.candidate import remove_slots
from kernel_ratchet.campaign.create import create_campaign, define_target, preflight
from kernel_ratchet.campaign.driver import record_driver
from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.lineage.kernel import kernel_changed
from kernel_ratchet.campaign.locate import find_campaign
from kernel_ratchet.campaign.record import RoundRecord, read_record
from kernel_ratchet.campaign.render import time_line
from kernel_ratchet.campaign.state import Phase
from kernel_ratchet.dashboard.site import after_round
from kernel_ratchet.errors import TERMINATION_REQUESTED, CampaignError, RatchetError
from kernel_ratchet.optimizers.base import Optimizer, OptimizerContext, OptimizerError, Proposal
from kernel_ratchet.optimizers.budget import incumbent_unmeasurable, too_short
from kernel_ratchet.optimizers.context import build_context, fingerprint
from kernel_ratchet.profile.schema import Profile
from kernel_ratchet.report.final import Reported, report
from kernel_ratchet.scoring.roofline import efficiency

Say = Callable[[str], None]
#: Proposals in a row that leave the kernel files equal to the incumbent before giving up.
MAX_EMPTY_PROPOSALS = 3
#: Stop code of an interactive optimizer handing over: no REPORT, the campaign goes on.
PAUSED = "PAUSED"


@dataclass
class LoopResult:
    """What one ``run_campaign`` call did: the campaign, its rounds this run, why it stopped."""

    campaign_dir: Path
    rounds: list[RoundRecord] = field(default_factory=list)
    stop: tuple[str, str] | None = None  # (code, reason)
    report: Reported | None = None


def _open(
    profile: Profile,
    optimizer: Optimizer,
    op: str | None,
    campaign: str | None,
    max_iterations: int,
    init: Mapping[str, Any],
    say: Say,
) -> Path:
    if campaign or not op:
        return find_campaign(profile, campaign)
    optimizer.check_ready(profile.root, profile.op(op))
    params = define_target(profile, op, max_iterations=max_iterations, **init)
    preflight(profile, op, init.get("shapes"))
    cdir = create_campaign(profile, params)
    say(f"campaign {cdir.name} created")
    return cdir


def run_campaign(
    profile: Profile,
    op: str | None,
    optimizer: Optimizer,
    *,
    campaign: str | None = None,
    max_iterations: int = 20,
    max_duration_s: float | None = None,
    efficiency_target: float | None = None,
    say: Say | None = None,
    stop_flag: threading.Event | None = None,
    on_round: Callable[[RoundRecord], None] | None = None,
    init: Mapping[str, Any] | None = None,
    pause_at_budget: bool = False,
    runner: RoundRunner | None = None,
    known_failure: str | None = None,
) -> LoopResult:
    """Run a campaign unattended until a termination condition; returns what happened.

    ``op`` given and ``campaign`` None: a new campaign (``init`` = extra ``define_target``
    options); otherwise the named (or most recent) campaign is resumed. ``max_iterations``
    bounds the rounds of this call (and is the campaign's T3 for a new one). Raises
    OptimizerError before any round when the optimizer cannot drive the op (``check_ready``),
    when it fails or a proposal changed a protected file (nothing is validated then),
    CampaignError/RatchetError as the engine does, KeyboardInterrupt on the second Ctrl+C
    (the round in flight is closed first). ``runner``: rounds run by it (parallel
    candidates, :mod:`kernel_ratchet.optimizers.parallel`) instead of one by one.
    ``known_failure``: the BASELINE's, as ``ratchet baseline --known-failure`` takes it (a
    CampaignError where this run takes no baseline).
    """
    say = say or (lambda _m: None)
    stop_flag = stop_flag or threading.Event()
    cdir = _open(profile, optimizer, op, campaign, max_iterations, init or {}, say)
    res = LoopResult(cdir)
    deadline = time.monotonic() + max_duration_s if max_duration_s else math.inf
    with Campaign(profile, cdir, say=say) as c:
        if _begin(c, optimizer, say, known_failure):
            res.report = report(c)
            code = c.state.termination.code if c.state.termination else "T4"
            res.stop = (code, "already ended")
            return res
        settings = LoopSettings(
            optimizer,
            max_iterations,
            deadline,
            efficiency_target,
            stop_flag,
            say,
            on_round,
            PAUSED if pause_at_budget else "T4",
            runner,
        )
        res.stop = _loop(c, res, settings)
        if res.stop[0] == PAUSED:
            say(f"paused: {res.stop[1]}")
            return res
        say(f"stopping: {res.stop[0]} — {res.stop[1]}; writing the REPORT")
        res.report = report(c, stop=res.stop)
        after_round(c)
    return res


def _begin(c: Campaign, optimizer: Optimizer, say: Say, known_failure: str | None) -> bool:
    """Recover an interrupted round, check the optimizer can drive the op, record the driver
    and measure the BASELINE of a new campaign (``known_failure``: its declared failure).
    True when the campaign had already ended."""
    ended = (Phase.TERMINATED, Phase.ACCEPTED)
    c.recover()
    if known_failure is not None and c.state.phase is not Phase.INITIALIZED:
        raise CampaignError(
            f"--known-failure declares the BASELINE's failure, and campaign {c.m.campaign} has "
            "its baseline already; nothing was run (drop the option to continue it)"
        )
    remove_slots(c.ctx)  # parallel candidates' slots left by a run that did not end
    if c.state.phase not in ended:
        optimizer.check_ready(c.root, c.op)
    record_driver(c.dir, optimizer.settings())
    if c.state.phase is Phase.INITIALIZED:
        c.baseline(known_failure)
        after_round(c)
        say(f"BASELINE done; representative shapes: {', '.join(c.m.representative_shapes)}")
    return c.state.phase in ended


@dataclass(frozen=True)
class LoopSettings:
    """How one ``run_campaign`` call runs its rounds. ``deadline``: monotonic seconds (inf: no
    --max-duration); ``budget_code``: what a spent budget of this run returns, T4 (the campaign
    ends) or PAUSED (``ratchet resume`` continues it)."""

    optimizer: Optimizer
    max_iterations: int
    deadline: float
    efficiency_target: float | None
    stop_flag: threading.Event
    say: Say
    on_round: Callable[[RoundRecord], None] | None
    budget_code: str
    runner: RoundRunner | None = None


#: Runs the next round(s) instead of one proposal at a time: given the open campaign, the
#: loop's settings, what the optimizer may read and the rounds this run may still spend, it
#: returns the closed rounds (oldest first), a stop (code, reason), or None when no proposal
#: changed the kernel files.
RoundRunner = Callable[
    [Campaign, LoopSettings, OptimizerContext, int], "list[RoundRecord] | tuple[str, str] | None"
]


def _loop(c: Campaign, res: LoopResult, run: LoopSettings) -> tuple[str, str]:
    """Rounds until a stop; returns (code, reason)."""
    empty = 0
    took: list[float] = []  # seconds of each validated round of this run
    while True:
        stop = _stop_before_round(c, res, run, took)
        if stop:
            return stop
        t_round = time.monotonic()
        ctx = _prepare(c, run)
        if isinstance(ctx, tuple):
            return ctx
        if run.runner:
            outcome = run.runner(c, run, ctx, run.max_iterations - len(res.rounds))
        else:
            outcome = _one_round(c, run, ctx)
        if isinstance(outcome, tuple):
            return outcome
        if outcome is None:  # the proposal left the kernel files unchanged
            empty += 1
            n = c.state.next_round
            run.say(f"round-{n}: the proposal left the kernel files unchanged ({empty})")
            if empty >= MAX_EMPTY_PROPOSALS:
                name = run.optimizer.name
                return "T4", f"the {name} optimizer made {empty} empty proposals in a row"
            continue
        empty = 0
        closed = outcome if isinstance(outcome, list) else [outcome]
        res.rounds.extend(closed)
        took.append(time.monotonic() - t_round)
        after_round(c)
        for rec in closed:
            _observe(rec, run)


def _stop_before_round(
    c: Campaign, res: LoopResult, run: LoopSettings, took: list[float]
) -> tuple[str, str] | None:
    """Why no further round starts (termination, Ctrl+C, SIGTERM, a spent budget), or None."""
    resume = "; `ratchet resume` continues the campaign" if run.budget_code == PAUSED else ""
    if c.state.termination:
        return c.state.termination.code, c.state.termination.reason
    if run.stop_flag.is_set():
        return "T4", "the user asked to stop (Ctrl+C during `ratchet run`)"
    if TERMINATION_REQUESTED.is_set():  # SIGTERM whose Terminated was lost in flight
        return PAUSED, "SIGTERM: stopped between rounds; `ratchet resume` continues"
    broken = incumbent_unmeasurable(res.rounds)
    if broken:
        return PAUSED, broken
    if len(res.rounds) >= run.max_iterations:
        return (
            run.budget_code,
            f"this run's budget ({run.max_iterations} rounds) is spent{resume}",
        )
    if time.monotonic() >= run.deadline:
        return run.budget_code, f"this run's budget (--max-duration) is spent{resume}"
    short = too_short(run.deadline - time.monotonic(), took)
    if short:
        return run.budget_code, f"this run's budget (--max-duration) {short}{resume}"
    return None


def _analyze(c: Campaign, run: LoopSettings, n: int) -> tuple[Mapping[str, Any] | None, str]:
    """ANALYZE before round ``n`` (advisory: a failure is said, not raised), and a T2 reason
    when the measured efficiency reached the target."""
    try:
        analysis = analyze_campaign(c.ctx, n, profile=run.optimizer.reads_profile)
    except (RatchetError, OSError, RuntimeError) as exc:
        run.say(f"ANALYZE before round-{n} failed ({exc}); proposing without it")
        return None, ""
    target = run.efficiency_target
    if target and efficiency(analysis) >= target:
        return analysis, (
            f"{efficiency(analysis):.1%} of the measured roofline reached (target {target:.1%})"
        )
    return analysis, ""


def _prepare(c: Campaign, run: LoopSettings) -> OptimizerContext | tuple[str, str]:
    """ANALYZE before the next round: what the optimizer may read, or the T2 stop."""
    analysis, reached = _analyze(c, run, c.state.next_round)
    if reached:
        return "T2", reached
    return build_context(c, analysis)


def outside_kernel(c: Campaign, opt: Optimizer, proposal: Proposal) -> None:
    """Raise OptimizerError for a proposal whose files are not all kernel files."""
    outside = [p for p in (proposal.files or {}) if p not in c.m.kernel_source]
    if outside:
        raise OptimizerError(
            f"the {opt.name} optimizer proposed changes outside "
            f"kernel_source: {outside}; nothing was applied"
        )


def no_proposal(opt: Optimizer) -> tuple[str, str]:
    """The stop when the optimizer proposes nothing: a person takes over, or nothing is left."""
    if opt.interactive:
        return PAUSED, f"the {opt.name} optimizer hands the campaign to a person"
    return "T4", f"the {opt.name} optimizer has nothing left to try{opt.done_note()}"


def _one_round(
    c: Campaign, run: LoopSettings, ctx: OptimizerContext
) -> RoundRecord | tuple[str, str] | None:
    """Propose, apply, VALIDATE: the round's record, a stop (code, reason), or None for a
    proposal that left the kernel files unchanged. Raises OptimizerError for a proposal
    outside kernel_source or one that changed a protected file."""
    n, opt = c.state.next_round, run.optimizer
    guard = [c.root / p for p in ctx.protected]
    before = fingerprint(guard)
    run.say(f"round-{n}: asking the {opt.name} optimizer")
    proposal = opt.propose(ctx)
    if proposal is None:
        return no_proposal(opt)
    outside_kernel(c, opt, proposal)
    proposal.apply_to(c.root)
    touched = [os.path.relpath(p, c.root) for p, h in fingerprint(guard).items() if before[p] != h]
    if touched:
        raise OptimizerError(
            f"round-{n}: the {opt.name} optimizer changed protected files {touched} (the "
            "harness, tests, adapter and ratchet.yaml must stay untouched). Nothing was "
            "validated and nothing was reverted: restore them yourself (e.g. `git diff`), "
            "then `ratchet resume`"
        )
    if not kernel_changed(c.ctx):
        return None
    return _validate(c, run, n, proposal)


def round_notes(proposal: Proposal) -> dict[str, str]:
    """The notes a round records from its proposal."""
    return {
        "change": proposal.summary,
        "expected": proposal.expected,
        "next_direction": proposal.next_direction,
        "summary": proposal.summary,
        "direction": proposal.direction,
        "lesson": f"direction {proposal.direction} did not pay on this incumbent",
    }


def _validate(c: Campaign, run: LoopSettings, n: int, proposal: Proposal) -> RoundRecord:
    run.say(f"round-{n}: {proposal.summary}")
    # scope_first=False: files the optimizer's change touched outside the kernel are its round
    kw = {"bucket": proposal.bucket, "level": proposal.level, "scope_first": False}
    kw["fix"] = proposal.fix
    try:
        return c.validate(proposal.hypothesis, **kw, **round_notes(proposal))
    except KeyboardInterrupt:  # a second Ctrl+C: the engine closed the round, rolled back
        path = c.round_dir(n) / "round.json"
        if run.on_round and path.exists():
            run.on_round(read_record(path))  # the driver's table shows it too
        raise


def _observe(rec: RoundRecord, run: LoopSettings) -> None:
    """Show the closed round to the optimizer and the driver."""
    run.optimizer.observe(rec)
    n = rec.round
    run.say(f"round-{n} {rec.label} ({rec.category.value}): {rec.reason}")
    if rec.seconds:
        run.say(f"round-{n} took {time_line(rec.seconds)}")
    if run.on_round:
        run.on_round(rec)
