"""Paired, interleaved A/B statistics and the paired decision (SPEC section 6, issue 5).

Input: for every shape, per-round times in milliseconds of the incumbent and the candidate,
measured in the same session, interleaved, one value per round, side and phase
(:class:`PairedSamples`). Everything here is pure numpy with a seeded RNG, so a decision can be
recomputed bit for bit from the recorded raw times.

Method
------
* **Per-round ratio** (a *speed* ratio, > 1 means the candidate is faster):
  ``r_i = T_inc,i / T_cand,i`` where ``T`` is the primary metric's time: the forward time for
  ``compute_fwd``; ``fwd_ms + bwd_ms`` for ``compute_fwd_bwd`` (the combined step
  ``6·M·N·K/(fwd+bwd)``: its ratio is the ratio of summed times) and for ``memory`` with a
  backward (step bandwidth = total bytes / total time, bytes identical on both sides).
* **Per shape**: ``ratio = exp(median_i log r_i)`` (the median of the per-round ratios; for an
  even count the geometric mean of the two middle ones, so A/B and B/A are exact inverses).
  CI: percentile bootstrap of that median, resampling rounds with replacement.
* **Multiple comparisons**: per-shape CIs are Bonferroni-adjusted, level ``1 - alpha/(S·L)``
  for S shapes and L planned looks, so all shape verdicts hold together with probability
  ≥ 1 - alpha. Holm is a p-value procedure; Bonferroni is its simultaneous-interval
  counterpart.
* **Sequential looks**: the adaptive loop decides after k_start rounds and again after more
  (see :func:`kernel_ratchet.harness.ab.look_schedule`); each look is another chance for a
  false accept (measured in simulation: 7 looks at level 95% gave 6.5% A/A accepts instead of
  2.5%). ``looks=L`` splits alpha evenly over the L planned looks (Bonferroni over looks,
  conservative because looks share data), for the aggregate CI too: level ``1 - alpha/L``.
* **Aggregate**: ``exp(mean_s log ratio_s)`` (geomean over shapes). Its CI is a hierarchical
  bootstrap at level ``1 - alpha/L``: each replicate resamples the rounds *within* every shape
  and averages the per-shape log medians. The shapes are not resampled: they are the fixed set
  the aggregate is defined over, not a sample from a population. Rounds are treated as
  independent within a shape and shapes as independent of each other (pairing inside a round
  already cancels drift common to both sides).
* **Verdicts** (per shape and aggregate) from a CI ``[lo, hi]`` and an equivalence margin
  ``eq = max(min_detectable, equivalence_floor)``: FASTER ``lo > 1``; SLOWER ``hi < 1``; SAME
  ``1/(1+eq) ≤ lo`` and ``hi ≤ 1+eq``; AMBIGUOUS otherwise (the CI holds 1 and reaches beyond
  the margin).

The decision (:func:`decide_paired`), gates in order:

1. a shape with ``ratio ≤ 1 - regression_threshold`` and verdict SLOWER (CI excludes "no
   slowdown") is a confirmed ≥5% regression → ROLLED BACK;
2. the aggregate is *improved* when ``lo > 1`` and ``ratio - 1 ≥ min_detectable``; then
   ACCEPTED, a trade-off when some shapes are SLOWER by less than the threshold (named) --
   unless a shape's point estimate is ≥5% slower without a confirming CI: then AMBIGUOUS;
3. ``lo > 1`` but the gain is below ``min_detectable`` → ROLLED BACK (real but not claimable);
4. ``lo ≤ 1 < 1 + eq < hi`` (a claimable gain is neither shown nor excluded) → AMBIGUOUS;
5. otherwise ROLLED BACK: no gain (``hi ≤ 1 + eq``) or slower. When the aggregate reads slower
   by more than ``eq`` but its CI still holds 1 (verdict AMBIGUOUS), the rollback is certain
   but the slowdown is not confirmed: with ``confirm_slowdown`` (the default) every shape is
   named undecided until the round budget is spent, so the loop measures on until the verdict
   is SLOWER or the budget ends (H200, 2026-11-30: a planted 3% slowdown stopped at 10 rounds
   read SLOWER in only 9 of 13 trials).

AMBIGUOUS is a ROLLED BACK decision with ``ambiguous=True`` and ``undecided`` naming the
shapes worth measuring more (:func:`needs_more`); with ``exhausted=True`` (the round budget is
spent) its reason says "too noisy to confirm".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import CAMPAIGN_TYPES

#: Family-wise error rate of the CIs: 95% aggregate, Bonferroni-split across shapes.
ALPHA = 0.05
#: Bootstrap replicates. 6,000 puts the 0.17% tail of a 5-shape, 3-look per-shape CI
#: (level 1 - 0.05/15) on 10 replicates.
N_BOOT = 6000
#: Smallest relative effect worth chasing with more rounds (SPEC's chain noise allowance, 1%).
EQUIVALENCE_FLOOR = 0.01
#: Fewest rounds per shape the bootstrap is run on.
MIN_ROUNDS = 3
PHASES = ("fwd", "bwd")


class PairedVerdict(str, Enum):
    """How one shape (or the aggregate) moved, judged on its confidence interval."""

    FASTER = "FASTER"
    SLOWER = "SLOWER"
    SAME = "SAME"
    AMBIGUOUS = "AMBIGUOUS"

    def __str__(self) -> str:
        return self.value


def _times(d: Mapping[str, Sequence[float]], side: str) -> dict[str, tuple[float, ...]]:
    out = {}
    for phase, values in d.items():
        if phase not in PHASES:
            raise ValueError(f"{side}: unknown phase {phase!r}; expected one of {PHASES}")
        vals = tuple(float(v) for v in values)
        if not all(math.isfinite(v) and v > 0 for v in vals):
            raise ValueError(f"{side} {phase} times must be positive and finite, got {vals}")
        out[phase] = vals
    return out


@dataclass(frozen=True)
class PairedSamples:
    """Per-round times (ms) of one shape: ``phase -> one value per round`` for each side.

    Both sides have the same phases and every phase the same number of rounds (the i-th values
    were measured in the same round). Raises ValueError otherwise or on a non-positive time.
    """

    incumbent: Mapping[str, Sequence[float]]
    candidate: Mapping[str, Sequence[float]]

    def __post_init__(self) -> None:
        inc, cand = _times(self.incumbent, "incumbent"), _times(self.candidate, "candidate")
        if set(inc) != set(cand) or "fwd" not in inc:
            raise ValueError(f"phases differ or lack fwd: {sorted(inc)} vs {sorted(cand)}")
        if len({len(v) for v in [*inc.values(), *cand.values()]}) != 1:
            raise ValueError("every side and phase needs the same number of rounds")
        object.__setattr__(self, "incumbent", inc)
        object.__setattr__(self, "candidate", cand)

    @property
    def n_rounds(self) -> int:
        return len(self.incumbent["fwd"])


def primary_phases(samples: PairedSamples, campaign_type: str) -> tuple[str, ...]:
    """Phases whose times sum to the primary metric's time (see the module docstring)."""
    if campaign_type not in CAMPAIGN_TYPES:
        raise ValueError(f"unknown campaign_type {campaign_type!r}; expected {CAMPAIGN_TYPES}")
    if campaign_type == "compute_fwd":
        return ("fwd",)
    if campaign_type == "compute_fwd_bwd" and "bwd" not in samples.incumbent:
        raise ValueError("a compute_fwd_bwd campaign needs bwd times")
    return tuple(p for p in PHASES if p in samples.incumbent)


