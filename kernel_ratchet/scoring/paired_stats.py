"""Paired A/B statistics: per-round speed ratios and their bootstrap confidence intervals.

Input: for every shape, per-round times in milliseconds of the incumbent and the candidate,
measured in the same session, interleaved, one value per round, side and phase
(:class:`~kernel_ratchet.harness.paired_samples.PairedSamples`). Everything here is pure numpy
with a seeded RNG, so a decision can be recomputed bit for bit from the recorded raw times.

* **Per-round ratio** (a *speed* ratio, > 1 means the candidate is faster):
  ``r_i = T_inc,i / T_cand,i`` where ``T`` is the primary metric's time: the forward time for
  ``compute_fwd``; ``fwd_ms + bwd_ms`` for ``compute_fwd_bwd`` (the combined step
  ``6·M·N·K/(fwd+bwd)``: its ratio is the ratio of summed times) and for ``memory`` with a
  backward (step bandwidth = total bytes / total time, bytes identical on both sides).
* **Per shape**: ``ratio = exp(median_i log r_i)`` (the median of the per-round ratios; for an
  even count the geometric mean of the two middle ones, so A/B and B/A are exact inverses).
  CI: percentile bootstrap of that median, resampling rounds with replacement
  (:func:`bootstrap_log_medians`, :func:`percentile_ci`).
* **Aggregate**: ``exp(mean_s log ratio_s)`` (geomean over shapes). Its CI is a hierarchical
  bootstrap: each replicate resamples the rounds *within* every shape and averages the
  per-shape log medians. The shapes are not resampled: they are the fixed set the aggregate is
  defined over, not a sample from a population. Rounds are treated as independent within a
  shape and shapes as independent of each other (pairing inside a round already cancels drift
  common to both sides).
"""

from __future__ import annotations

import math

import numpy as np

from kernel_ratchet.harness.paired_samples import PHASES, PairedSamples
from kernel_ratchet.scoring.metrics import CAMPAIGN_TYPES


def primary_phases(samples: PairedSamples, campaign_type: str) -> tuple[str, ...]:
    """Phases whose times sum to the primary metric's time (see the module docstring)."""
    if campaign_type not in CAMPAIGN_TYPES:
        raise ValueError(f"unknown campaign_type {campaign_type!r}; expected {CAMPAIGN_TYPES}")
    if campaign_type == "compute_fwd":
        return ("fwd",)
    if campaign_type == "compute_fwd_bwd" and "bwd" not in samples.incumbent:
        raise ValueError("a compute_fwd_bwd campaign needs bwd times")
    return tuple(p for p in PHASES if p in samples.incumbent)


def primary_times(samples: PairedSamples, campaign_type: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-round primary-metric times (ms) of the incumbent and the candidate: the sum over
    :func:`primary_phases`."""
    phases = primary_phases(samples, campaign_type)
    inc = np.sum([samples.incumbent[p] for p in phases], axis=0)
    cand = np.sum([samples.candidate[p] for p in phases], axis=0)
    return inc, cand


def log_ratios(samples: PairedSamples, campaign_type: str) -> np.ndarray:
    """``log(T_inc / T_cand)`` per round, T summed over :func:`primary_phases`."""
    inc, cand = primary_times(samples, campaign_type)
    return np.log(inc) - np.log(cand)


def phase_ratios(samples: PairedSamples) -> dict[str, float]:
    """Median speed ratio of every phase on its own; empty when only one phase was timed."""
    if len(samples.incumbent) <= 1:
        return {}
    return {
        p: math.exp(float(np.median(np.log(samples.incumbent[p]) - np.log(samples.candidate[p]))))
        for p in samples.incumbent
    }


def bootstrap_log_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` medians of ``x`` resampled with replacement (the within-shape level)."""
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return np.median(x[idx], axis=1)


def percentile_ci(boot: np.ndarray, level: float) -> tuple[float, float]:
    """The two-sided percentile interval of log-space replicates ``boot`` at ``level``, as
    speed ratios."""
    lo, hi = np.quantile(boot, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return math.exp(lo), math.exp(hi)


def few_rounds(n: int, level: float) -> str:
    """What ``n`` rounds cannot claim at ``level``: a bootstrap interval lies within the
    rounds' range, which holds the true ratio with probability 1 - 2^(1-n) whatever the
    noise's distribution (75% for 3 rounds); "" when that reaches ``level``."""
    held = 1.0 - 2.0 ** (1 - n)
    if held >= level:
        return ""
    return (
        f"; {n} rounds: the interval lies within their range, which holds the true ratio "
        f"{held:.1%} of the time without assumptions on the noise"
    )
