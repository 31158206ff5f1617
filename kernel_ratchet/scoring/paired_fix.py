"""The paired decision of a correctness fix: accepted when it is not slower (non-inferiority).

A change made to fix a wrong result, a race or a crash has no speed to claim; the question is
whether it costs speed. :func:`kernel_ratchet.scoring.paired.decide_paired` with ``fix=True``
keeps gates 1 and 1b (a confirmed regression of a shape beyond the threshold, or a confirmed
slower time-weighted step, rolls it back) and then replaces the gain gates with this one:

* ACCEPTED when the aggregate's CI lies above ``1 - eq`` (any slowdown is inside the no-gain
  margin) and no shape reads ``regression_threshold`` slower without a CI that settles it;
  shapes confirmed slower by less than the threshold are named as a trade-off. No gain is
  claimed: the reason says the round is a fix, and the chain carries its measured ratio.
* ROLLED BACK when the aggregate's CI lies below ``1 - eq``: the fix costs more than the margin.
* otherwise AMBIGUOUS: the sequential rule measures on, and a fix still unsettled when the
  round budget is spent is rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired_rows import ShapeRow, unresolved

#: The first words of an accepted fix's reason.
FIX = "FIX, not slower"


def judge_fix(r: Any, small: Sequence[ShapeRow], unconfirmed: Sequence[ShapeRow]) -> Any:
    """The fix gate (module docstring) on a reading that passed gates 1 and 1b: ``r`` is
    :mod:`.paired`'s reading (its rows, aggregate, CI and settings), the result its
    ``PairedDecision``."""
    margin = f"{-r.eq * 100:+.2f}%"
    thr_s = f"{r.thr * 100:g}%"
    if r.lo >= 1.0 - r.eq and not unconfirmed:
        ok = (
            f"{FIX}: the aggregate's CI lies above the {margin} no-gain margin and no shape "
            f"regressed ≥ {thr_s}; no gain is claimed; {r.head}"
        )
        if small:
            names = ", ".join(x.label for x in small)
            ok += f"; trade-off: shape(s) confirmed slower by less than {thr_s}: {names}"
        return r.result(Status.ACCEPTED, ok, small)
    if r.hi < 1.0 - r.eq:
        why = (
            f"the fix is slower than the {margin} margin allows (the aggregate's CI lies below it)"
        )
        return r.result(Status.ROLLED_BACK, f"{why}; {r.head}", small)
    why = f"a fix is accepted once the aggregate's CI lies above {margin}"
    if unconfirmed:
        names = ", ".join(x.label for x in unconfirmed)
        why += f" and no shape reads ≥ {thr_s} slower unconfirmed ({names} do)"
    return r.ambiguous(why, list(unconfirmed) or unresolved(r.rows) or list(r.rows))