def log_ratios(samples: PairedSamples, campaign_type: str) -> np.ndarray:
    """``log(T_inc / T_cand)`` per round, T summed over :func:`primary_phases`."""
    phases = primary_phases(samples, campaign_type)
    inc = np.sum([samples.incumbent[p] for p in phases], axis=0)
    cand = np.sum([samples.candidate[p] for p in phases], axis=0)
    return np.log(inc) - np.log(cand)


def classify(lo: float, hi: float, equivalence: float) -> PairedVerdict:
    """Verdict of a speed-ratio CI ``[lo, hi]`` with equivalence margin ``equivalence``."""
    if lo > 1.0:
        return PairedVerdict.FASTER
    if hi < 1.0:
        return PairedVerdict.SLOWER
    if lo >= 1.0 / (1.0 + equivalence) and hi <= 1.0 + equivalence:
        return PairedVerdict.SAME
    return PairedVerdict.AMBIGUOUS


@dataclass(frozen=True)
class ShapeRow:
    """One shape: speed ratio (>1 faster), its CI, verdict, rounds, per-phase median ratios."""

    label: str
    ratio: float
    ci_low: float
    ci_high: float
    verdict: PairedVerdict
    n_rounds: int
    phase_ratios: Mapping[str, float] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        return self.ratio - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "verdict": self.verdict.value,
            "n_rounds": self.n_rounds,
            "phase_ratios": dict(self.phase_ratios),
        }


