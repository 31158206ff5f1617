"""A paired round's shape line says when a confirmed difference is inside the no-gain margin."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.round_decision import ShapeResult
from kernel_ratchet.campaign.rounds.view import _inside_margin


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
