"""How noisy one paired round is, and which timing variant buys precision most cheaply.

From an A/A paired run (:class:`kernel_ratchet.harness.paired_run.PairedRun`, incumbent
against itself):

* ``spread``: the 10%-trimmed standard deviation (the lowest and highest 10% left out, scaled
  to estimate the SD of normal data) of the per-round log speed ratios, each shape centred on
  its own median, pooled over shapes (≈ the relative noise of one paired round; ``per_shape``
  has each shape's own). Trimmed, because the decision's medians ignore a few wild rounds; not
  the MAD, which needs about 2.7x as many rounds for the same precision (simulated with 48
  normal values per variant: a 2x lower variance was confirmed in 16% of probes with the MAD,
  40% with the trimmed SD, 69% with the plain SD);
* ``order_effect``: half the difference of the mean log ratio between rounds where the
  candidate was timed first and rounds where the incumbent was, i.e. the speed advantage of
  being timed first (0 when the order does not matter; pairing in a shuffled order removes its
  bias but not its variance);
* ``s_per_round``: wall seconds of one round (all shapes, both sides), checks excluded;
* ``cost = spread² · s_per_round``: the measuring time a variant needs for a given CI width
  (the width shrinks as ``spread / √rounds``), so lower is better.

:func:`choose` keeps the first (current) variant unless another is cheaper with 95%
confidence: the upper bound of a bootstrap CI of its cost ratio to the current one (the rounds
of each resampled, per shape) is below 1. A short probe estimates one spread only to about
±15-25%, so a point estimate alone would switch on noise (simulated, 24 rounds of 2 shapes: a
same-noise variant read under 0.7x the cost in 4 of 20 probes and was chosen in none; a 2x
lower variance was chosen in 15 of 30, a 3x lower in 24 of 30).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel_ratchet.scoring.paired_stats import log_ratios

if TYPE_CHECKING:
    from kernel_ratchet.harness.paired_run import PairedRun

#: Fraction left out at each end for the trimmed standard deviation.
TRIM = 0.1
#: Confidence that a variant is cheaper before it replaces the current one.
LEVEL = 0.95
N_BOOT = 2000


@dataclass(frozen=True)
class RoundNoise:
    """The noise of one paired round under one timing variant (see the module docstring)."""

    name: str
    params: Mapping[str, Any]
    spread: float
    per_shape: Mapping[str, float]
    order_effect: float
    s_per_round: float
    rounds: int
    centred: Mapping[str, tuple[float, ...]] = field(default_factory=dict, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cost(self) -> float:
        return self.spread**2 * self.s_per_round

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "params": dict(self.params),
            "spread": self.spread,
            "per_shape": dict(self.per_shape),
            "order_effect": self.order_effect,
            "s_per_round": self.s_per_round,
            "rounds": self.rounds,
            "cost": self.cost,
            **dict(self.extra),
        }


def centred(groups: Iterable[Sequence[float]]) -> list[np.ndarray]:
    """Each group of per-round log ratios (one shape of one run) minus its own median."""
    return [np.asarray(g, dtype=float) - np.median(g) for g in groups if len(g)]


def pooled_spread(groups: Iterable[Sequence[float]]) -> float | None:
    """The round spread (module docstring) of groups of per-round log ratios, each group
    centred on its own median, then pooled; None without values. Every tool that reports a
    round spread (the noise probe, the A/B validation table, the timing report) uses this."""
    parts = centred(groups)
    return float(trimmed_sd(np.concatenate(parts)[None, :])[0]) if parts else None


def first_timed_advantage(pairs: Iterable[tuple[float, str]]) -> float | None:
    """The speed advantage of the side timed first, from (centred log ratio
    ln(t_incumbent / t_candidate), side timed first) pairs: the first side reads faster by d
    when the mean is -d with the incumbent first and +d with the candidate first. None unless
    both orders occur."""
    by: dict[str, list[float]] = {"incumbent": [], "candidate": []}
    for x, first in pairs:
        by[first].append(x)
    if not (by["incumbent"] and by["candidate"]):
        return None
    return (float(np.mean(by["candidate"])) - float(np.mean(by["incumbent"]))) / 2.0


def round_noise(name: str, params: Mapping[str, Any], run: PairedRun) -> RoundNoise:
    """Summarise an A/A run. Raises ValueError for a failed run or one with no rounds."""
    if run.failure is not None or run.rounds < 2:
        why = run.failure.sentence() if run.failure else f"{run.rounds} round(s)"
        raise ValueError(f"variant {name!r}: no noise estimate from this run ({why})")
    first = {(r, label): side for r, label, side in run.order}
    raw = {label: log_ratios(s, run.campaign_type) for label, s in run.samples().items()}
    kept = {
        label: tuple(float(v) for v in c)
        for label, c in zip(raw, centred(raw.values()), strict=True)
    }
    per_shape = {label: pooled_spread([x]) for label, x in raw.items()}
    order = first_timed_advantage(
        (v, first.get((r, label), "incumbent"))
        for label, c in kept.items()
        for r, v in enumerate(c)
    )
    s_round = max(run.wall_s - run.check_wall_s, 0.0) / run.rounds
    return RoundNoise(
        name,
        dict(params),
        pooled_spread(raw.values()),
        per_shape,
        order or 0.0,
        s_round,
        run.rounds,
        kept,
    )


def _normal_trim_factor(trim: float) -> float:
    """The trimmed SD of a normal distribution is this fraction of its SD."""
    nd = NormalDist()
    z = nd.inv_cdf(1.0 - trim)
    return math.sqrt(1.0 - 2.0 * z * nd.pdf(z) / (1.0 - 2.0 * trim))


def trimmed_sd(x: np.ndarray, trim: float = TRIM) -> np.ndarray:
    """Per row of ``x``: the standard deviation of the values left after the lowest and the
    highest ``trim`` fraction are dropped (at least 2 values kept), scaled so that it estimates
    the standard deviation of normal data."""
    xs = np.sort(x, axis=1)
    k = min(int(trim * xs.shape[1]), (xs.shape[1] - 2) // 2)
    f = _normal_trim_factor(k / xs.shape[1]) if k else 1.0
    return xs[:, k : xs.shape[1] - k].std(axis=1, ddof=1) / f


def _boot_spreads(r: RoundNoise, n: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the pooled spread: rounds resampled within every shape."""
    parts = [np.asarray(v) for v in r.centred.values() if len(v)]
    draws = np.concatenate([v[rng.integers(0, len(v), (n, len(v)))] for v in parts], axis=1)
    return trimmed_sd(draws)


