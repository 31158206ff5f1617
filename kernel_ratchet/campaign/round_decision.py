"""The decision a round recorded (the ``decision`` of ``round.json``), as a frozen record.

Two kinds: the harness gates' decision (``paired`` False: the candidate's harness CSV against
the incumbent's, recorded when a gate failed before any A/B, e.g. Check=FAIL) and the paired
A/B's (``paired`` True: per-round speed ratios with confidence intervals, plus the checks run
after it: skew robustness, the dynamic transfer check). A third, rare one accepts a fix on
correctness alone (``correctness_only``: the incumbent passed no shape, so nothing was
paired). Relative numbers are fractions (0.05 = +5%); gains and aggregates are NaN where a
gate failed before they were computed, or where nothing was timed against the incumbent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kernel_ratchet.scoring.decision import Decision, Status


@dataclass(frozen=True)
class ShapeResult:
    """One shape of a decision: ``delta`` (candidate/incumbent - 1) and its ``noise`` band.

    Harness decisions carry both sides' primary values; paired ones carry the ratio's CI
    (``ci``, relative) and the paired rounds it took instead (``incumbent``/``candidate``
    None)."""

    label: str
    incumbent: float | None
    candidate: float | None
    delta: float
    noise: float
    verdict: str
    ci: tuple[float, float] | None = None
    rounds: int | None = None
    #: paired A/B: each timed phase's own median speed ratio (candidate over incumbent),
    #: where more than one phase was timed ({"fwd": 1.04, "bwd": 0.99})
    phases: Mapping[str, float] | None = None
    #: paired A/B: each side's (median, fastest, slowest) time in ms per timed phase over the
    #: paired rounds ({"incumbent": {"fwd": (0.51, 0.50, 0.52)}, "candidate": {...}})
    phase_ms: Mapping[str, Mapping[str, tuple[float, float, float]]] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {
            "label": self.label,
            "incumbent": self.incumbent,
            "candidate": self.candidate,
            "delta": self.delta,
            "noise": self.noise,
            "verdict": self.verdict,
        }
        if self.ci is not None:
            d.update(ci=list(self.ci), rounds=self.rounds)
        if self.phases:
            d["phases"] = dict(self.phases)
        if self.phase_ms:
            d["phase_ms"] = {
                k: {ph: list(t) for ph, t in v.items()} for k, v in self.phase_ms.items()
            }
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ShapeResult:
        ci = d.get("ci")
        return cls(
            label=d["label"],
            incumbent=d.get("incumbent"),
            candidate=d.get("candidate"),
            delta=d["delta"],
            noise=d["noise"],
            verdict=d["verdict"],
            ci=None if ci is None else (ci[0], ci[1]),
            rounds=d.get("rounds"),
            phases=d.get("phases"),
            phase_ms=_phase_ms(d.get("phase_ms")),
        )


def _phase_ms(
    d: Mapping[str, Any] | None,
) -> dict[str, dict[str, tuple[float, float, float]]] | None:
    """A record's ``phase_ms`` as tuples (absent in records written before it existed)."""
    if not d:
        return None
    return {k: {ph: (t[0], t[1], t[2]) for ph, t in v.items()} for k, v in d.items()}


