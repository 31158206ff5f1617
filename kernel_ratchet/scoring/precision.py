"""Precision of the two sides of a paired A/B, compared on the same inputs.

A correctness gate is a floor: a campaign whose gate sits at bf16's 40 dB accepts a candidate
computing in bf16 even where the incumbent is fp32-exact, and the speed-up is then bought with
~90 dB of accuracy. Both sides of a paired run are checked with the same check seed, so their
SNRs against the reference are comparable: :func:`precision_drop` says when the candidate's
falls by more than ``margin_db`` below the incumbent's on some output. A precision change, like
a backend change, needs the user's explicit consent; it is not a speed gain.

SNRs above :data:`CEILING_DB` are read as the ceiling: beyond it both sides agree with the
reference to within float32 rounding, and the exact value (or ``inf`` for a bit-exact match)
only reflects summation order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: Default allowed SNR drop of the candidate below the incumbent (20 dB: 10x the error).
MARGIN_DB = 20.0
#: SNRs above this are equal for the comparison (float32 rounding level).
CEILING_DB = 120.0


@dataclass(frozen=True)
class PrecisionDrop:
    """One output whose candidate SNR fell below the incumbent's by more than the margin."""

    label: str
    output: str
    incumbent_db: float
    candidate_db: float

    def describe(self) -> str:
        """``label/output: 140.0 dB -> 49.6 dB``."""
        return (
            f"{self.label}/{self.output}: {self.incumbent_db:.1f} dB -> {self.candidate_db:.1f} dB"
        )


def _level(db: float) -> float:
    return min(db, CEILING_DB)


def precision_drops(
    incumbent: Mapping[str, Mapping[str, float]],
    candidate: Mapping[str, Mapping[str, float]],
    margin_db: float = MARGIN_DB,
) -> list[PrecisionDrop]:
    """Outputs whose candidate SNR is more than ``margin_db`` below the incumbent's.

    Both map a shape label to ``{output: SNR dB}`` (a worker check's ``payload["snr"]``);
    outputs present on one side only are skipped. NaN SNRs are never a drop (the check itself
    fails those)."""
    out = []
    for label, inc in incumbent.items():
        cand = candidate.get(label, {})
        for name, i_db in inc.items():
            if name not in cand or math.isnan(i_db) or math.isnan(cand[name]):
                continue
            if _level(i_db) - _level(cand[name]) > margin_db:
                out.append(PrecisionDrop(label, name, i_db, cand[name]))
    return out


def precision_drop(
    incumbent: Mapping[str, Mapping[str, float]],
    candidate: Mapping[str, Mapping[str, float]],
    margin_db: float = MARGIN_DB,
) -> str | None:
    """One sentence naming every output whose precision fell (see :func:`precision_drops`),
    or None when the candidate is as precise as the incumbent within ``margin_db``."""
    drops = precision_drops(incumbent, candidate, margin_db)
    if not drops:
        return None
    return (
        f"precision change: the candidate's SNR fell more than {margin_db:g} dB below the "
        f"incumbent's on the same inputs ({'; '.join(d.describe() for d in drops)}); a lower "
        "precision passing the gate is not a speed gain and needs the user's explicit consent"
    )
