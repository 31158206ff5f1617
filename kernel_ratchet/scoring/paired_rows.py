"""The rows of a paired decision: one shape's speed ratio, its CI and the verdict on it.

Verdicts (per shape and aggregate) from a CI ``[lo, hi]`` and an equivalence margin ``eq``:
FASTER ``lo > 1``; SLOWER ``hi < 1``; SAME ``1/(1+eq) ≤ lo`` and ``hi ≤ 1+eq``; AMBIGUOUS
otherwise (the CI holds 1 and reaches beyond the margin). A shape is *unresolved* when its CI
half-width is wider than the effect it claims (:func:`unresolved`): its point estimate, however
large, says nothing about its sign.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class PairedVerdict(str, Enum):
    """How one shape (or the aggregate) moved, judged on its confidence interval."""

    FASTER = "FASTER"
    SLOWER = "SLOWER"
    SAME = "SAME"
    AMBIGUOUS = "AMBIGUOUS"

    def __str__(self) -> str:
        return self.value


def classify(lo: float, hi: float, equivalence: float) -> PairedVerdict:
    """Verdict of a speed-ratio CI ``[lo, hi]`` with equivalence margin ``equivalence``."""
    if lo > 1.0:
        return PairedVerdict.FASTER
    if hi < 1.0:
        return PairedVerdict.SLOWER
    if inside_margin(lo, hi, equivalence):
        return PairedVerdict.SAME
    return PairedVerdict.AMBIGUOUS


def inside_margin(lo: float, hi: float, equivalence: float) -> bool:
    """Whether a speed-ratio CI ``[lo, hi]`` lies inside the equivalence margin."""
    return lo >= 1.0 / (1.0 + equivalence) and hi <= 1.0 + equivalence


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


def unresolved(rows: Sequence[ShapeRow]) -> list[ShapeRow]:
    """Shapes whose CI half-width is wider than their effect ``|ratio - 1|``."""
    return [r for r in rows if (r.ci_high - r.ci_low) / 2.0 > abs(r.ratio - 1.0)]
