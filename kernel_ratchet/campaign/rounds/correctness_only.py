"""A fix round against an incumbent that passes no target shape's correctness check (a
BASELINE declared wrong on every shape: ``ratchet baseline --known-failure``).

Nothing can be paired with an incumbent whose outputs are wrong everywhere: its timings are a
wrong kernel's (or none, where its shapes errored), and the paired A/B's checks would refuse
it. So while the incumbent passes no shape, only a ``validate --fix`` round may run
(:func:`~kernel_ratchet.campaign.rounds.preconditions.preconditions` refuses any other), at the
full level (:func:`~kernel_ratchet.campaign.rounds.preconditions.round_level`), and it is judged
here on correctness alone: the candidate's own worker must pass, on every target shape, the
checks an A/B opens with (fresh inputs from the round's secret, the anti-cheat checks), and
after its focused test the harness must pass its check on every target shape. It is then
ACCEPTED with no speed claimed (gain NaN, the decision marked ``correctness_only``: the
headline and the real-training attribution count it as no gain), and its CSV becomes the
incumbent's quick and full CSVs, against which later rounds are paired as usual.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.quick_bench import EarlyHarness
from kernel_ratchet.campaign.record import RoundDraft, RoundRecord
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.campaign.rounds.level_harness import level_harness
from kernel_ratchet.errors import SchemaError
from kernel_ratchet.harness import failures
from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates

if TYPE_CHECKING:
    from collections.abc import Callable

    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.campaign.rounds.workers import RoundWorkers

#: The first words of the reason of a fix accepted on correctness alone.
FIX_ALONE = "FIX, accepted on correctness alone"
#: Why such a fix claims no speed, as its reason and the report say it.
NO_PAIR = (
    "the incumbent fails the harness's correctness check on every target shape, so no pair "
    "can be timed and no speed is claimed"
)


def judge_on_correctness(
    c: CampaignContext,
    n: int,
    draft: RoundDraft,
    art: Path,
    workers: RoundWorkers | None = None,
    early: EarlyHarness | None = None,
    abandon: Callable[[], str | None] | None = None,
) -> RoundRecord:
    """Round ``n``, a fix whose focused test passed, against an incumbent that passes no
    shape (module docstring): the harness on every target shape (``early``'s, started beside
    the test, when it is that one), each of which must pass its check. Returns the ACCEPTED
    record, or the ROLLED BACK one of what failed. ``workers``: the round's, whose candidate
    worker checks every target shape first, as an A/B's checks would (fresh inputs from the
    round's secret and the anti-cheat checks, in a process of its own); ``abandon``: why the
    round stops before its harness or its decision (a focused test running beside it
    failed), or None."""
    if (stop := abandon and abandon()) is not None:
        return draft.failed(Category.TEST, stop, now())
    if workers is not None:
        f = workers.candidate_failure(c.m.level_shape_dicts("full"))
        workers.release()  # its cached device memory, before the harness needs it
        if f is not None:
            f = replace(f, log_path=c.rel(Path(f.log_path)))
            why = f"the candidate's worker check failed: {f.sentence()}"
            return draft.failed(Category(f.category), why, now(), failure=f.to_dict())
    shapes = [s["label"] for s in c.m.target_shapes]
    c.say(
        f"round-{n}: harness, full level ({len(shapes)} shapes); the incumbent passes none, "
        "so the fix is judged on correctness alone (no paired A/B)"
    )
    csv, failed = level_harness(c, draft, art, "full", early=early)
    if failed is not None:
        return failed
    try:
        table = c.table(c.rel(csv))
    except SchemaError as exc:
        return draft.failed(Category.SCHEMA, f"benchmark CSV schema drift: {exc}", now())
    wrong = _not_passed(table, shapes, csv)
    if wrong:
        return draft.failed(Category.CORRECTNESS, wrong, now(), csv=c.rel(csv))
    if (stop := abandon and abandon()) is not None:
        return draft.failed(Category.TEST, stop, now())
    d = accepted_on_correctness(table, c.m.campaign_type)
    inc = c.state.incumbent_full_csv
    return draft.decided(d, Category.OK, now(), level="full", csv=c.rel(csv), incumbent_csv=inc)


def _not_passed(table: BenchTable, shapes: list[str], csv: Path) -> str:
    """Why the fix's harness CSV does not pass every target shape (``shapes``), or ""."""
    measured = {r.label for r in table.rows}
    missing = [x for x in shapes if x not in measured]
    failed = [r.label for r in table.rows if not r.passed]
    if not (missing or failed):
        return ""
    parts = [f"Check=FAIL on {len(failed)} shape(s): {', '.join(failed)}"] if failed else []
    if missing:
        parts.append(f"not measured: {', '.join(missing)}")
    why = failures.summary(failures.read(csv))
    return (
        "; ".join(parts)
        + (f" ({why})" if why else "")
        + "; a fix against an incumbent that passes no shape is accepted only when every "
        "target shape passes"
    )


def accepted_on_correctness(table: BenchTable, campaign_type: str) -> RoundDecision:
    """The ACCEPTED decision of a fix whose harness ``table`` passes every target shape,
    against an incumbent that passes none: no pair timed, so no gain (NaN) and no per-shape
    deltas; its own harness aggregate is kept as ``aggregate_after`` (a diagnostic)."""
    nan = math.nan
    passed = sum(r.passed for r in table.rows)
    return RoundDecision(
        status=Status.ACCEPTED,
        reason=(
            f"{FIX_ALONE}: the focused test and the harness's correctness check pass on "
            f"{passed}/{len(table.rows)} target shapes; {NO_PAIR} (nothing is paired with an "
            "incumbent whose outputs are wrong everywhere); later rounds are paired against "
            "this one"
        ),
        paired=False,
        trade_off=False,
        regressions=(),
        aggregate_before=nan,
        aggregate_after=aggregates(table, campaign_type).primary_avg,
        gain=nan,
        gain_noise=nan,
        ambiguous=False,
        per_shape=(),
        correctness_only=True,
    )
