"""The noise of real A/A rounds, read from their paired traces, for the rule's simulation.

A paired A/B writes one line per timing request to ``timings.jsonl`` (round, shape, phase,
side, ``median_ms``; :mod:`kernel_ratchet.harness.ab`). In an A/A round both sides run the
same code, so every round's log ratio ``log(T_incumbent / T_candidate)`` is pure measurement
noise. :func:`read_traces` gathers those per shape, with each side's time summed over the
phases timed (the step time a forward-and-backward campaign decides on; a side's several
turns in one round count as their geometric mean, as the A/B counts them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernel_ratchet.harness.paired_checks import SIDES
from kernel_ratchet.harness.paired_trace import round_times, trace_rounds


@dataclass(frozen=True)
class TraceNoise:
    """Per shape (in the order first seen): the incumbent's median step time in ms, and the
    per-round log ratios of the A/A traces centred on their median, each with its mirror image
    (:func:`_symmetric`); ``rounds`` counts the recorded rounds."""

    labels: tuple[str, ...]
    shape_ms: tuple[float, ...]
    residuals: tuple[np.ndarray, ...]

    @property
    def rounds(self) -> tuple[int, ...]:
        return tuple(len(r) // 2 for r in self.residuals)

    @property
    def sigma(self) -> tuple[float, ...]:
        """Per-value lognormal sigma of each shape (the ratios' standard deviation / √2)."""
        return tuple(float(np.std(r, ddof=1)) / math.sqrt(2) for r in self.residuals)


def read_traces(paths: Sequence[str | Path]) -> TraceNoise:
    """The A/A noise of the traces at ``paths`` (see the module docstring). A round counts for
    a shape only when both sides timed the same phases in it. Raises ValueError when a file is
    not a paired trace or a shape has fewer than 3 such rounds."""
    ratios: dict[str, list[float]] = {}
    times: dict[str, list[float]] = {}
    for path in map(Path, paths):
        for (_, label), sides in sorted(trace_rounds(path).items()):
            per_phase = round_times(sides)
            if per_phase is None:
                continue
            t = {s: sum(per_phase[s].values()) for s in SIDES}
            ratios.setdefault(label, []).append(math.log(t["incumbent"] / t["candidate"]))
            times.setdefault(label, []).append(t["incumbent"])
    few = {k: len(v) for k, v in ratios.items() if len(v) < 3}
    if not ratios or few:
        raise ValueError(
            f"the traces hold too few paired rounds per shape ({few or 'none'}; at least 3): "
            "give the timings.jsonl of paired A/A rounds (rounds/*/artifacts/paired/)"
        )
    labels = tuple(ratios)
    centred = tuple(_symmetric(np.array(ratios[k])) for k in labels)
    ms = tuple(float(np.median(times[k])) for k in labels)
    return TraceNoise(labels, ms, centred)


def _symmetric(r: np.ndarray) -> np.ndarray:
    """``r`` centred on its median, with every value's mirror image: in an A/A the two sides
    are interchangeable, so a log ratio and its negative are equally likely (a few recorded
    rounds would otherwise carry their chance skew into every simulated trial)."""
    c = r - float(np.median(r))
    return np.concatenate([c, -c])
