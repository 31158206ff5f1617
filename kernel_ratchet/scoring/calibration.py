"""Calibration of the paired A/B decision on this machine from A/A runs.

An A/A run measures the incumbent against itself with the full paired protocol
(:func:`kernel_ratchet.harness.ab.run_paired`), so every ACCEPT is a false accept and every
confirmed ≥ threshold regression a false regression. From ``trials`` such runs:

* ``false_accept_rate`` = accepted / trials (decided with the ``min_detectable`` the A/A runs
  were given, normally 0: the rate of the bare CI test); ``details["false_accept_rate_at_mde"]``
  re-decides the same raw times with the new minimum detectable effect.
* ``false_regression_rate`` = trials with a shape SLOWER (CI excludes no slowdown) by at least
  the regression threshold, i.e. a would-be regression rollback.
* ``min_detectable_effect`` (relative, 0.02 = 2%). With ``h_t = ln(hi_t/lo_t)/2`` the
  half-width of trial t's aggregate log-ratio CI (level 1-α) and ``h90`` its 90th percentile
  over trials (the noisier sessions, not the typical one)::

      SE  = h90 / z(1-α/2)                       # standard error of the log aggregate
      MDE = exp(max(SE · (z(1-α/2) + z(power)), max_t |ln ratio_t|)) - 1

  The first term is the classic minimum detectable effect: the true gain whose CI excludes
  "no gain" with probability ``power`` (80%). The second is a bias guard: no claim below the
  largest apparent gain that A/A itself produced (a systematic order or drift effect would
  not show in the CI widths). The decision refuses gains below the MDE
  (``decide_paired(..., min_detectable=MDE)``).
* ``per_shape_spread``: per shape, the robust standard deviation ``1.4826 · MAD`` of the
  per-round log speed ratios, each trial centred on its own median and pooled over trials
  (≈ the relative noise of one paired round on this machine).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel_ratchet.errors import CampaignError
from kernel_ratchet.scoring.paired import PairedDecision, PairedVerdict, decide_paired
from kernel_ratchet.scoring.paired_stats import log_ratios

if TYPE_CHECKING:
    from kernel_ratchet.harness.paired_run import PairedRun

#: Power at which the minimum detectable effect is defined (the conventional 80%).
POWER = 0.8
#: Quantile of the A/A aggregate CI half-widths used for the MDE (a noisy session, not a mean).
HALF_WIDTH_QUANTILE = 0.9
MAD_TO_SD = 1.4826

FIELDS = (
    "false_accept_rate",
    "false_regression_rate",
    "min_detectable_effect",
    "per_shape_spread",
    "trials",
    "details",
)


@dataclass(frozen=True)
class Calibration:
    """What A/A runs measured on this machine (rates are fractions of ``trials``)."""

    false_accept_rate: float
    false_regression_rate: float
    min_detectable_effect: float
    per_shape_spread: Mapping[str, float]
    trials: int
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (stored in the campaign)."""
        return {
            "false_accept_rate": self.false_accept_rate,
            "false_regression_rate": self.false_regression_rate,
            "min_detectable_effect": self.min_detectable_effect,
            "per_shape_spread": dict(self.per_shape_spread),
            "trials": self.trials,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        """Inverse of :meth:`to_dict`. Raises ValueError naming missing or unknown keys."""
        missing = [k for k in FIELDS if k not in d]
        unknown = [k for k in d if k not in FIELDS]
        if missing or unknown:
            raise ValueError(
                f"calibration record: missing {missing}, unknown {unknown}; expected {FIELDS}"
            )
        return cls(
            float(d["false_accept_rate"]),
            float(d["false_regression_rate"]),
            float(d["min_detectable_effect"]),
            {str(k): float(v) for k, v in d["per_shape_spread"].items()},
            int(d["trials"]),
            dict(d["details"]),
        )


def false_regression(decision: PairedDecision) -> bool:
    """Whether a shape is SLOWER by at least the decision's regression threshold."""
    return bool(decision.regressed)


def min_detectable_effect(
    half_widths: list[float],
    aa_log_ratios: list[float],
    *,
    alpha: float = 0.05,
    power: float = POWER,
    quantile: float = HALF_WIDTH_QUANTILE,
) -> float:
    """The MDE formula of the module docstring (log-space half-widths and A/A log ratios)."""
    z_a = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    z_p = NormalDist().inv_cdf(power)
    se = float(np.quantile(half_widths, quantile)) / z_a
    bias = max(abs(x) for x in aa_log_ratios)
    return math.expm1(max(se * (z_a + z_p), bias))


def _spread(runs: list[PairedRun[PairedDecision]]) -> dict[str, float]:
    pooled: dict[str, list[float]] = {}
    for run in runs:
        for label, s in run.samples().items():
            x = log_ratios(s, run.campaign_type)
            pooled.setdefault(label, []).extend(x - np.median(x))
    return {k: MAD_TO_SD * float(np.median(np.abs(v))) for k, v in pooled.items()}


def _trial_row(t: int, run: PairedRun[PairedDecision]) -> dict[str, Any]:
    """One A/A trial's record; CampaignError when the run failed."""
    if run.failure is not None or run.decision is None:
        why = run.failure.sentence() if run.failure else "no decision"
        raise CampaignError(f"A/A trial {t} failed: {why}; fix the incumbent, then calibrate")
    d = run.decision
    return {
        "trial": t,
        "status": d.status.value,
        "verdict": d.verdict_aggregate.value,
        "ratio": d.aggregate_ratio,
        "ci_low": d.aggregate_ci_low,
        "ci_high": d.aggregate_ci_high,
        "rounds": run.rounds,
        "wall_s": run.wall_s,
        "ambiguous": d.ambiguous,
        "false_regression": false_regression(d),
        "slower_shapes": [r.label for r in d.per_shape if r.verdict is PairedVerdict.SLOWER],
    }


def _accepted_at(runs: list[PairedRun[PairedDecision]], mde: float) -> int:
    """How many of the A/A runs the decision accepts when re-decided with ``mde``."""
    return sum(
        decide_paired(
            run.samples(),
            run.campaign_type,
            min_detectable=mde,
            regression_threshold=run.decision.regression_threshold,
            looks=run.decision.looks,
        ).accepted
        for run in runs
        if run.decision is not None
    )


def calibrate(
    run_aa: Callable[[int], PairedRun[PairedDecision]],
    trials: int,
    *,
    alpha: float = 0.05,
    power: float = POWER,
) -> Calibration:
    """Run ``trials`` A/A measurements (``run_aa(trial_index)``) and summarise them.

    ``run_aa`` must measure the incumbent against itself (its ``min_detectable`` normally 0).
    Raises ValueError for ``trials < 2`` and CampaignError when an A/A run fails (an incumbent
    that crashes or fails its check cannot be calibrated: fix it first).
    """
    if trials < 2:
        raise ValueError(f"calibration needs at least 2 A/A trials, got {trials}")
    runs, rows = [], []
    for t in range(trials):
        run = run_aa(t)
        rows.append(_trial_row(t, run))
        runs.append(run)
    half = [math.log(r["ci_high"] / r["ci_low"]) / 2.0 for r in rows]
    mde = min_detectable_effect(
        half, [math.log(r["ratio"]) for r in rows], alpha=alpha, power=power
    )
    n = float(trials)
    details = {
        "trials": rows,
        "false_accept_rate_at_mde": _accepted_at(runs, mde) / n,
        "aggregate_slower_rate": sum(r["verdict"] == "SLOWER" for r in rows) / n,
        "shape_slower_rate": sum(bool(r["slower_shapes"]) for r in rows) / n,
        "ambiguous_rate": sum(r["ambiguous"] for r in rows) / n,
        "half_width_quantile": HALF_WIDTH_QUANTILE,
        "half_width_q": float(np.quantile(half, HALF_WIDTH_QUANTILE)),
        "alpha": alpha,
        "power": power,
        "mean_wall_s": sum(r["wall_s"] for r in rows) / n,
        "formula": "MDE = exp(max(q90(h)/z(1-a/2)*(z(1-a/2)+z(power)), max|ln ratio_AA|)) - 1",
    }
    return Calibration(
        false_accept_rate=sum(r["status"] == "ACCEPTED" for r in rows) / n,
        false_regression_rate=sum(r["false_regression"] for r in rows) / n,
        min_detectable_effect=mde,
        per_shape_spread=_spread(runs),
        trials=trials,
        details=details,
    )
