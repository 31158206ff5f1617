"""The campaign headline is the paired chain with its CI, not a harness comparison."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.headline import chain_headline
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.campaign.rounds.correctness_only import FIX_ALONE, accepted_on_correctness
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.report.render import headline
from kernel_ratchet.scoring.chain import chain_interval
from tests.decisions import paired_decision
from tests.scoring.conftest import gemm_row, gemm_table


def test_the_chain_interval_adds_the_rounds_in_log_variance():
    ratio, lo, hi = chain_interval([(1.05, 1.03, 1.07, 0.95), (1.02, 1.0, 1.04, 0.95)])
    assert ratio == pytest.approx(1.05 * 1.02)
    half = math.hypot(math.log(1.07 / 1.03), math.log(1.04 / 1.0)) / 2
    assert math.log(hi / lo) / 2 == pytest.approx(half, rel=1e-6)
    assert chain_interval([]) == (1.0, 1.0, 1.0)


def test_one_rounds_chain_keeps_its_skewed_ci():
    """A bootstrap CI far from symmetric (2.83x [2.18, 2.89] at 97.5%): the chain of that one
    round at 97.5% is that CI, and at 95% lies inside it on both sides."""
    step = (2.8326, 2.1778, 2.8946, 0.975)
    assert chain_interval([step], level=0.975) == pytest.approx(step[:3], rel=1e-9)
    ratio, lo, hi = chain_interval([step])
    assert step[1] < lo < ratio < hi < step[2]


def test_the_report_headline_equals_the_paired_chain(tmp_path):
    """Round 2 accepted +5% (paired), round 3 the planted scenario, rolled back; the harness
    CSVs say something else entirely (vs_baseline): the headline is the paired chain."""
    tw = {"ratio": 1.04, "ci_low": 1.03, "ci_high": 1.05, "level": 0.95}
    d = paired_decision("ACCEPTED", 0.05, reason="r", ci_level=0.95, time_weighted=tw)
    rec = RoundRecord(round=2, status="ACCEPTED", category="ok", incumbent_round=1, decision=d)
    (tmp_path / "round-2").mkdir()
    (tmp_path / "round-2/round.json").write_text(json.dumps(rec.to_dict()))
    acc = ClosedEntry(
        2, "ACCEPTED", "quick", "ok", "h", gain=0.05, vs_baseline=-0.3, paired_chain=0.05
    )
    rolled = ClosedEntry(3, "ROLLED BACK", "quick", "no-gain", "h", vs_baseline=0.4)
    closed = {1: ClosedEntry(1, "BASELINE", "full", "baseline", "b"), 2: acc, 3: rolled}
    c = SimpleNamespace(
        state=SimpleNamespace(closed_round=closed.get, incumbent_round=2),
        round_dir=lambda n: tmp_path / f"round-{n}",
    )
    text = headline(c, [acc])
    assert text.startswith("+5.00% [+4.00%, +6.00%] (95% CI, 1 accepted round(s)")
    assert "time-weighted step +4.00% [+3.00%, +5.00%]" in text
    assert "-30" not in text and "+40" not in text  # never the harness comparison


def test_a_fix_accepted_on_correctness_alone_is_no_step_of_the_chain():
    """Its incumbent passed no shape, so it timed nothing: the chain and its CI are the timed
    rounds' alone, and the headline says the fix stands outside them (before, the fix made
    the whole headline read "no CI")."""
    fix = accepted_on_correctness(gemm_table(gemm_row("s", 64, 64, 64, 2.0)), "compute_fwd")
    assert fix.accepted and not fix.paired and math.isnan(fix.gain)
    assert fix.reason.startswith(FIX_ALONE) and "no speed is claimed" in fix.reason
    assert RoundDecision.from_dict(json.loads(json.dumps(fix.to_dict()))).correctness_only
    step = paired_decision("ACCEPTED", 0.05, reason="r", ci_level=0.95)
    text = chain_headline(0.05, [fix, step]).text()
    assert text.startswith("+5.00% [+4.00%, +6.00%] (95% CI, 1 accepted round(s)"), text
    assert "not in the chain, which counts from them: 1 fix(es) accepted on correctness" in text
    alone = chain_headline(0.0, [fix]).text()
    assert alone.startswith("+0.00% (no round's speed measured; not in the chain"), alone
