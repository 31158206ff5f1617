"""A paired A/B's trace (``timings.jsonl``, one line per timing request: :mod:`.ab`) read back
into its rounds, for whoever judges them afterwards: the A/A noise of the rule's simulation
(:mod:`kernel_ratchet.method.trace_noise`) and the state of an interrupted round
(:mod:`kernel_ratchet.campaign.rounds.partial`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from kernel_ratchet.harness.paired_checks import SIDES

#: (round, label) -> side -> phase -> the ok requests' ``median_ms`` values.
Rounds = dict[tuple[int, str], dict[str, dict[str, list[float]]]]


def trace_rounds(path: Path, *, strict: bool = True) -> Rounds:
    """The requests of the trace at ``path``, by round and shape. A line that is not a paired
    trace line raises ValueError naming it with ``strict``; without it the line is skipped (the
    line a killed process was writing, when recovery reads the trace)."""
    out: Rounds = defaultdict(lambda: {s: defaultdict(list) for s in SIDES})
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key, side = (int(row["round"]), str(row["label"])), str(row["side"])
            ms = float(row["median_ms"]) if row.get("ok", True) else math.nan
            phase = str(row["phase"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if strict:
                raise ValueError(f"{path}:{n}: not a paired-trace line ({exc})") from None
            continue
        if side in SIDES and math.isfinite(ms) and ms > 0:
            out[key][side][phase].append(ms)
    return out


def round_times(sides: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]] | None:
    """side -> phase -> time of one round (a side's several turns in a phase count as their
    geometric mean, as the A/B counts them), or None unless both sides timed the same phases."""
    inc, cand = sides["incumbent"], sides["candidate"]
    if not inc or set(inc) != set(cand):
        return None
    return {
        s: {p: math.exp(sum(map(math.log, v)) / len(v)) for p, v in sides[s].items()} for s in SIDES
    }
