"""The time-weighted effect of a paired decision: what a step running every shape once gains.

The geomean of per-shape ratios weighs a 10 µs shape like a 10 ms one, so a large gain on a
small, noisy shape can outvote confirmed slowdowns on the shapes that hold the time. The
time-weighted effect answers the workload's question instead: a step runs each shape ``w_s``
times (``weights`` of the profile, 1 by default); how much faster is that step?

* Per shape, from the paired rounds (:func:`~kernel_ratchet.scoring.paired_stats.primary_times`):
  the incumbent's time ``T_s`` (median over rounds) and the speed ratio ``r_s`` (median of the
  per-round ratios, as the per-shape rows read it). The candidate's time is ``T_s / r_s``.
* The step speed ratio ``R = Σ w_s T_s / Σ w_s (T_s / r_s)`` (> 1: the candidate's step is
  faster).
* CI: hierarchical percentile bootstrap, like the geomean's: every replicate resamples the
  rounds *within* each shape, the same round indices for the incumbent's time and the ratio
  (the pairing is kept), and recomputes ``R``. Shapes are the fixed set, not resampled.
  ``scipy.stats.bootstrap`` resamples one set of equally long samples; here shapes have
  different round counts (only undecided shapes are measured further), hence numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.scoring.paired_stats import percentile_ci, primary_times


@dataclass(frozen=True)
class TimeWeighted:
    """The time-weighted step speed ratio (> 1 faster), its CI at ``level``, the weighted step
    times (ms) of both sides and the weights used (label -> weight)."""

    ratio: float
    ci_low: float
    ci_high: float
    level: float
    incumbent_ms: float
    candidate_ms: float
    weights: Mapping[str, float]

    @property
    def confirmed_slower(self) -> bool:
        """The whole CI lies below 1.0x: the step is slower beyond doubt at ``level``."""
        return self.ci_high < 1.0

    def text(self) -> str:
        """``time-weighted step 0.9876x [0.9801, 0.9950] (-1.24%)``."""
        return (
            f"time-weighted step {self.ratio:.4f}x [{self.ci_low:.4f}, {self.ci_high:.4f}] "
            f"({(self.ratio - 1) * 100:+.2f}%)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "level": self.level,
            "incumbent_ms": self.incumbent_ms,
            "candidate_ms": self.candidate_ms,
            "weights": dict(self.weights),
        }


def shape_weights(labels: list[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    """The weight of every label: ``weights``' where given, else 1. ValueError for a weight
    that is not a positive finite number."""
    given = dict(weights or {})
    out = {}
    for label in labels:
        w = float(given.get(label, 1.0))
        if not (math.isfinite(w) and w > 0):
            raise ValueError(f"weight of shape {label!r} must be a positive number, got {w}")
        out[label] = w
    return out


def _step_ratio(w: np.ndarray, t_inc: np.ndarray, log_r: np.ndarray) -> np.ndarray:
    """``Σ w T / Σ w T e^{-log r}`` over the last axis (shapes)."""
    return np.sum(w * t_inc, axis=-1) / np.sum(w * t_inc * np.exp(-log_r), axis=-1)


def time_weighted(
    per_shape: Mapping[str, PairedSamples],
    campaign_type: str,
    weights: Mapping[str, float] | None,
    *,
    level: float,
    n_boot: int,
    rng: np.random.Generator,
) -> TimeWeighted:
    """The time-weighted effect of the module docstring over the shapes of ``per_shape``."""
    w = shape_weights(list(per_shape), weights)
    t_point, r_point, t_boot, r_boot = [], [], [], []
    for s in per_shape.values():
        inc, cand = primary_times(s, campaign_type)
        log_r = np.log(inc) - np.log(cand)
        idx = rng.integers(0, len(inc), size=(n_boot, len(inc)))
        t_point.append(float(np.median(inc)))
        r_point.append(float(np.median(log_r)))
        t_boot.append(np.median(inc[idx], axis=1))
        r_boot.append(np.median(log_r[idx], axis=1))
    wv = np.array([w[k] for k in per_shape])
    tp, rp = np.array(t_point), np.array(r_point)
    ratio = float(_step_ratio(wv, tp, rp))
    boot = _step_ratio(wv, np.stack(t_boot, axis=1), np.stack(r_boot, axis=1))
    lo, hi = percentile_ci(np.log(boot), level)
    inc_ms = float(np.sum(wv * tp))
    return TimeWeighted(ratio, lo, hi, level, inc_ms, inc_ms / ratio, w)
