"""Where the time and the noise of paired A/B runs went, from their ``timings.jsonl`` traces.

Every paired A/B writes one JSON line per timing request (``kernel_ratchet.harness.ab``): the
samples, the SM clock read during each, dropped samples, the engine's flags, the warm-up spent
and the request's wall seconds, in visit order. This reads any number of such files (e.g.
``find ab_logs -name timings.jsonl``) and prints, per shape and phase:

* requests, median request seconds and median warm-up milliseconds (what a round costs);
* dropped (throttled) samples and the flags raised;
* the spread of one round's log speed ratio (incumbent / candidate; each file is a group, see
  :func:`kernel_ratchet.scoring.noise.pooled_spread`) and the advantage of the side timed first
  (:func:`~kernel_ratchet.scoring.noise.first_timed_advantage`);
* the correlation, within each side, between a request's time and its mean SM clock: strongly
  negative when clock swings drive the noise;

and, under the table, where all the requests' seconds went: building inputs, the measurement
(warm-up and spot checks within it), the checks after it, and outside the worker (the driver,
the protocol, the process hop).

    python -m kernel_ratchet.method.traces $(find ab_logs -name timings.jsonl)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from kernel_ratchet.scoring.noise import first_timed_advantage, pooled_spread


def _rows(paths: list[str]) -> list[tuple[int, dict]]:
    out = []
    for i, p in enumerate(paths):
        for line in Path(p).read_text().splitlines():
            if line.strip():
                out.append((i, json.loads(line)))
    return out


def _corr(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return None
    return statistics.correlation(xs, ys)


def _order_stats(items: list[tuple[int, dict]]) -> tuple[float | None, float | None]:
    """(round spread, first-timed advantage) of one shape and phase: each file (one A/B) is a
    group centred on its own median."""
    pairs: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for f, r in items:
        pairs[(f, r["round"])].append(r)  # visit order: the first line was timed first
    per_file: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for (f, _), rs in pairs.items():
        sides = {r["side"]: r["median_ms"] for r in rs}
        if len(sides) == 2:
            per_file[f].append((math.log(sides["incumbent"] / sides["candidate"]), rs[0]["side"]))
    spread = pooled_spread([x for x, _ in v] for v in per_file.values())
    adv = first_timed_advantage(
        (x - statistics.median(y for y, _ in v), first) for v in per_file.values() for x, first in v
    )
    return spread, adv


def _clock_corr(items: list[tuple[int, dict]]) -> list[float | None]:
    """Per side (incumbent, candidate): the correlation of a request's time with its mean SM
    clock."""
    corrs = []
    for side in ("incumbent", "candidate"):
        rs = [r for _, r in items if r["side"] == side and r.get("clock_mhz")]
        corrs.append(
            _corr([r["median_ms"] for r in rs], [statistics.fmean(r["clock_mhz"]) for r in rs])
        )
    return corrs


#: The stages of a request in the worker, as its trace line's ``stages_s`` names them.
STAGES = ("inputs", "measure", "spot", "after")


def _stages(items: list[tuple[int, dict]]) -> str:
    """Median host seconds of a request's stages in the worker (inputs / measurement / spot
    checks within it / checks after), '-' for traces written before they were recorded."""
    rs = [r["stages_s"] for _, r in items if isinstance(r.get("stages_s"), dict)]
    if not rs:
        return "-"
    return " / ".join(f"{statistics.median(x.get(k, 0.0) for x in rs):.3f}" for k in STAGES)


def _row(label: str, phase: str, items: list[tuple[int, dict]]) -> str:
    req = statistics.median(r["request_s"] for _, r in items)
    warm = [r["warmup_ms_spent"] for _, r in items if r.get("warmup_ms_spent") is not None]
    dropped = sum(r.get("dropped") or 0 for _, r in items)
    flags = Counter(f for _, r in items for f in (r.get("flags") or []))
    spread, adv = _order_stats(items)
    fl = "; ".join(f"{n}x {k[:40]}" for k, n in flags.most_common(2)) or "-"
    return (
        f"| {label} | {phase} | {len(items)} | {req:.3f} | {_stages(items)} | "
        f"{statistics.median(warm) if warm else float('nan'):.0f} | {dropped} | {fl} | "
        f"{'-' if spread is None else f'{spread:.2%}'} | "
        f"{'-' if adv is None else f'{adv:+.2%}'} | "
        + " / ".join("-" if c is None else f"{c:+.2f}" for c in _clock_corr(items))
        + " |"
    )


def report(paths: list[str]) -> str:
    """The markdown table, one row per shape and phase, of the traces in ``paths``."""
    by: dict[tuple[str, str], list[tuple[int, dict]]] = defaultdict(list)
    for f, r in _rows(paths):
        if r.get("ok"):
            by[(r["label"], r["phase"])].append((f, r))
    lines = [
        "| shape | phase | requests | median request s | inputs / measure / spot / after s | "
        "median warm-up ms | dropped | flags | round spread | first-timed advantage | "
        "corr(time, clock) inc / cand |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(label, phase, items) for (label, phase), items in sorted(by.items())]
    return "\n".join([*lines, "", _totals([r for items in by.values() for _, r in items])])


def _totals(rs: list[dict]) -> str:
    """One line: the requests' seconds in all, split by where they went."""
    total = sum(r["request_s"] for r in rs)
    staged = [r for r in rs if isinstance(r.get("stages_s"), dict)]
    warm = sum(r.get("warmup_ms_spent") or 0.0 for r in rs) / 1e3
    line = f"{len(rs)} requests, {total:.1f} s in all; warm-up {warm:.1f} s"
    if not staged:
        return line + " (no stage times in these traces)"
    st = {k: sum(r["stages_s"].get(k, 0.0) for r in staged) for k in STAGES}
    outside = sum(r["request_s"] for r in staged) - st["inputs"] - st["measure"] - st["after"]
    return (
        f"{line}; in the worker ({len(staged)} requests with stage times): inputs "
        f"{st['inputs']:.1f} s, measurement {st['measure']:.1f} s (spot checks "
        f"{st['spot']:.1f} s), checks after {st['after']:.1f} s; outside the worker "
        f"{outside:.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m kernel_ratchet.method.traces FILE...``: print the table."""
    p = argparse.ArgumentParser(
        prog="python -m kernel_ratchet.method.traces", description=__doc__.splitlines()[0]
    )
    p.add_argument("traces", nargs="+", help="timings.jsonl files")
    args = p.parse_args(argv)
    print(report(args.traces))
    return 0


if __name__ == "__main__":
    sys.exit(main())
