"""What one paired A/B measurement produced: its rounds, its failure or decision, its record.

:func:`kernel_ratchet.harness.ab.run_paired` returns a :class:`PairedRun`; a worker failure
that ended the run is a :class:`Failure`. The decision is the caller's rule's
(:class:`~kernel_ratchet.harness.ab_rule.SequentialRule`), typed by the ``D`` parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kernel_ratchet.harness.ab_rule import LookDecision
from kernel_ratchet.harness.paired_samples import PairedSamples, samples_by_shape
from kernel_ratchet.harness.worker import CATEGORIES

#: The decision type of the caller's rule, carried by :class:`PairedRun`.
D = TypeVar("D", bound=LookDecision)
#: How the inputs of every round were seeded (:func:`kernel_ratchet.harness.ab.round_seed`).
SEED_POLICY = (
    "per-round secret: seed = sha256('<campaign secret>:<round>:<shape label>')[:63 bits], "
    "identical for incumbent and candidate within a round; correctness checks use round -1"
)


#: The categories a run's :class:`Failure` can carry: a worker result's (but "ok"), a timing
#: the rule cannot use, a candidate less precise than the incumbent, and one whose call runs
#: vendor-class library operations the incumbent's does not.
FAILURE_CATEGORIES: tuple[str, ...] = (
    *(c for c in CATEGORIES if c != "ok"),
    "bad_timing",
    "precision",
    "backend",
)


@dataclass(frozen=True)
class Failure:
    """A worker failure that ended a paired run. ``stage`` is "check" or "time"; ``side`` is
    "incumbent", "candidate" or "both" (the same timing request failed the same way on the two
    sides: :mod:`kernel_ratchet.harness.paired_blame`).

    ``category`` is the worker's (see :mod:`kernel_ratchet.harness.worker`), "bad_timing"
    when an ``ok`` timing carried no positive finite ``median_ms``, "precision" when the
    candidate's SNR fell below the incumbent's, or "backend" when its call ran vendor-class
    ATen operations the incumbent's did not (all listed in :data:`FAILURE_CATEGORIES`).
    """

    side: str
    stage: str
    label: str
    category: str
    detail: str
    log_path: str
    round: int | None = None
    phase: str | None = None

    def sentence(self) -> str:
        where = f"round {self.round} {self.phase} timing" if self.stage == "time" else "check"
        return (
            f"{self.side} failed ({self.category}) on shape {self.label} during {where}: "
            f"{self.detail} (log: {self.log_path})"
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PairedRun(Generic[D]):
    """Everything one paired A/B measurement produced.

    ``times[side][label][phase]`` are per-round milliseconds (the i-th values of both sides come
    from the same round); ``order`` lists ``(round, label, side timed first)`` in visit order.
    ``decision`` is the rule's, None exactly when ``failure`` is set.
    """

    labels: tuple[str, ...]
    phases: tuple[str, ...]
    campaign_type: str
    times: dict[str, dict[str, dict[str, tuple[float, ...]]]]
    order: tuple[tuple[int, str, str], ...]
    rounds: int
    failure: Failure | None
    decision: D | None
    wall_s: float
    check_wall_s: float
    rng_seed: int
    logs: dict[str, str]
    early_stop: str | None = None  # why the run stopped at the futility look, if it did
    #: the correctness checks' SNRs (dB): side -> shape label -> output name
    snr: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def samples(self) -> dict[str, PairedSamples]:
        """Per-shape paired samples of the shapes timed at least once."""
        return samples_by_shape(self.times, self.labels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "phases": list(self.phases),
            "campaign_type": self.campaign_type,
            "times": {
                s: {k: {p: list(v) for p, v in d.items()} for k, d in per.items()}
                for s, per in self.times.items()
            },
            "order": [list(o) for o in self.order],
            "rounds": self.rounds,
            "failure": self.failure.to_dict() if self.failure else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "wall_s": self.wall_s,
            "check_wall_s": self.check_wall_s,
            "rng_seed": self.rng_seed,
            "logs": dict(self.logs),
            "early_stop": self.early_stop,
            "snr": self.snr,
            "seed_policy": SEED_POLICY,
        }
