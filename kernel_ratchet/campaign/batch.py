"""Closing a parallel round: at most one change accepted, every other candidate recorded.

The candidates of one parallel round were measured at once, each against the same incumbent
on its own device (:mod:`~kernel_ratchet.campaign.candidate`). Each keeps its round number
and its own verdict; of those the paired A/B accepted, the one with the largest gain is the
round's change, and every other accepted one is closed as ROLLED BACK, category
``superseded`` (its gain stands in its record; the direction may be tried again on the new
incumbent). The rounds close in number order through the engine's write-ahead path
(:meth:`~kernel_ratchet.campaign.engine.Campaign.close_measured`), so a coordinator killed
while closing resumes like any campaign.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.candidate import CandidateJob, lost_record
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.scoring.decision import Status

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign


def best_of(records: Sequence[RoundRecord]) -> RoundRecord | None:
    """The accepted record with the largest gain (the lower round number on a tie; fixes
    accepted on correctness alone claim no gain, so among them the lowest round wins)."""
    accepted = [r for r in records if r.accepted and r.gain is not None]
    return max(accepted, key=lambda r: (0.0 if r.fix_alone else r.gain, -r.round), default=None)


def superseded(record: RoundRecord, best: RoundRecord) -> RoundRecord:
    """``record`` (accepted by its own A/B) rolled back because ``best`` gained more, or,
    for fixes accepted on correctness alone, because ``best`` came first."""
    if record.fix_alone or best.fix_alone:
        why = (
            f"superseded: round-{best.round} of the same parallel round is its one change "
            "(fixes accepted on correctness alone claim no gain to rank them by: the first "
            f"in round order is kept); measured: {record.reason}"
        )
        return _rolled_back(record, why, "fixed the incumbent as well")
    why = (
        f"superseded: round-{best.round} of the same parallel round gained more "
        f"({best.gain:+.2%} against {record.gain:+.2%}) and is the round's one change; "
        f"measured: {record.reason}"
    )
    return _rolled_back(record, why, f"paid {record.gain:+.2%}")


def _rolled_back(record: RoundRecord, why: str, did: str) -> RoundRecord:
    decision = replace(record.decision, status=Status.ROLLED_BACK, reason=why)
    lesson = (
        f"direction {record.direction_key} {did} on round-{record.incumbent_round}'s "
        "incumbent; try it again on the new one"
    )
    return replace(
        record,
        status=Status.ROLLED_BACK,
        category=Category.SUPERSEDED,
        reason=why,
        decision=decision,
        lesson=lesson,
    )


def outcome_record(job: CandidateJob, result: dict | str) -> RoundRecord:
    """A worker's result as the candidate's record: its record, or (a sentence saying why the
    worker gave none) the record of a lost candidate."""
    if isinstance(result, str):
        return lost_record(job, result)
    return RoundRecord.from_dict(result)


def close_batch(
    c: Campaign, jobs: Sequence[CandidateJob], records: Sequence[RoundRecord]
) -> list[RoundRecord]:
    """Close the candidates' rounds in number order, the best accepted one as the round's
    change and the other accepted ones superseded; returns the closed records."""
    best = best_of(records)
    closed = []
    for job, rec in sorted(zip(jobs, records, strict=True), key=lambda x: x[0].round):
        if rec.accepted and best is not None and rec.round != best.round:
            rec = superseded(rec, best)
        closed.append(c.close_measured(job.pending, rec))
    return closed