def cost_ratio_ci(
    variant: RoundNoise, base: RoundNoise, level: float = LEVEL, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[float, float, float]:
    """Point estimate and bootstrap CI of ``variant.cost / base.cost`` (seconds per round taken
    as measured; the spreads resampled independently)."""
    rng = np.random.default_rng(seed)
    ratio = (_boot_spreads(variant, n_boot, rng) / _boot_spreads(base, n_boot, rng)) ** 2
    ratio *= variant.s_per_round / base.s_per_round
    lo, hi = np.quantile(ratio, [(1 - level) / 2, (1 + level) / 2])
    return variant.cost / base.cost, float(lo), float(hi)


def choose(reports: Sequence[RoundNoise], level: float = LEVEL) -> tuple[RoundNoise, str]:
    """The variant to use and why: the first (current) one unless another's cost ratio to it has
    a CI (at ``level``) entirely below 1; of several such, the cheapest point estimate. Raises
    ValueError for no reports."""
    if not reports:
        raise ValueError("choose needs at least one variant")
    base = reports[0]
    cis = {r.name: cost_ratio_ci(r, base, level) for r in reports[1:]}
    sure = [r for r in reports[1:] if cis[r.name][2] < 1.0]
    if not sure:
        seen = "; ".join(f"{k} {v[0]:.2f}x [{v[1]:.2f}, {v[2]:.2f}]" for k, v in cis.items())
        return base, (
            f"kept {base.name!r} (spread {base.spread:.2%}, {base.s_per_round:.2f} s/round): no "
            f"variant is cheaper with {level:.0%} confidence"
            + (f" (cost ratios: {seen})" if seen else "")
        )
    best = min(sure, key=lambda r: r.cost)
    pt, lo, hi = cis[best.name]
    return best, (
        f"{best.name!r} costs {pt:.2f}x [{lo:.2f}, {hi:.2f}] ({level:.0%} bootstrap CI) of "
        f"{base.name!r}: spread {best.spread:.2%} vs {base.spread:.2%}, "
        f"{best.s_per_round:.2f} vs {base.s_per_round:.2f} s/round"
    )
