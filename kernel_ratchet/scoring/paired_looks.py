"""When the paired decision is taken during a run: the look schedule and the futility stop.

:class:`PairedLooks` is the :class:`~kernel_ratchet.harness.ab_rule.SequentialRule` a paired
A/B (:func:`kernel_ratchet.harness.ab.run_paired`) follows:

* **Looks** (:func:`look_schedule`): decide after ``k_start`` rounds, then at doubled round
  counts up to ``k_max`` (10, 20, 40 rounds by default). While a decision names ``undecided``
  shapes, those alone are measured up to the next look. Alpha is split over the planned looks
  (``looks=`` of :func:`~kernel_ratchet.scoring.paired.decide_paired`) so the repeated
  decisions keep the false-accept rate at the nominal level; the decision at ``k_max`` is made
  with ``exhausted=True`` ("too noisy to confirm").
* **Futility stop**: when ``k_start`` exceeds :data:`FUTILITY_ROUNDS`, the run first measures
  that many rounds; if every one of them reads the candidate slower than
  ``1 - FUTILITY_FACTOR × regression_threshold`` (that round's aggregate speed ratio, as
  :func:`futile` computes it), no later round could make it a gain: the run stops there and
  decides on those rounds (``exhausted=True``). A rollback either way; only the rounds a
  hopeless candidate costs change (most search proposals are such).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.scoring.paired import (
    EQUIVALENCE_FLOOR,
    MIN_ROUNDS,
    PairedDecision,
    decide_paired,
)
from kernel_ratchet.scoring.paired_stats import log_ratios
from kernel_ratchet.scoring.precision import MARGIN_DB, precision_drop

#: Futility look: rounds measured before it and how many regression thresholds slower every
#: one of them must read. 3 rounds x 10% against a round-to-round spread of 1.5-5% measured on
#: an H200 (docs/measurement.md): a true gain never reads that.
FUTILITY_ROUNDS = 3
FUTILITY_FACTOR = 2.0


def look_schedule(k_start: int, k_max: int) -> tuple[int, ...]:
    """Round counts at which the adaptive loop decides: k_start doubled until k_max.

    Doubling narrows the CI by about √2 per look, so few looks (and little alpha spent on
    them) cover the whole budget: (10, 20, 40) for the defaults.
    """
    looks = [k_start]
    while looks[-1] < k_max:
        looks.append(min(2 * looks[-1], k_max))
    return tuple(looks)


def futile(samples: Mapping[str, PairedSamples], campaign_type: str, floor: float) -> str | None:
    """Why the candidate cannot become a gain, or None: every round so far reads the aggregate
    speed ratio below ``floor`` (per round, the geometric mean over shapes of the primary
    metric's time ratio, as :func:`~kernel_ratchet.scoring.paired.decide_paired` aggregates)."""
    per_round = np.exp(np.mean([log_ratios(x, campaign_type) for x in samples.values()], axis=0))
    if not len(per_round) or per_round.max() >= floor:
        return None
    ratios = ", ".join(f"{x:.3f}x" for x in per_round)
    return (
        f"futility stop after {len(per_round)} rounds: every round read the candidate ≥ "
        f"{(1 - floor) * 100:.0f}% slower (aggregate speed ratio per round {ratios}), so "
        "no further round could make it a gain"
    )


@dataclass(frozen=True)
class PairedLooks:
    """The paired decision's sequential rule (module docstring).

    ``regression_threshold`` and ``min_detectable`` are relative (0.05 = 5%) and go to every
    :func:`~kernel_ratchet.scoring.paired.decide_paired`; ``precision_margin_db`` is the SNR
    drop below the incumbent that the correctness phase refuses (:mod:`.precision`);
    ``weights`` weigh the shapes of the time-weighted effect (:mod:`.paired_weighted`).
    """

    regression_threshold: float = 0.05
    min_detectable: float = 0.0
    precision_margin_db: float = MARGIN_DB
    #: (label, weight) pairs of the time-weighted effect; shapes not named weigh 1
    weights: tuple[tuple[str, float], ...] = ()
    #: the smallest gain worth measuring on for: an aggregate CI whose upper bound stays under
    #: it is "no gain" (:func:`~kernel_ratchet.scoring.paired.decide_paired`)
    equivalence_floor: float = EQUIVALENCE_FLOOR
    #: a correctness fix: judged for non-inferiority (:mod:`.paired_fix`)
    fix: bool = False

    def looks(self, k_start: int, k_max: int) -> tuple[int, ...]:
        """:func:`look_schedule`; ValueError unless ``MIN_ROUNDS ≤ k_start ≤ k_max``."""
        if not MIN_ROUNDS <= k_start <= k_max:
            raise ValueError(f"need {MIN_ROUNDS} ≤ k_start ≤ k_max, got {k_start}, {k_max}")
        return look_schedule(k_start, k_max)

    def precision_drop(
        self,
        incumbent: Mapping[str, Mapping[str, float]],
        candidate: Mapping[str, Mapping[str, float]],
    ) -> str | None:
        """:func:`~kernel_ratchet.scoring.precision.precision_drop` with this rule's margin."""
        return precision_drop(incumbent, candidate, self.precision_margin_db)

    def futility_look(self, k_start: int) -> int | None:
        """:data:`FUTILITY_ROUNDS` when the first look comes later, else None."""
        return FUTILITY_ROUNDS if k_start > FUTILITY_ROUNDS else None

    def futile(self, samples: Mapping[str, PairedSamples], campaign_type: str) -> str | None:
        """:func:`futile` at ``1 - FUTILITY_FACTOR × regression_threshold``."""
        return futile(samples, campaign_type, 1.0 - FUTILITY_FACTOR * self.regression_threshold)

    def decide(
        self,
        samples: Mapping[str, PairedSamples],
        campaign_type: str,
        *,
        exhausted: bool,
        looks: int,
    ) -> PairedDecision:
        """:func:`~kernel_ratchet.scoring.paired.decide_paired` with this rule's settings."""
        return decide_paired(
            samples,
            campaign_type,
            regression_threshold=self.regression_threshold,
            min_detectable=self.min_detectable,
            exhausted=exhausted,
            looks=looks,
            weights=dict(self.weights),
            equivalence_floor=self.equivalence_floor,
            fix=self.fix,
        )
