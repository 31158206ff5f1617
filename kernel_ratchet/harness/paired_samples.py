"""Per-round times of one shape in a paired A/B: what the harness measures and scoring judges.

A paired run (:func:`kernel_ratchet.harness.ab.run_paired`) times the incumbent and the
candidate of every shape back to back in each round; :class:`PairedSamples` holds one shape's
values, one per round, side and phase, the i-th values of every list from the same round.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The phases a paired run can time, in the order they are timed.
PHASES = ("fwd", "bwd")


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


def samples_by_shape(
    times: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]], labels: Sequence[str]
) -> dict[str, PairedSamples]:
    """``times[side][label][phase]`` as :class:`PairedSamples` per shape, for the shapes of
    ``labels`` timed at least once."""
    inc, cand = times["incumbent"], times["candidate"]
    return {k: PairedSamples(inc[k], cand[k]) for k in labels if len(inc[k]["fwd"]) > 0}
