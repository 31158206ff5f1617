"""A campaign's headline: the incumbent's paired chain against the BASELINE with its CI.

The chain's CI is :func:`~kernel_ratchet.scoring.chain.chain_interval` over the accepted
rounds' paired ratios (each against its incumbent, at its recorded CI level); the
time-weighted chain is the same over the rounds' time-weighted step ratios, given only where
every accepted round recorded one. A fix accepted on correctness alone (its incumbent passed
no shape, so nothing was timed) is no step of the chain: it is counted apart, as unmeasured.
The final report's headline and the dashboard's both read this, so they show the same
numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernel_ratchet.campaign.render import pct
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.scoring.chain import chain_interval

#: The level of a paired CI recorded before decisions kept theirs.
DEFAULT_LEVEL = 0.95
#: The headline CI's level.
LEVEL = 0.95

Interval = tuple[float, float, float]  # (ratio, low, high), speed ratios


@dataclass(frozen=True)
class ChainHeadline:
    """``chain``: the incumbent's paired chain (a fraction, 0.04 = +4%); ``geomean``: the chain
    of the accepted rounds' geomean ratios with its CI (None: an accepted round has no paired
    A/B, so no CI); ``weighted``: the time-weighted chain with its CI (None unless every
    accepted round recorded one); ``accepted``: how many rounds the chain holds;
    ``unmeasured``: the fixes accepted on correctness alone, outside it."""

    chain: float
    accepted: int
    geomean: Interval | None
    weighted: Interval | None
    unmeasured: int = 0

    def text(self) -> str:
        """``+4.04% [+1.2%, +6.9%] (95% CI, 2 accepted round(s), ...)``, as the report says."""
        fixes = (
            f"; not in the chain, which counts from them: {self.unmeasured} fix(es) accepted on "
            "correctness alone, their incumbent passing no shape (no speed measured)"
            if self.unmeasured
            else ""
        )
        if self.geomean is None:
            return f"{pct(self.chain, 2)} (no CI: an accepted round has no paired A/B{fixes})"
        if self.unmeasured and not self.accepted:
            return f"{pct(self.chain, 2)} (no round's speed measured{fixes})"
        _, lo, hi = self.geomean
        text = f"{pct(self.chain, 2)} [{pct(lo - 1, 2)}, {pct(hi - 1, 2)}] ({LEVEL:.0%} CI, "
        text += f"{self.accepted} accepted round(s), geomean over each round's shapes"
        if self.weighted is not None:
            w, wlo, whi = self.weighted
            text += f"; time-weighted step {pct(w - 1, 2)} [{pct(wlo - 1, 2)}, {pct(whi - 1, 2)}]"
        return text + fixes + ")"


def chain_headline(chain: float, accepted: Sequence[RoundDecision | None]) -> ChainHeadline:
    """The headline of an incumbent whose paired chain is ``chain``, from the decisions of the
    accepted rounds behind it (in round order; None: a round without a recorded decision)."""
    unmeasured = sum(1 for d in accepted if d is not None and d.correctness_only)
    timed = [d for d in accepted if d is None or not d.correctness_only]
    steps, weighted = [], []
    for d in timed:
        if d is None or not d.paired or d.gain_ci is None:
            return ChainHeadline(chain, len(timed), None, None, unmeasured)
        level = d.ci_level or DEFAULT_LEVEL
        steps.append((1 + d.gain, 1 + d.gain_ci[0], 1 + d.gain_ci[1], level))
        tw = d.time_weighted
        if tw:
            weighted.append((tw["ratio"], tw["ci_low"], tw["ci_high"], tw["level"]))
    geomean = chain_interval(steps, LEVEL)
    both = bool(steps) and len(weighted) == len(steps)
    return ChainHeadline(
        chain, len(steps), geomean, chain_interval(weighted, LEVEL) if both else None, unmeasured
    )
