"""What an interrupted round's paired A/B had measured when it stopped.

A round killed mid-A/B has no decision, but its trace (``artifacts/paired/timings.jsonl``, one
line per timing request, :mod:`kernel_ratchet.harness.ab`; an escalated round's full-level A/B
writes ``artifacts/full/paired/timings.jsonl``, read first) holds every sample it took. This
reads the complete paired rounds from it (both sides, every phase of the round) and states, per
shape, the median speed ratio so far and the number of rounds behind it, and their geomean:
the state of the A/B at the interrupt, for the driver to read. It is not a decision (no
confidence interval, the stopping rule did not finish) and the record says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.harness.paired_trace import round_times, trace_rounds
from kernel_ratchet.scoring.paired_stats import log_ratios

#: Where a round's paired A/B writes its trace, relative to the round's directory.
TRACE = Path("artifacts") / "paired" / "timings.jsonl"
#: The trace of an escalated round's full-level A/B, which runs after the quick one.
FULL_TRACE = Path("artifacts") / "full" / "paired" / "timings.jsonl"
#: The words an interrupted round's reason states its paired A/B with (the view finds them).
STATED = "the paired A/B had timed"


def _samples(path: Path) -> dict[str, PairedSamples]:
    """Per shape, the complete paired rounds of the trace at ``path`` (both sides timed the
    same phases, the forward among them; those of the shape's first such round), in order."""
    by: dict[str, list[dict[str, dict[str, float]]]] = defaultdict(list)
    for (_, label), sides in sorted(trace_rounds(path, strict=False).items()):
        t = round_times(sides)
        if t is not None and "fwd" in t["incumbent"]:
            by[label].append(t)
    out = {}
    for label, rounds in by.items():
        phases = set(rounds[0]["incumbent"])
        kept = [r for r in rounds if set(r["incumbent"]) == phases]
        out[label] = PairedSamples(
            *(
                {p: [r[side][p] for r in kept] for p in phases}
                for side in ("incumbent", "candidate")
            )
        )
    return out


def paired_so_far(round_dir: Path, campaign_type: str) -> str:
    """One sentence: the state of the round's last paired A/B (an escalated round's full-level
    one, else its own) when it stopped, or "" when no trace holds a complete paired round."""
    for rel in (FULL_TRACE, TRACE):
        said = _so_far(Path(round_dir) / rel, rel, campaign_type)
        if said:
            return said
    return ""


def _so_far(path: Path, rel: Path, campaign_type: str) -> str:
    try:
        samples = _samples(path)
    except OSError:
        return ""
    ratios: dict[str, tuple[float, int]] = {}
    for label, smp in samples.items():
        try:
            x = log_ratios(smp, campaign_type)
        except ValueError:
            continue  # a phase the campaign type needs was never timed on this shape
        ratios[label] = (math.exp(float(np.median(x))), len(x))
    if not ratios:
        return ""
    per = "; ".join(f"{k} {r:.4f}x ({n} rounds)" for k, (r, n) in ratios.items())
    geo = math.exp(float(np.mean([math.log(r) for r, _ in ratios.values()])))
    return (
        f"when it stopped, {STATED} {len(ratios)} shape(s) ({rel.as_posix()}; "
        f"median speed ratio incumbent/candidate time so far, > 1 is faster): {per}; geomean "
        f"{geo:.4f}x. Not a decision: no confidence interval, the stopping rule did not finish"
    )
