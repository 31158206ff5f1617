"""A paired round's shape line: when a confirmed difference is inside the no-gain margin, and
how each timed phase moved."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.render import RoundView, ShapeLine, summary_md
from kernel_ratchet.campaign.round_decision import ShapeResult
from kernel_ratchet.campaign.rounds.view import _inside_margin, _phases


def _shape(verdict: str, lo: float, hi: float) -> ShapeResult:
    return ShapeResult("s", None, None, (lo + hi) / 2, (hi - lo) / 2, verdict, (lo, hi), 5)


@pytest.mark.parametrize(
    ("verdict", "ci", "mde", "note"),
    [
        ("FASTER", (0.0002, 0.0047), None, "; inside the ±1.00% no-gain margin"),
        ("SLOWER", (-0.0041, -0.0011), None, "; inside the ±1.00% no-gain margin"),
        ("FASTER", (0.002, 0.03), None, ""),  # may be a real gain beyond the margin
        ("SLOWER", (-0.012, -0.004), None, ""),
        ("SAME", (-0.002, 0.002), None, ""),  # SAME already says it
        ("FASTER", (0.001, 0.015), 0.02, "; inside the ±2.00% no-gain margin"),  # calibrated
    ],
)
def test_a_confirmed_difference_inside_the_margin_is_named(verdict, ci, mde, note):
    record = SimpleNamespace(decision=SimpleNamespace(min_detectable=mde))
    assert _inside_margin(_shape(verdict, *ci), record) == note


def test_each_phase_speed_change_is_written_and_survives_the_record():
    s = ShapeResult("s", None, None, 0.01, 0.01, "AMBIGUOUS", (-0.01, 0.03), 10)
    phased = ShapeResult(**{**s.__dict__, "phases": {"fwd": 1.0403, "bwd": 0.9938}})
    assert _phases(phased) == "fwd +4.03%, bwd -0.62%" and _phases(s) == _phases(None) == ""
    assert ShapeResult.from_dict(phased.to_dict()) == phased
    assert "phases" not in s.to_dict() and ShapeResult.from_dict(s.to_dict()).phases is None


def _view(lines: list[ShapeLine]) -> RoundView:
    return RoundView(
        2, "ROLLED BACK", "h", "K1", "c", "t0", "t1", "full", "pytest", "bench", "Step TFLOPS",
        lines, None, None, None, "why", "attr", "next", paired=True,
    )  # fmt: skip


def _table(md: str) -> list[list[str]]:
    return [
        [c.strip() for c in ln.strip("|").split("|")] for ln in md.splitlines() if ln[:1] == "|"
    ]


def test_a_paired_table_shows_the_phases_column_only_where_phases_were_timed():
    plain = ShapeLine("a", "PASS", 2.0, 1.9, 0.05, "FASTER", "out=50.0", 1.8)
    phased = replace(plain, label="b", phases="fwd +4.03%, bwd -0.62%")
    rows = _table(summary_md(_view([plain, phased])))
    head = rows[0]
    assert head[6] == "Phases (paired)" and head[7].startswith("Harness")
    assert all(len(r) == len(head) for r in rows)
    assert rows[2][6] == "-" and rows[3][6] == "fwd +4.03%, bwd -0.62%"
    without = _table(summary_md(_view([plain])))
    assert "Phases (paired)" not in without[0] and len(without[2]) == len(without[0]) == 8