@dataclass(frozen=True)
class RoundDecision:
    """A round's recorded decision (see the module docstring). Raises ValueError for a
    BASELINE status (a baseline decides nothing)."""

    status: Status
    reason: str
    paired: bool
    trade_off: bool
    regressions: tuple[str, ...]
    aggregate_before: float
    aggregate_after: float
    gain: float
    gain_noise: float
    ambiguous: bool
    per_shape: tuple[ShapeResult, ...]
    # the paired A/B's
    gain_ci: tuple[float, float] | None = None
    rounds: int | None = None
    min_detectable: float | None = None
    unconfirmed: bool = False
    early_stop: str | None = None
    ci_level: float | None = None  # of gain_ci (the aggregate's, alpha split over the looks)
    time_weighted: Mapping[str, Any] | None = None  # scoring.paired_weighted.TimeWeighted's
    unresolved: tuple[str, ...] = ()  # shapes whose CI is wider than their effect
    quantity: str | None = None  # what the A/B measured (harness.timing.quantity's label)
    harness_only: Mapping[str, Any] | None = None
    # checks after the A/B
    skew: tuple[str, str] | None = None
    overfit: bool = False
    dynamic: Mapping[str, Any] | None = None
    # a rehearsal's: the status its timings would have given (never applied)
    rehearsed: Status | None = None
    # a fix accepted on correctness alone, against an incumbent that passes no shape: no
    # speed measured, so no gain for the headline or the attribution to count
    correctness_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "regressions", tuple(self.regressions))
        object.__setattr__(self, "per_shape", tuple(self.per_shape))
        object.__setattr__(self, "unresolved", tuple(self.unresolved))
        if self.rehearsed is not None:
            object.__setattr__(self, "rehearsed", Status(self.rehearsed))
        if self.status is Status.BASELINE:
            raise ValueError("a decision accepts or rolls back; BASELINE is no decision")

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    @property
    def worst_delta(self) -> float:
        return min((s.delta for s in self.per_shape), default=0.0)

    def rejected_as_overfit(self, why: str) -> RoundDecision:
        """This decision rolled back by a transfer check: REJECT-as-overfit, ``why``."""
        return replace(
            self,
            status=Status.ROLLED_BACK,
            overfit=True,
            reason=f"REJECT-as-overfit: {why}; measured: {self.reason}",
        )

    def as_rehearsal(self) -> RoundDecision:
        """This decision taken in a rehearsal: rolled back whatever the timings said, the
        verdict they would have given kept in ``rehearsed`` and said first in the reason."""
        would = "would accept" if self.accepted else "would roll back"
        gain = "" if self.gain is None or self.gain != self.gain else f" ({self.gain:+.2%})"
        return replace(
            self,
            status=Status.ROLLED_BACK,
            rehearsed=self.status,
            reason=f"REHEARSAL: {would}{gain}, rolled back and not committed (interpreter "
            f"timings rank nothing); measured: {self.reason}",
        )

    @classmethod
    def from_gates(cls, d: Decision) -> RoundDecision:
        """The harness gates' decision (:func:`kernel_ratchet.scoring.decision.decide`)."""
        return cls(
            status=d.status,
            reason=d.reason,
            paired=False,
            trade_off=d.trade_off,
            regressions=d.regressions,
            aggregate_before=d.aggregate_before,
            aggregate_after=d.aggregate_after,
            gain=d.gain,
            gain_noise=d.gain_noise,
            ambiguous=d.ambiguous,
            per_shape=tuple(
                ShapeResult(s.label, s.incumbent, s.candidate, s.delta, s.noise, s.verdict.value)
                for s in d.per_shape
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status.value,
            "reason": self.reason,
            "paired": self.paired,
            "trade_off": self.trade_off,
            "regressions": list(self.regressions),
            "aggregate_before": self.aggregate_before,
            "aggregate_after": self.aggregate_after,
            "gain": self.gain,
            "gain_noise": self.gain_noise,
            "ambiguous": self.ambiguous,
            "per_shape": [s.to_dict() for s in self.per_shape],
        }
        if self.paired:
            d.update(
                gain_ci=None if self.gain_ci is None else list(self.gain_ci),
                rounds=self.rounds,
                min_detectable=self.min_detectable,
                unconfirmed=self.unconfirmed,
                early_stop=self.early_stop,
            )
            extra = {
                "ci_level": self.ci_level,
                "time_weighted": self.time_weighted,
                "quantity": self.quantity,
            }
            d.update({k: v for k, v in extra.items() if v is not None})
            if self.time_weighted is not None:  # recorded together with time_weighted
                d["unresolved"] = list(self.unresolved)
        if self.harness_only is not None:
            d["harness_only"] = dict(self.harness_only)
        if self.skew is not None:
            d["skew"] = list(self.skew)
        if self.overfit:
            d["overfit"] = True
        if self.dynamic is not None:
            d["dynamic"] = dict(self.dynamic)
        if self.rehearsed is not None:
            d["rehearsed"] = self.rehearsed.value
        if self.correctness_only:
            d["correctness_only"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RoundDecision:
        ci, skew = d.get("gain_ci"), d.get("skew")
        return cls(
            status=Status(d["status"]),
            reason=d["reason"],
            paired=bool(d.get("paired")),
            trade_off=bool(d.get("trade_off")),
            regressions=tuple(d.get("regressions") or ()),
            aggregate_before=d.get("aggregate_before"),
            aggregate_after=d.get("aggregate_after"),
            gain=d.get("gain"),
            gain_noise=d.get("gain_noise"),
            ambiguous=bool(d.get("ambiguous")),
            per_shape=tuple(ShapeResult.from_dict(s) for s in d.get("per_shape") or ()),
            gain_ci=None if ci is None else (ci[0], ci[1]),
            rounds=d.get("rounds"),
            min_detectable=d.get("min_detectable"),
            unconfirmed=bool(d.get("unconfirmed")),
            early_stop=d.get("early_stop"),
            ci_level=d.get("ci_level"),
            time_weighted=d.get("time_weighted"),
            unresolved=tuple(d.get("unresolved") or ()),
            quantity=d.get("quantity"),
            harness_only=d.get("harness_only"),
            skew=None if skew is None else (skew[0], skew[1]),
            overfit=bool(d.get("overfit")),
            dynamic=d.get("dynamic"),
            rehearsed=d.get("rehearsed"),
            correctness_only=bool(d.get("correctness_only")),
        )
