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

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from kernel_ratchet.harness.paired_samples import PairedSamples
from kernel_ratchet.scoring.paired_stats import log_ratios

SIDES = ("incumbent", "candidate")
#: Where a round's paired A/B writes its trace, relative to the round's directory.
TRACE = Path("artifacts") / "paired" / "timings.jsonl"
#: The words an interrupted round's reason states its paired A/B with (the view finds them).
STATED = "the paired A/B had timed"
#: The trace of an escalated round's full-level A/B, which runs after the quick one.
FULL_TRACE = Path("artifacts") / "full" / "paired" / "timings.jsonl"


def _complete_rounds(lines: list[dict]) -> dict[str, list[dict[str, dict[str, float]]]]:
    """Per shape, in round order: ``{side: {phase: median_ms}}`` of the rounds in which every
    phase timed on either side was timed on both."""
    by: dict[tuple[str, int], dict[str, dict[str, float]]] = defaultdict(
        lambda: {s: {} for s in SIDES}
    )
    for r in lines:
        if not isinstance(r, dict):
            continue
        ms = r.get("median_ms")
        if not (r.get("ok") and r.get("side") in SIDES and isinstance(ms, (int, float)) and ms > 0):
            continue
        try:
            key = (str(r["label"]), int(r["round"]))
        except (KeyError, TypeError, ValueError):
            continue  # a line this reader cannot place: the others still count
        by[key][r["side"]][str(r.get("phase"))] = float(ms)
    out: dict[str, list[dict[str, dict[str, float]]]] = defaultdict(list)
    for (label, _), sides in sorted(by.items(), key=lambda kv: kv[0][1]):
        inc, cand = sides["incumbent"], sides["candidate"]
        if inc and set(inc) == set(cand) and "fwd" in inc:
            out[label].append(sides)
    return out


def _samples(rounds: list[dict[str, dict[str, float]]]) -> PairedSamples:
    phases = set(rounds[0]["incumbent"])
    rounds = [r for r in rounds if set(r["incumbent"]) == phases]
    return PairedSamples(
        {p: [r["incumbent"][p] for r in rounds] for p in phases},
        {p: [r["candidate"][p] for r in rounds] for p in phases},
    )


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
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    lines = []
    for ln in text.splitlines():
        try:
            lines.append(json.loads(ln))
        except json.JSONDecodeError:
            continue  # the line being written when the process died
    ratios: dict[str, tuple[float, int]] = {}
    for label, rounds in _complete_rounds(lines).items():
        try:
            s = _samples(rounds)
            x = log_ratios(s, campaign_type)
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
