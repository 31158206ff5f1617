"""What a paired A/B measured per shape, in the units a summary shows: each side's value in
the primary metric from its median phase times, and each phase's times themselves (median and
range over the paired rounds), so a record shows a swing that a median hides."""

from __future__ import annotations

import statistics

from kernel_ratchet.harness.csv_schema import BenchTable
from kernel_ratchet.harness.paired_run import PairedRun
from kernel_ratchet.scoring.metrics import primary_at_times

#: The sides of a paired A/B, in the order a record gives them.
SIDES = ("incumbent", "candidate")


def paired_values(
    table: BenchTable, run: PairedRun, campaign_type: str
) -> dict[str, tuple[float | None, float | None]]:
    """Per shape, (incumbent, candidate) in the primary metric from the paired A/B itself:
    each side's median time per phase over the paired rounds, the work per phase from the
    candidate's harness row. A shape without a passing row or a timed phase is left out."""
    rows = {r.label: r for r in table.rows if r.passed}
    out: dict[str, tuple[float | None, float | None]] = {}
    for label, sample in run.samples().items():
        row = rows.get(label)
        if row is None:
            continue
        sides = []
        for times in (sample.incumbent, sample.candidate):
            med = {ph: statistics.median(v) for ph, v in times.items() if v}
            sides.append(primary_at_times(row, campaign_type, med.get("fwd"), med.get("bwd")))
        out[label] = (sides[0], sides[1])
    return out


def phase_times(run: PairedRun) -> dict[str, dict[str, dict[str, tuple[float, float, float]]]]:
    """Per shape, side and timed phase: (median, fastest, slowest) of the phase's time in
    milliseconds over the paired rounds; a phase without samples is left out."""
    out: dict[str, dict[str, dict[str, tuple[float, float, float]]]] = {}
    for label, sample in run.samples().items():
        out[label] = {
            side: {ph: (statistics.median(v), min(v), max(v)) for ph, v in times.items() if v}
            for side, times in zip(SIDES, (sample.incumbent, sample.candidate), strict=True)
        }
    return out
