"""Chain integrity (SPEC section 6): accepted rounds never lose ground.

The primary aggregate of the accepted rounds, in round order, must be non-decreasing within a
relative ``tolerance`` (measurement noise). Each accepted round is compared with the *best*
accepted value before it, so a run of small drops cannot add up unnoticed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist


def check_chain(
    accepted_primary: Sequence[tuple[int, float]], tolerance: float = 0.01
) -> list[str]:
    """Problems in the accepted chain ``[(round, primary aggregate), ...]``; empty = intact.

    One message per violation: a round number not above the previous one, a value that is not
    positive and finite, or a value more than ``tolerance`` (relative) below the best earlier
    accepted value. Raises ValueError for a negative tolerance.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    problems: list[str] = []
    best: tuple[int, float] | None = None
    prev_round: int | None = None
    for rnd, value in accepted_primary:
        if prev_round is not None and rnd <= prev_round:
            problems.append(
                f"round-{rnd} is listed after round-{prev_round}; accepted rounds must be in "
                "strictly increasing order"
            )
        prev_round = rnd
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            problems.append(f"round-{rnd} has primary aggregate {value!r}; it must be positive")
            continue
        if best is not None and value < best[1] * (1.0 - tolerance):
            drop = 1.0 - value / best[1]
            problems.append(
                f"round-{rnd} primary aggregate {value:.4g} is {drop * 100:.2f}% below "
                f"round-{best[0]} ({best[1]:.4g}), beyond the {tolerance * 100:g}% tolerance: "
                "single harness runs at different times disagree with the paired chain that "
                "decided; re-measure before trusting either"
            )
        if best is None or value > best[1]:
            best = (rnd, value)
    return problems


def chain_interval(
    steps: Sequence[tuple[float, float, float, float]], level: float = 0.95
) -> tuple[float, float, float]:
    """The speed ratio of a chain of accepted rounds and its CI at ``level``.

    ``steps`` holds each round's ``(ratio, ci_low, ci_high, ci_level)`` against its incumbent.
    The chain's ratio is their product; its CI is the delta method in log space, each side on
    its own: a round's lower (upper) log standard error is the log distance from its ratio to
    its CI's lower (upper) end over the normal quantile of its level, and the rounds
    (independent paired runs) add in variance on each side. A bootstrap CI is skewed; this
    keeps its skew, so one round's chain at the round's own level is exactly its CI.
    ``(1, 1, 1)`` for no step.
    """
    dist = NormalDist()
    log_r, var_lo, var_hi = 0.0, 0.0, 0.0
    for ratio, lo, hi, lvl in steps:
        z = dist.inv_cdf(0.5 + lvl / 2.0)
        log_r += math.log(ratio)
        var_lo += (max(math.log(ratio / lo), 0.0) / z) ** 2
        var_hi += (max(math.log(hi / ratio), 0.0) / z) ** 2
    z = dist.inv_cdf(0.5 + level / 2.0)
    return (
        math.exp(log_r),
        math.exp(log_r - z * math.sqrt(var_lo)),
        math.exp(log_r + z * math.sqrt(var_hi)),
    )
