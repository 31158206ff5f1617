"""An interrupted round states what its paired A/B had measured when it stopped."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.rounds.measure import interrupted_record
from kernel_ratchet.campaign.rounds.partial import FULL_TRACE, TRACE, paired_so_far
from kernel_ratchet.campaign.rounds.view import _attribution
from kernel_ratchet.campaign.state import PendingRound, Stage


def _line(r: int, label: str, phase: str, side: str, ms: float, ok: bool = True) -> str:
    row = {"round": r, "label": label, "phase": phase, "side": side, "ok": ok, "median_ms": ms}
    return json.dumps(row)


def _trace(tmp_path, lines: list[str], tail: str = "") -> None:
    p = tmp_path / TRACE
    p.parent.mkdir(parents=True)
    p.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")


def _rounds(label: str, inc: tuple[float, float], cand: tuple[float, float], n: int) -> list[str]:
    out = []
    for r in range(n):
        for side, (f, b) in (("incumbent", inc), ("candidate", cand)):
            out += [_line(r, label, "fwd", side, f), _line(r, label, "bwd", side, b)]
    return out


def test_states_per_shape_ratio_of_complete_rounds(tmp_path):
    # shape a: the candidate's step 2.0 ms against 2.2 ms (1.1x) over 3 complete rounds; a 4th
    # round has only the incumbent's fwd, and the line being written at the kill is cut
    lines = _rounds("a", (1.0, 1.2), (1.0, 1.0), 3) + [_line(3, "a", "fwd", "incumbent", 9.0)]
    lines += _rounds("b", (1.0, 1.0), (1.25, 1.25), 2)  # 0.8x
    lines.append(_line(2, "b", "fwd", "candidate", 5.0, ok=False))
    _trace(tmp_path, lines, tail='{"round": 4, "lab')
    s = paired_so_far(tmp_path, "compute_fwd_bwd")
    assert "a 1.1000x (3 rounds)" in s and "b 0.8000x (2 rounds)" in s
    assert "geomean 0.9381x" in s and "Not a decision" in s
    # the forward alone when the campaign type scores the forward
    assert "a 1.0000x (3 rounds)" in paired_so_far(tmp_path, "compute_fwd")


def test_malformed_trace_lines_are_skipped_not_fatal(tmp_path):
    """Recovery reads this: a line it cannot place never stops a round from closing."""
    lines = _rounds("a", (1.0, 1.0), (0.5, 0.5), 2)
    lines += ["[1, 2]", '{"ok": true, "side": "incumbent", "median_ms": 1.0}', "{}"]
    lines.append(json.dumps({"ok": True, "side": "candidate", "median_ms": 1, "round": "x"}))
    _trace(tmp_path, lines)
    assert "a 2.0000x (2 rounds)" in paired_so_far(tmp_path, "compute_fwd_bwd")


def test_an_escalated_round_states_its_full_level_a_b(tmp_path):
    _trace(tmp_path, _rounds("a", (1.0, 1.0), (0.5, 0.5), 2))  # the quick level's, finished
    full = tmp_path / FULL_TRACE
    full.parent.mkdir(parents=True)
    full.write_text("\n".join(_rounds("a", (1.0, 1.0), (0.8, 0.8), 3)) + "\n")
    said = paired_so_far(tmp_path, "compute_fwd_bwd")
    assert "a 1.2500x (3 rounds)" in said and FULL_TRACE.as_posix() in said


def test_nothing_to_state_without_a_complete_round(tmp_path):
    assert paired_so_far(tmp_path, "compute_fwd_bwd") == ""
    _trace(tmp_path, [_line(0, "a", "fwd", "incumbent", 1.0)])
    assert paired_so_far(tmp_path, "compute_fwd_bwd") == ""


def _context(tmp_path) -> SimpleNamespace:
    return SimpleNamespace(
        round_dir=lambda n: tmp_path,
        m=SimpleNamespace(campaign_type="compute_fwd_bwd", test_command="pytest -q"),
        state=SimpleNamespace(incumbent_round=1, rehearsal=False),
    )


@pytest.mark.parametrize("traced", [True, False])
def test_interrupted_record_and_attribution(tmp_path, traced):
    if traced:
        _trace(tmp_path, _rounds("m500", (1.0, 1.2), (1.0, 1.0), 4))
    p = PendingRound(2, Stage.MEASURING, "2026-01-01 00:00", "h", "K1", "full")
    rec = interrupted_record(_context(tmp_path), 2, p, "SIGTERM")
    assert rec.category is Category.INTERRUPTED and rec.reason.startswith("interrupted by SIGTERM")
    assert ("m500 1.1000x (4 rounds)" in rec.reason) is traced
    assert ("in the decision above" in _attribution(rec)) is traced
