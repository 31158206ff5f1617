"""Record formats of SPEC sections 4, 6 and 7."""

from __future__ import annotations

import json
import math

import pytest

from kernel_ratchet.campaign.render import (
    commit_message,
    tip_entry,
    trend_header,
    trend_row,
    vs_baseline,
)
from kernel_ratchet.scoring.metrics import Aggregates


def test_trend_header_matches_spec():
    assert trend_header("compute_fwd_bwd").splitlines()[0] == (
        "| Round | Status | Description | Fwd Avg TFLOPS | Fwd Peak TFLOPS | Bwd Avg TFLOPS | "
        "Bwd Peak TFLOPS | Combined Step TFLOPS | vs Baseline | Key Finding |"
    )
    assert "Fwd Avg GB/s" in trend_header("memory")


def test_vs_baseline_format():
    assert vs_baseline(0.0123, -0.004, None) == "step +1.230%, fwd -0.400%, bwd -"


def test_forward_only_rows_fill_backward_cells_with_dash():
    aggs = Aggregates(500.0, 600.0, math.nan, math.nan, 500.0, 600.0, 3, 3)
    row = trend_row(2, "ACCEPTED", "bigger tiles | k", aggs, "compute_fwd", "x", "ok")
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    assert cells[:3] == ["round-2", "ACCEPTED", "bigger tiles / k"]
    assert cells[3:8] == ["500.00", "600.00", "-", "-", "-"]


def test_commit_message_format():
    msg = commit_message(
        "gemm_bf16",
        "TRITON",
        5,
        "swizzle 8",
        "grouped-M swizzle cuts L2 misses",
        600.0,
        630.0,
        ".ratchet/campaigns/c/logs/optimize.md",
    )
    assert msg.splitlines() == [
        "[optimize] gemm_bf16 TRITON round-5: swizzle 8",
        "",
        "Hypothesis: grouped-M swizzle cuts L2 misses",
        "Result: 600.00 -> 630.00 (+5.0%)",
        "Details: .ratchet/campaigns/c/logs/optimize.md",
    ]


def test_tip_entry_format():
    e = tip_entry("2026-11-29 10:00", 3, "ACCEPTED", "c", "s", "t", "a")
    assert e.splitlines()[:5] == [
        "### 2026-11-29 10:00 round-3 — ACCEPTED",
        "- Context: c",
        "- Signal: s",
        "- Takeaway: t",
        "- Applicability: a",
    ]


def test_time_line_says_where_a_round_went():
    from kernel_ratchet.campaign.render import time_line

    rec = {"seconds": {"test": 14.6, "harness_quick": 20.2, "ab_quick": 79.4, "measure": 114.9}}
    assert time_line(rec["seconds"]) == "115 s: test 15, harness_quick 20, ab_quick 79"
    assert time_line({"test": 3.0}) == "test 3"
    # a norm's quick round: 2.8 s outside the steps, named
    quick = {"test": 9.9, "harness_quick": 5.5, "ab_quick": 13.0, "measure": 31.2}
    assert time_line(quick) == "31 s: test 10, harness_quick 6, ab_quick 13, other 3"


