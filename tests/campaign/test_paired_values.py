"""A paired round's per-shape numbers come from the paired A/B that decided: each side's median
time per phase, in the primary metric, with the work per phase from the harness row."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.rounds.paired_times import paired_values, phase_times
from kernel_ratchet.harness.paired_run import PairedRun
from tests.scoring.conftest import gemm_row, gemm_table


def _run(times: dict) -> PairedRun:
    labels = tuple(times["incumbent"])
    return PairedRun(
        labels, ("fwd", "bwd"), "compute_fwd_bwd", times, (), 3, None, None, 1, 1, 0, {}
    )


def test_each_side_reads_its_median_paired_times_in_the_primary_metric():
    # the harness saw 500 / 400 TFLOPS (2·4096³ flops forward, 4·4096³ backward); the paired
    # rounds time the incumbent at those times and the candidate 25% faster in both phases
    table = gemm_table(
        gemm_row("g", 4096, 4096, 4096, 500.0, 5.0, 400.0, 4.0),
        gemm_row("failed", 64, 64, 64, 1.0, 0.0, 1.0, 0.0, check="FAIL"),
    )
    (row, _) = table.rows
    f, b = row.fwd_ms, row.bwd_ms
    run = _run(
        {
            "incumbent": {"g": {"fwd": (f, f * 1.5, f * 0.9), "bwd": (b, b * 2, b * 0.95)}},
            "candidate": {"g": {"fwd": (f * 0.8,) * 3, "bwd": (b * 0.8,) * 3}},
        }
    )
    inc, cand = paired_values(table, run, "compute_fwd_bwd")["g"]
    step = 6 * 4096**3 / ((f + b) * 1e-3) / 1e12  # the medians are the harness's own times
    assert inc == pytest.approx(step) and cand == pytest.approx(step / 0.8)


def test_a_shape_without_a_passing_row_has_no_paired_numbers():
    table = gemm_table(gemm_row("g", 64, 64, 64, 1.0, 0.0, 1.0, 0.0, check="FAIL"))
    run = _run({s: {"g": {"fwd": (1.0,), "bwd": (2.0,)}} for s in ("incumbent", "candidate")})
    assert paired_values(table, run, "compute_fwd_bwd") == {}


def test_each_phase_keeps_its_median_and_range_through_the_record_into_the_summary():
    """A swing the median hides (one slow round of five) shows in the record and the summary
    as each side's range; a record written before these ranges existed renders none."""
    from kernel_ratchet.campaign.render import ShapeLine, _phase_table
    from kernel_ratchet.campaign.round_decision import ShapeResult

    slow = (0.05, 0.05, 0.051, 0.05, 0.102)
    run = _run(
        {
            "incumbent": {"g": {"fwd": (0.02,) * 5, "bwd": (0.051,) * 5}},
            "candidate": {"g": {"fwd": (0.02,) * 5, "bwd": slow}},
        }
    )
    (times,) = phase_times(run).values()
    assert times["candidate"]["bwd"] == (0.05, 0.05, 0.102)
    shape = ShapeResult("g", 1.0, 1.0, 0.0, 0.0, "SAME", phase_ms=times)
    again = ShapeResult.from_dict(shape.to_dict())
    assert again == shape
    line = ShapeLine("g", "PASS", 1, 1, 0, "SAME", "-")
    table = _phase_table(SimpleNamespace(shapes=[replace(line, phase_ms=again.phase_ms)]))
    fwd, bwd = "0.02 (0.02-0.02) -> 0.02 (0.02-0.02)", "0.051 (0.051-0.051) -> 0.05 (0.05-0.102)"
    assert f"| g | {fwd} | {bwd} |" in table
    old = {k: v for k, v in shape.to_dict().items() if k != "phase_ms"}
    assert ShapeResult.from_dict(old).phase_ms is None
    assert _phase_table(SimpleNamespace(shapes=[line])) == ""


@pytest.mark.parametrize("consent", [False, True])
def test_the_ops_consent_sets_the_ab_rules_precision_margin(project, monkeypatch, consent):
    """``allow_precision_drop`` in the op's profile reaches the rule the round's A/B decides
    with: no margin with the consent, the default 20 dB without."""
    import dataclasses
    import math

    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.rounds import paired
    from kernel_ratchet.profile.loader import load_profile
    from kernel_ratchet.scoring.precision import MARGIN_DB
    from tests.campaign.conftest import campaign_dir

    monkeypatch.chdir(project)
    profile = load_profile(project)
    op = dataclasses.replace(profile.op("tiny_gemm"), allow_precision_drop=consent)
    profile = dataclasses.replace(profile, ops={**profile.ops, "tiny_gemm": op})
    seen = {}

    class Stop(Exception):
        pass

    def capture(*args, rule, **kwargs):
        seen["margin"] = rule.precision_margin_db
        raise Stop

    monkeypatch.setattr(paired, "run_paired", capture)
    c = Campaign(profile, campaign_dir(project))
    with pytest.raises(Stop):
        paired.run_ab(c.ctx, list(c.m.representative_shapes), project / "ab")
    assert seen["margin"] == (math.inf if consent else MARGIN_DB)
