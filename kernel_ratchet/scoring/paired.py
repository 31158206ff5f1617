"""The paired decision: verdicts on speed-ratio CIs and the gates that accept or roll back.

The statistics (per-round speed ratios, per-shape medians, bootstrap CIs) are
:mod:`kernel_ratchet.scoring.paired_stats`; when the decision is taken during a run (looks,
futility stop) is :mod:`kernel_ratchet.scoring.paired_looks`. SPEC section 6.

* **Multiple comparisons**: per-shape CIs are Bonferroni-adjusted, level ``1 - alpha/(S·L)``
  for S shapes and L planned looks, so all shape verdicts hold together with probability
  ≥ 1 - alpha. Holm is a p-value procedure; Bonferroni is its simultaneous-interval
  counterpart.
* **Sequential looks**: the adaptive loop decides after k_start rounds and again after more
  (see :func:`kernel_ratchet.scoring.paired_looks.look_schedule`); each look is another chance
  for a false accept (measured in simulation: 7 looks at level 95% gave 6.5% A/A accepts
  instead of 2.5%). ``looks=L`` splits alpha evenly over the L planned looks (Bonferroni over
  looks, conservative because looks share data), for the aggregate CI too: level
  ``1 - alpha/L``.
* **Verdicts** (per shape and aggregate): :mod:`.paired_rows`, with the equivalence margin
  ``eq = max(min_detectable, equivalence_floor)``.

The decision (:func:`decide_paired`), gates in order:

1. a shape with ``ratio ≤ 1 - regression_threshold`` and verdict SLOWER (CI excludes "no
   slowdown") is a confirmed ≥5% regression → ROLLED BACK;
1b. the *time-weighted* step (:mod:`.paired_weighted`) is confirmed slower (its CI lies below
   1.0x) → ROLLED BACK, whatever the geomean says: unresolved small shapes cannot outvote the
   shapes that hold the time;
2. the aggregate is *improved* when ``lo > 1`` and ``ratio - 1 ≥ min_detectable``; then
   ACCEPTED, a trade-off when some shapes are SLOWER by less than the threshold (named) --
   unless a shape's point estimate is ≥5% slower without a confirming CI, or the time-weighted
   step reads slower (point estimate below 1.0x): then AMBIGUOUS, measuring the unresolved
   shapes on;
3. ``lo > 1`` but the gain is below ``min_detectable`` → ROLLED BACK (real but not claimable);
4. ``lo ≤ 1 < 1 + eq < hi`` (a claimable gain is neither shown nor excluded) → AMBIGUOUS;
5. otherwise ROLLED BACK: no gain (``hi ≤ 1 + eq``) or slower. When the aggregate reads slower
   by more than ``eq`` but its CI still holds 1 (verdict AMBIGUOUS), the rollback is certain
   but the slowdown is not confirmed: with ``confirm_slowdown`` (the default) every shape is
   named undecided until the round budget is spent, so the loop measures on until the verdict
   is SLOWER or the budget ends (measured on an H200 with ``scripts/ab_validation.py``: a planted
   3% slowdown stopped at 10 rounds read SLOWER in only 9 of 13 trials).

Every decision reports the time-weighted effect with its CI (``time_weighted``) and names the
*unresolved* shapes, whose CI half-width is wider than the effect they claim (``unresolved``).

AMBIGUOUS is a ROLLED BACK decision with ``ambiguous=True`` and ``undecided`` naming the
shapes worth measuring more (:func:`needs_more`); with ``exhausted=True`` (the round budget is
spent) its reason says "too noisy to confirm".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired_fix import judge_fix
from kernel_ratchet.scoring.paired_rows import (
    PairedVerdict,
    ShapeRow,
    classify,
    confirmed_regressions,
    unresolved,
)
from kernel_ratchet.scoring.paired_stats import (
    bootstrap_log_medians,
    few_rounds,
    log_ratios,
    percentile_ci,
    phase_ratios,
)
from kernel_ratchet.scoring.paired_weighted import TimeWeighted, time_weighted

#: Family-wise error rate of the CIs: 95% aggregate, Bonferroni-split across shapes.
ALPHA = 0.05
#: Bootstrap replicates. 6,000 puts the 0.17% tail of a 5-shape, 3-look per-shape CI
#: (level 1 - 0.05/15) on 10 replicates.
N_BOOT = 6000
#: Smallest relative effect worth chasing with more rounds (SPEC's chain noise allowance, 1%).
EQUIVALENCE_FLOOR = 0.01
#: Fewest rounds per shape the bootstrap is run on.
MIN_ROUNDS = 3


@dataclass(frozen=True)
class PairedDecision:
    """The paired decision and the numbers behind it (ratios are speed ratios, >1 faster).

    ``regressions`` names the confirmed SLOWER shapes (≥ threshold when rolled back for them,
    below it for a trade-off); ``undecided`` the shapes worth measuring more when ``ambiguous``;
    ``time_weighted`` the step's time-weighted effect and ``unresolved`` the shapes whose CI is
    wider than their effect.
    """

    status: Status
    verdict_aggregate: PairedVerdict
    reason: str
    per_shape: tuple[ShapeRow, ...]
    aggregate_ratio: float
    aggregate_ci_low: float
    aggregate_ci_high: float
    trade_off: bool
    regressions: tuple[str, ...]
    ambiguous: bool
    undecided: tuple[str, ...]
    min_detectable: float
    regression_threshold: float
    shape_ci_level: float
    aggregate_ci_level: float
    looks: int = 1
    time_weighted: TimeWeighted | None = None
    unresolved: tuple[str, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    @property
    def gain(self) -> float:
        return self.aggregate_ratio - 1.0

    @property
    def regressed(self) -> tuple[str, ...]:
        """The shapes of a gate-1 rollback: confirmed slower by at least the threshold
        (``regressions`` also names shapes confirmed slower by less)."""
        return tuple(
            r.label for r in confirmed_regressions(self.per_shape, self.regression_threshold)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "verdict_aggregate": self.verdict_aggregate.value,
            "reason": self.reason,
            "per_shape": [r.to_dict() for r in self.per_shape],
            "aggregate_ratio": self.aggregate_ratio,
            "aggregate_ci_low": self.aggregate_ci_low,
            "aggregate_ci_high": self.aggregate_ci_high,
            "trade_off": self.trade_off,
            "regressions": list(self.regressions),
            "ambiguous": self.ambiguous,
            "undecided": list(self.undecided),
            "min_detectable": self.min_detectable,
            "regression_threshold": self.regression_threshold,
            "shape_ci_level": self.shape_ci_level,
            "aggregate_ci_level": self.aggregate_ci_level,
            "looks": self.looks,
            "time_weighted": None if self.time_weighted is None else self.time_weighted.to_dict(),
            "unresolved": list(self.unresolved),
        }


def _fmt(ratio: float, lo: float, hi: float) -> str:
    return f"{ratio:.4f}x [{lo:.4f}, {hi:.4f}]"


def _shapes(rows: Sequence[ShapeRow]) -> str:
    return "; ".join(f"{r.label} {_fmt(r.ratio, r.ci_low, r.ci_high)}" for r in rows)


@dataclass(frozen=True)
class _Reading:
    """What the gates read: the shape rows, the aggregate and its CI, and the settings."""

    rows: tuple[ShapeRow, ...]
    agg: float
    lo: float
    hi: float
    thr: float
    mde: float
    eq: float
    exhausted: bool
    levels: tuple[float, float]  # (per-shape CI level, aggregate CI level)
    looks: int
    tw: TimeWeighted

    @property
    def rounds(self) -> str:
        n = sorted({r.n_rounds for r in self.rows})
        return f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"

    @property
    def head(self) -> str:
        return (
            f"aggregate speed ratio {_fmt(self.agg, self.lo, self.hi)} "
            f"({(self.agg - 1) * 100:+.2f}%, {self.levels[1]:.1%} hierarchical bootstrap CI, "
            f"{self.rounds} paired rounds per shape, per-shape CIs at {self.levels[0]:.1%}"
            f"{few_rounds(min(r.n_rounds for r in self.rows), self.levels[1])}); "
            f"{self.tw.text()}{self.open_text}"
        )

    @property
    def open_text(self) -> str:
        names = [r.label for r in unresolved(self.rows)]
        return f"; unresolved (CI wider than the effect): {', '.join(names)}" if names else ""

    def result(
        self,
        status: Status,
        reason: str,
        regs: Sequence[ShapeRow] = (),
        undecided: Sequence[ShapeRow] = (),
    ) -> PairedDecision:
        return PairedDecision(
            status,
            classify(self.lo, self.hi, self.eq),
            reason,
            self.rows,
            self.agg,
            self.lo,
            self.hi,
            status is Status.ACCEPTED and bool(regs),
            tuple(r.label for r in regs),
            bool(undecided),
            tuple(r.label for r in undecided),
            self.mde,
            self.thr,
            *self.levels,
            self.looks,
            self.tw,
            tuple(r.label for r in unresolved(self.rows)),
        )

    def ambiguous(self, why: str, undecided: Sequence[ShapeRow]) -> PairedDecision:
        tail = (
            f"still ambiguous after {self.rounds} rounds: too noisy to confirm"
            if self.exhausted
            else f"measure more: {', '.join(r.label for r in undecided)}"
        )
        reason = f"AMBIGUOUS: {self.head}; {why}; {tail}"
        return self.result(Status.ROLLED_BACK, reason, (), undecided)


def _accept(r: _Reading, small: Sequence[ShapeRow], thr_s: str) -> PairedDecision:
    """Gate 2: an improved aggregate with no large slowdown left open."""
    floor = (
        f"the {(r.agg - 1) * 100:+.2f}% gain is ≥ the minimum detectable effect {r.mde * 100:.2f}%"
        if r.mde > 0
        else "no minimum detectable effect is set (`ratchet calibrate` measures this machine's)"
    )
    ok = f"{r.head}; the aggregate's CI excludes no gain and {floor}; no shape regressed ≥ {thr_s}"
    if small:
        ok += f"; trade-off: shape(s) confirmed slower by less than {thr_s}: {_shapes(small)}"
    return r.result(Status.ACCEPTED, ok, small)


def _no_gain(r: _Reading, small: Sequence[ShapeRow], confirm_slowdown: bool) -> PairedDecision:
    """Gate 5: no claimable gain; an unconfirmed slowdown is measured on (``confirm_slowdown``)."""
    why = "slower" if r.hi < 1.0 else f"no gain (CI upper bound ≤ {(r.eq) * 100:+.2f}%)"
    if confirm_slowdown and r.hi >= 1.0 and r.agg <= 1.0 - r.eq and not r.exhausted:
        more = (
            f"; reads {(1.0 - r.agg) * 100:.2f}% slower without a CI that confirms it: "
            "measuring on to tell a slowdown from noise"
        )
        return r.result(Status.ROLLED_BACK, f"{r.head}; {why}{more}", small, r.rows)
    return r.result(Status.ROLLED_BACK, f"{r.head}; {why}", small)


def _judge(r: _Reading, confirm_slowdown: bool, fix: bool = False) -> PairedDecision:
    """Gates 1-5 of the module docstring (a fix: 1, 1b, then :mod:`.paired_fix`)."""
    thr_s = f"{r.thr * 100:g}%"
    slower = [x for x in r.rows if x.verdict is PairedVerdict.SLOWER]
    big = confirmed_regressions(r.rows, r.thr)
    small = [x for x in slower if x.ratio > 1.0 - r.thr]
    unconfirmed = [
        x for x in r.rows if x.ratio <= 1.0 - r.thr and x.verdict is not PairedVerdict.SLOWER
    ]
    if fix:
        return judge_fix(r, small, unconfirmed)
    improved = r.lo > 1.0 and r.agg - 1.0 >= r.mde
    if big:
        why = f"{len(big)} shape(s) regressed ≥ {thr_s} with CIs excluding no slowdown"
        return r.result(Status.ROLLED_BACK, f"{why}: {_shapes(big)}; {r.head}", big + small)
    if r.tw.confirmed_slower:
        why = (
            f"the time-weighted effect is confirmed negative: a step running every shape "
            f"{'with its weight' if set(r.tw.weights.values()) != {1.0} else 'once'} is slower"
        )
        return r.result(Status.ROLLED_BACK, f"{why}; {r.head}", small)
    if improved and unconfirmed:
        why = (
            f"the gain is real but shape(s) {_shapes(unconfirmed)} read ≥ {thr_s} slower "
            "without a CI that confirms or excludes it"
        )
        return r.ambiguous(why, unconfirmed)
    if improved and r.tw.ratio < 1.0:
        why = (
            "the geomean gain is real but the time-weighted step reads slower, without a CI "
            "that confirms it: no gain is claimed while the step may be slower"
        )
        return r.ambiguous(why, unresolved(r.rows) or list(r.rows))
    if improved:
        return _accept(r, small, thr_s)
    if r.lo > 1.0:
        why = (
            f"the gain is real but below this machine's minimum detectable effect "
            f"{r.mde * 100:.2f}%, so it is not claimed"
        )
        return r.result(Status.ROLLED_BACK, f"{r.head}: {why}")
    if r.hi > 1.0 + r.eq:
        open_ = [x for x in r.rows if x.verdict is PairedVerdict.AMBIGUOUS or x in unconfirmed]
        why = f"the CI neither excludes no gain nor rules out a gain above {r.eq * 100:.2f}%"
        return r.ambiguous(why, open_ or list(r.rows))
    return _no_gain(r, small, confirm_slowdown)


def _shape_rows(
    per_shape_samples: Mapping[str, PairedSamples],
    campaign_type: str,
    level: float,
    eq: float,
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[list[ShapeRow], list[np.ndarray], list[float]]:
    """Per shape: its row (ratio, CI at ``level``, verdict), bootstrap log medians and log
    point estimate."""
    rows, boots, points = [], [], []
    for label, s in per_shape_samples.items():
        if s.n_rounds < MIN_ROUNDS:
            raise ValueError(f"shape {label!r} has {s.n_rounds} rounds; need ≥ {MIN_ROUNDS}")
        x = log_ratios(s, campaign_type)
        boot = bootstrap_log_medians(x, n_boot, rng)
        point = float(np.median(x))
        lo, hi = percentile_ci(boot, level)
        verdict = classify(lo, hi, eq)
        rows.append(ShapeRow(label, math.exp(point), lo, hi, verdict, s.n_rounds, phase_ratios(s)))
        boots.append(boot)
        points.append(point)
    return rows, boots, points


def decide_paired(
    per_shape_samples: Mapping[str, PairedSamples],
    campaign_type: str,
    *,
    regression_threshold: float = 0.05,
    min_detectable: float = 0.0,
    equivalence_floor: float = EQUIVALENCE_FLOOR,
    alpha: float = ALPHA,
    n_boot: int = N_BOOT,
    rng_seed: int = 0,
    exhausted: bool = False,
    looks: int = 1,
    confirm_slowdown: bool = True,
    weights: Mapping[str, float] | None = None,
    fix: bool = False,
) -> PairedDecision:
    """Accept or roll back from paired per-round times (gates in the module docstring).

    ``regression_threshold``, ``min_detectable`` and ``equivalence_floor`` are relative
    (0.05 = 5%). ``looks`` is the number of planned sequential looks alpha is split over.
    ``exhausted`` says the round budget is spent (changes only the reason of an AMBIGUOUS
    outcome). ``confirm_slowdown``: gate 5's measuring on of an unconfirmed slowdown.
    ``weights``: label -> how often a step runs the shape, for the time-weighted effect (1
    where absent). ``fix``: judged as a correctness fix (:mod:`.paired_fix`). Raises
    ValueError for a weight that is not positive, no shapes, fewer than :data:`MIN_ROUNDS`
    rounds in a shape, or an unknown campaign type. Deterministic for a given ``rng_seed``.
    """
    if not per_shape_samples:
        raise ValueError("decide_paired needs at least one shape")
    if looks < 1:
        raise ValueError(f"looks must be ≥ 1, got {looks}")
    rng = np.random.default_rng(rng_seed)
    alpha = alpha / looks
    shape_level = 1.0 - alpha / len(per_shape_samples)
    eq = max(min_detectable, equivalence_floor)
    per = per_shape_samples
    rows, boots, points = _shape_rows(per, campaign_type, shape_level, eq, n_boot, rng)
    agg_lo, agg_hi = percentile_ci(np.mean(boots, axis=0), 1.0 - alpha)
    tw = time_weighted(
        per_shape_samples,
        campaign_type,
        weights,
        level=1.0 - alpha,
        n_boot=n_boot,
        rng=np.random.default_rng([rng_seed, 1]),
    )
    reading = _Reading(
        tuple(rows),
        math.exp(float(np.mean(points))),
        agg_lo,
        agg_hi,
        regression_threshold,
        min_detectable,
        eq,
        exhausted,
        (shape_level, 1.0 - alpha),
        looks,
        tw,
    )
    return _judge(reading, confirm_slowdown, fix)


def needs_more(decision: PairedDecision) -> list[str]:
    """Labels of the shapes whose further rounds could change an AMBIGUOUS decision, or
    confirm the slowdown of a rollback (gate 5); empty when the decision is settled."""
    return list(decision.undecided)
