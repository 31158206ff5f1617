"""Parallel candidates, one lineage: the loop's round runner for ``ratchet run --gpus``.

Each step of the loop asks the optimizer for up to K proposals (:meth:`Optimizer.
propose_batch`, K = the pool's slots), readies one slot per proposal (a candidate worktree with
the change applied and the round's checks, :func:`~kernel_ratchet.campaign.candidate.
stage_candidate`), has a :class:`CandidatePool` measure them all at once, and closes their rounds
(:func:`~kernel_ratchet.campaign.batch.close_batch`): at most one change accepted, the others
recorded with their own verdicts. Every candidate is one hypothesis and one round number, as in
a round of its own. The pool is the only part that knows where the candidates run
(:mod:`kernel_ratchet.fleet`: Dask workers, one per GPU or CPU slot).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kernel_ratchet.campaign.batch import close_batch, outcome_record
from kernel_ratchet.campaign.candidate import CandidateJob, stage_candidate
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.rounds.preconditions import round_level
from kernel_ratchet.campaign.state import PendingRound, Stage
from kernel_ratchet.optimizers.loop import no_proposal, outside_kernel, round_notes

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.record import RoundRecord
    from kernel_ratchet.optimizers.base import OptimizerContext, Proposal
    from kernel_ratchet.optimizers.loop import LoopSettings


class CandidatePool(Protocol):
    """Where the candidates of a parallel round are measured.

    ``slots``: how many at once. ``measure`` runs
    :func:`~kernel_ratchet.campaign.candidate.measure_candidate` on each job, at most ``slots``
    at a time, each on one device, and returns, in the jobs' order, each one's record dict or a
    sentence saying why its worker gave none (it died, hung past its limit, lost its GPU). It
    never raises for a candidate's or a worker's failure."""

    slots: int

    def measure(
        self, jobs: Sequence[CandidateJob], say: Callable[[str], None]
    ) -> list[dict[str, Any] | str]: ...


@dataclass
class ParallelRounds:
    """The round runner (:data:`~kernel_ratchet.optimizers.loop.RoundRunner`) of a pool."""

    pool: CandidatePool

    def __call__(
        self, c: Campaign, run: LoopSettings, ctx: OptimizerContext, remaining: int
    ) -> list[RoundRecord] | tuple[str, str] | None:
        done = sum(1 for r in c.state.closed if r.round > 1)
        k = max(1, min(self.pool.slots, remaining, c.m.max_iterations - done))
        proposals = run.optimizer.propose_batch(ctx, k)[:k]
        if not proposals:
            return no_proposal(run.optimizer)
        jobs = self._stage(c, run, proposals)
        if not jobs:
            return None
        rounds = ", ".join(f"round-{j.round}" for j in jobs)
        run.say(f"{rounds}: measuring {len(jobs)} candidates at once")
        results = self.pool.measure(jobs, run.say)
        records = [outcome_record(j, r) for j, r in zip(jobs, results, strict=True)]
        return close_batch(c, jobs, records)

    def _stage(
        self, c: Campaign, run: LoopSettings, proposals: Sequence[Proposal]
    ) -> list[CandidateJob]:
        """One slot per proposal that changes the kernel files; numbered in proposal order."""
        jobs: list[CandidateJob] = []
        for slot, p in enumerate(proposals):
            outside_kernel(c, run.optimizer, p)
            n = c.state.next_round + len(jobs)
            level = round_level(c.ctx, p.level, p.fix)
            pending = PendingRound(
                n, Stage.MEASURING, now(), p.hypothesis, p.bucket, level, notes=round_notes(p),
                fix=p.fix,
            )  # fmt: skip
            job = stage_candidate(c.ctx, slot, n, p.apply_to, pending)
            if job is None:
                run.say(f"candidate {slot}: {p.summary}: the kernel files are unchanged; skipped")
                continue
            run.say(f"round-{n} (slot {slot}): {p.summary}")
            jobs.append(job)
        return jobs
