"""The final report's top three next steps, read from the campaign rather than a fixed list.

In order, as far as the campaign gives them:

* the driver's newest stated next direction (``--next``);
* the rolled-back round without a verdict (interrupted, too noisy, unconfirmed: not verified
  ineffective) whose measured gain was highest, to revisit;
* the shape the paired chain moved least (or, without an accepted round, the slowest shape of
  the full validation), to analyze with ``ratchet analyze``;
* ``ratchet calibrate`` when no minimum detectable effect is set.

Generic steps fill the list to three when the campaign says less.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.scoring.decision import Status

#: What fills the list when the campaign gives fewer than three steps.
GENERIC = (
    "re-profile the largest shape",
    "revisit the most promising rolled-back direction with a different approach",
    "compare with the vendor library",
)


def next_steps(
    closed: list[ClosedEntry],
    nexts: list[str],
    paired: Mapping[str, float],
    final: Mapping[str, float],
    metric: str,
    calibrated: bool,
) -> list[str]:
    """Three steps. ``nexts``: the drivers' next directions, newest first; ``paired``: each
    shape's paired-chain gain (accepted rounds' per-shape ratios multiplied, minus 1);
    ``final``: each shape's primary value in the full validation (``metric``)."""
    steps = [f"the driver's next direction: {nexts[0]}"] if nexts else []
    open_ = [
        r
        for r in closed
        if r.status is Status.ROLLED_BACK
        and not r.verified_ineffective
        and not r.rehearsal
        and r.gain is not None
    ]
    if open_:
        r = max(open_, key=lambda e: e.gain or 0.0)
        steps.append(
            f"revisit round-{r.round} ({r.hypothesis}): rolled back without a verdict "
            f"({r.category.value}) at {r.gain * 100:+.2f}%"
        )
    if paired:
        label = min(paired, key=paired.__getitem__)
        steps.append(
            f"`ratchet analyze` {label}: the shape the paired chain moved least "
            f"({paired[label] * 100:+.2f}%)"
        )
    elif final:
        label = min(final, key=final.__getitem__)
        steps.append(
            f"`ratchet analyze` {label}: the lowest {metric} of the full validation "
            f"({final[label]:.4g})"
        )
    if not calibrated:
        steps.append(
            "`ratchet calibrate`: no minimum detectable effect is set, so a gain is claimed "
            "on its CI alone"
        )
    steps += [g for g in GENERIC if len(steps) < 3]
    return steps[:3]