def test_paired_chain_reads_an_incumbent_closed_before_it_was_kept(tmp_path):
    """Campaigns resumed on this tool hold closed rounds without ``paired_chain``: the chain of
    such an incumbent is rebuilt from its round record, not taken as the baseline's."""
    from types import SimpleNamespace

    from kernel_ratchet.campaign.record import RoundRecord
    from kernel_ratchet.campaign.round_decision import RoundDecision
    from kernel_ratchet.campaign.rounds.close import paired_chain
    from kernel_ratchet.campaign.state import ClosedEntry

    def rec(n: int, inc: int, gain: float | None, paired: bool = True) -> RoundRecord:
        decision = RoundDecision("ACCEPTED", "r", paired, False, (), 1.0, 1.0, gain, 0.0, False, ())
        return RoundRecord(
            round=n,
            status="ACCEPTED",
            category="ok",
            incumbent_round=inc,
            decision=decision if gain is not None else None,
        )

    closed = {  # round 6: an old entry, closed before the paired chain was kept
        1: ClosedEntry(1, "BASELINE", "full", "baseline", "b"),
        6: ClosedEntry(6, "ACCEPTED", "quick", "ok", "h", gain=0.0584, chain_kept=False),
    }
    (tmp_path / "round-6").mkdir()
    (tmp_path / "round-6/round.json").write_text(json.dumps(rec(6, 1, 0.0584).to_dict()))
    c = SimpleNamespace(
        state=SimpleNamespace(closed_round=closed.get), round_dir=lambda n: tmp_path / f"round-{n}"
    )
    assert paired_chain(c, rec(8, 6, 0.02)) == pytest.approx(1.0584 * 1.02 - 1)
    assert paired_chain(c, rec(6, 1, 0.0584)) == pytest.approx(0.0584)
    assert paired_chain(c, rec(9, 6, 0.02, paired=False)) is None
    assert paired_chain(c, rec(10, 6, None)) is None


def test_termination_estimates_the_incumbent_by_its_paired_chain(monkeypatch):
    """T1 reads the incumbent's paired chain when it has one (the CSVs' vs_baseline, two single
    measurements, otherwise); T3 counts the closed rounds after the baseline."""
    from types import SimpleNamespace

    from kernel_ratchet.campaign import termination

    monkeypatch.setattr(termination, "aggregates", lambda *_a: SimpleNamespace(primary_avg=100.0))

    from kernel_ratchet.campaign.state import ClosedEntry

    def camp(inc: dict, target: float | None = 105.0, max_iterations: int = 20):
        entry = ClosedEntry(
            inc["round"],
            "ACCEPTED",
            "quick",
            "ok",
            "h",
            vs_baseline=inc.get("vs_baseline"),
            paired_chain=inc.get("paired_chain"),
            chain_kept="paired_chain" in inc,
        )
        closed = [ClosedEntry(1, "BASELINE", "full", "baseline", "b"), entry]
        st = SimpleNamespace(
            closed=closed,
            incumbent_round=entry.round,
            closed_round=lambda n: next((r for r in closed if r.round == n), None),
        )
        m = SimpleNamespace(
            performance_target=target,
            efficiency_target=None,
            hardware_peak=None,
            max_iterations=max_iterations,
            campaign_type="compute_fwd",
        )
        return SimpleNamespace(state=st, m=m, baseline_table=lambda: None)

    reached = termination.check_termination(
        camp({"round": 2, "paired_chain": 0.06, "vs_baseline": 0.01})
    )
    assert reached.code == "T1" and "106.00" in reached.reason
    assert (
        termination.check_termination(camp({"round": 2, "paired_chain": 0.02, "vs_baseline": 0.09}))
        is None
    )
    legacy = termination.check_termination(camp({"round": 2, "vs_baseline": 0.06}))
    assert legacy.code == "T1"
    t3 = termination.check_termination(
        camp({"round": 2, "paired_chain": 0.0}, None, max_iterations=1)
    )
    assert t3.code == "T3"


def test_a_trend_rows_key_finding_is_the_reasons_first_clause_outside_brackets():
    from kernel_ratchet.campaign.rounds.view import first_clause

    reason = "baseline: 0/2 shapes PASS (a: SNR 3 dB; b: SNR 4 dB), as declared; schema frozen"
    assert (
        first_clause(reason) == "baseline: 0/2 shapes PASS (a: SNR 3 dB; b: SNR 4 dB), as declared"
    )
    assert first_clause("ACCEPTED (quick): 1.05x [1.01, 1.09]; no shape regressed") == (
        "ACCEPTED (quick): 1.05x [1.01, 1.09]"
    )
    assert first_clause("no clause at all") == "no clause at all"