def confirmed_regressions(rows: Sequence[ShapeRow], threshold: float) -> list[ShapeRow]:
    """Shapes that read ``threshold`` or more slower with a CI that confirms it (gate 1)."""
    return [r for r in rows if r.verdict is PairedVerdict.SLOWER and r.ratio <= 1.0 - threshold]


@dataclass(frozen=True)
class PairedDecision:
    """The paired decision and the numbers behind it (ratios are speed ratios, >1 faster).

    ``regressions`` names the confirmed SLOWER shapes (≥ threshold when rolled back for them,
    below it for a trade-off); ``undecided`` the shapes worth measuring more when ``ambiguous``.
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
        }


def bootstrap_log_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` medians of ``x`` resampled with replacement (the within-shape level)."""
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.median(x[idx], axis=1)


def _ci(boot: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(boot, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return math.exp(lo), math.exp(hi)


def _fmt(ratio: float, lo: float, hi: float) -> str:
    return f"{ratio:.4f}x [{lo:.4f}, {hi:.4f}]"


def _shapes(rows: Sequence[ShapeRow]) -> str:
    return "; ".join(f"{r.label} {_fmt(r.ratio, r.ci_low, r.ci_high)}" for r in rows)


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
) -> PairedDecision:
    """Accept or roll back from paired per-round times (gates in the module docstring).

    ``regression_threshold``, ``min_detectable`` and ``equivalence_floor`` are relative
    (0.05 = 5%). ``looks`` is the number of planned sequential looks alpha is split over.
    ``exhausted`` says the round budget is spent (changes only the reason of an
    AMBIGUOUS outcome). ``confirm_slowdown``: gate 5's measuring on of an unconfirmed
    slowdown. Raises ValueError for no shapes, fewer than :data:`MIN_ROUNDS` rounds
    in a shape, or an unknown campaign type. Deterministic for a given ``rng_seed``.
    """
    if not per_shape_samples:
        raise ValueError("decide_paired needs at least one shape")
    if looks < 1:
        raise ValueError(f"looks must be ≥ 1, got {looks}")
    rng = np.random.default_rng(rng_seed)
    alpha = alpha / looks
    shape_level = 1.0 - alpha / len(per_shape_samples)
    eq = max(min_detectable, equivalence_floor)
    rows, boots, points = [], [], []
    for label, s in per_shape_samples.items():
        if s.n_rounds < MIN_ROUNDS:
            raise ValueError(f"shape {label!r} has {s.n_rounds} rounds; need ≥ {MIN_ROUNDS}")
        x = log_ratios(s, campaign_type)
        boot = bootstrap_log_medians(x, n_boot, rng)
        point = float(np.median(x))
        lo, hi = _ci(boot, shape_level)
        phase_ratios = {}
        if len(s.incumbent) > 1:
            phase_ratios = {
                p: math.exp(float(np.median(np.log(s.incumbent[p]) - np.log(s.candidate[p]))))
                for p in s.incumbent
            }
        ratio = math.exp(point)
        rows.append(ShapeRow(label, ratio, lo, hi, classify(lo, hi, eq), s.n_rounds, phase_ratios))
        boots.append(boot)
        points.append(point)
    agg = math.exp(float(np.mean(points)))
    agg_lo, agg_hi = _ci(np.mean(boots, axis=0), 1.0 - alpha)
    return _judge(
        tuple(rows),
        (agg, agg_lo, agg_hi),
        regression_threshold,
        min_detectable,
        eq,
        exhausted,
        (shape_level, 1.0 - alpha),
        looks,
        confirm_slowdown,
    )


def _judge(
    rows: tuple[ShapeRow, ...],
    agg_ci: tuple[float, float, float],
    thr: float,
    mde: float,
    eq: float,
    exhausted: bool,
    levels: tuple[float, float],
    looks: int,
    confirm_slowdown: bool,
) -> PairedDecision:
    """Gates 1-5 of the module docstring, with the reason sentence."""
    agg, lo, hi = agg_ci
    verdict = classify(lo, hi, eq)
    n = sorted({r.n_rounds for r in rows})
    rounds = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    head = (
        f"aggregate speed ratio {_fmt(agg, lo, hi)} ({(agg - 1) * 100:+.2f}%, "
        f"{levels[1]:.1%} hierarchical bootstrap CI, {rounds} paired rounds per shape, "
        f"per-shape CIs at {levels[0]:.1%})"
    )
    thr_s = f"{thr * 100:g}%"
    slower = [r for r in rows if r.verdict is PairedVerdict.SLOWER]
    big = confirmed_regressions(rows, thr)
    small = [r for r in slower if r.ratio > 1.0 - thr]
    unconfirmed = [
        r for r in rows if r.ratio <= 1.0 - thr and r.verdict is not PairedVerdict.SLOWER
    ]

    def result(
        status: Status,
        reason: str,
        regs: Sequence[ShapeRow] = (),
        undecided: Sequence[ShapeRow] = (),
    ) -> PairedDecision:
        trade = status is Status.ACCEPTED and bool(regs)
        return PairedDecision(
            status,
            verdict,
            reason,
            rows,
            agg,
            lo,
            hi,
            trade,
            tuple(r.label for r in regs),
            bool(undecided),
            tuple(r.label for r in undecided),
            mde,
            thr,
            *levels,
            looks,
        )

    def ambiguous(why: str, undecided: Sequence[ShapeRow]) -> PairedDecision:
        tail = (
            f"still ambiguous after {rounds} rounds: too noisy to confirm"
            if exhausted
            else f"measure more: {', '.join(r.label for r in undecided)}"
        )
        return result(Status.ROLLED_BACK, f"AMBIGUOUS: {head}; {why}; {tail}", (), undecided)

    improved = lo > 1.0 and agg - 1.0 >= mde
    if big:
        why = f"{len(big)} shape(s) regressed ≥ {thr_s} with CIs excluding no slowdown"
        return result(Status.ROLLED_BACK, f"{why}: {_shapes(big)}; {head}", big + small)
    if improved and unconfirmed:
        why = (
            f"the gain is real but shape(s) {_shapes(unconfirmed)} read ≥ {thr_s} slower "
            "without a CI that confirms or excludes it"
        )
        return ambiguous(why, unconfirmed)
    if improved:
        floor = (
            f"the {(agg - 1) * 100:+.2f}% gain is ≥ the minimum detectable effect {mde * 100:.2f}%"
            if mde > 0
            else "no minimum detectable effect is set (`ratchet calibrate` measures this machine's)"
        )
        ok = f"{head} excludes no gain and {floor}; no shape regressed ≥ {thr_s}"
        if small:
            ok += f"; trade-off: shape(s) confirmed slower by less than {thr_s}: {_shapes(small)}"
        return result(Status.ACCEPTED, ok, small)
    if lo > 1.0:
        why = (
            f"the gain is real but below this machine's minimum detectable effect "
            f"{mde * 100:.2f}%, so it is not claimed"
        )
        return result(Status.ROLLED_BACK, f"{head}: {why}")
    if hi > 1.0 + eq:
        open_ = [r for r in rows if r.verdict is PairedVerdict.AMBIGUOUS or r in unconfirmed]
        undecided = open_ or list(rows)
        why = f"the CI neither excludes no gain nor rules out a gain above {eq * 100:.2f}%"
        return ambiguous(why, undecided)
    why = "slower" if hi < 1.0 else f"no gain (CI upper bound ≤ {(eq) * 100:+.2f}%)"
    if confirm_slowdown and hi >= 1.0 and agg <= 1.0 - eq and not exhausted:
        more = (
            f"; reads {(1.0 - agg) * 100:.2f}% slower without a CI that confirms it: "
            "measuring on to tell a slowdown from noise"
        )
        return result(Status.ROLLED_BACK, f"{head}: {why}{more}", small, rows)
    return result(Status.ROLLED_BACK, f"{head}: {why}", small)


def needs_more(decision: PairedDecision) -> list[str]:
    """Labels of the shapes whose further rounds could change an AMBIGUOUS decision, or
    confirm the slowdown of a rollback (gate 5).

    Empty when the decision is settled: a confirmed ≥ threshold regression, an improved
    aggregate with no unconfirmed large slowdown, a gain below the minimum detectable effect,
    or an aggregate CI that excludes any gain above the equivalence margin and does not read
    slower without confirming it.
    """
    return list(decision.undecided)
