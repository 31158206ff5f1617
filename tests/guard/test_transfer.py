"""transfer_check (the summary section) and attribute_gain (the report's attribution)."""

from __future__ import annotations

import math

import pytest

from kernel_ratchet.campaign.render import transfer_section
from kernel_ratchet.guard.dynamic_transfer import OVERFIT, TRANSFERS, DynamicResult
from kernel_ratchet.guard.skew import REJECT as SKEW_REJECT
from kernel_ratchet.guard.skew import ROBUST
from kernel_ratchet.guard.static_audit import REJECT, audit_change
from kernel_ratchet.guard.transfer import (
    ACCEPT_ASTERISK,
    ACCEPT_REAL,
    TRANSFER_KEYS,
    RoundGain,
    attribute_gain,
    estimate_real_gain,
    transfer_check,
)
from tests.guard import planted as P


def audit(after: str, declared: str = "K1"):
    return audit_change({P.PATH: P.INCUMBENT}, {P.PATH: after}, declared_bucket=declared)


def dyn(verdict: str = TRANSFERS, gap: float = 0.001) -> DynamicResult:
    return DynamicResult("m4096", 8, 5, 1.0, 1.0 + gap, gap, 0.03, verdict, "planted")


def test_keys_are_exactly_the_summary_keys() -> None:
    values = transfer_check(audit(P.K1_TILES), dyn(), 0.08)
    assert tuple(values) == TRANSFER_KEYS
    section = transfer_section(values)
    assert "not yet audited" not in section
    assert "- Decision: ACCEPT-as-real" in section


def test_k1_transfers_one_to_one() -> None:
    values = transfer_check(audit(P.K1_TILES), dyn(), 0.08)
    assert values["Bucket"].startswith("K1 (kernel-internal)")
    assert values["Cache key (if any)"] == "none"
    assert values["id(...) audit"].startswith("clean")
    assert values["Estimated real-training gain"].startswith("+8.00% = benchmark gain")
    assert values["Workload distribution robustness (grouped ops)"] == "n/a (not a grouped op)"
    assert values["Decision"] == ACCEPT_REAL


def test_w2_rejected_before_any_benchmark() -> None:
    values = transfer_check(audit(P.W2_VERSIONED), None, 0.35)
    assert values["Decision"] == REJECT
    assert "id(a)" in values["Cache key (if any)"]
    assert "fresh every step" in values["id(...) audit"]
    assert values["4-step trace hit rate"] == "not measured (no dynamic check run)"
    assert values["Estimated real-training gain"].startswith("+0.00%")


def test_w3_lru_rejected() -> None:
    assert transfer_check(audit(P.W3_LRU), None, 0.5)["Decision"] == REJECT


def test_w1_bounded_by_quant_time_ratio() -> None:
    values = transfer_check(audit(P.W1_WEIGHT), dyn(), 0.12, quant_time_ratio=0.03)
    assert values["Decision"] == ACCEPT_ASTERISK
    assert values["Estimated real-training gain"] == (
        "+3.00% = min(benchmark +12.00%, quant_time(weight)/step_time 3.00%)"
    )
    unmeasured = estimate_real_gain(audit(P.W1_WEIGHT), None, 0.12)
    assert (unmeasured.decision, unmeasured.gain) == (ACCEPT_ASTERISK, 0.0)
    small = estimate_real_gain(audit(P.W1_WEIGHT), None, 0.01, quant_time_ratio=0.03)
    assert small.gain == pytest.approx(0.01)


def test_dynamic_overfit_overrides_a_clean_static_audit() -> None:
    values = transfer_check(audit(P.K1_TILES), dyn(OVERFIT, gap=0.5), 0.2)
    assert (
        values["Decision"] == REJECT and "dynamic check" in values["Estimated real-training gain"]
    )


def test_skew_verdict_enters_the_decision() -> None:
    k2 = audit(P.K1_TILES, declared="K2")
    ok = transfer_check(k2, dyn(), 0.05, skew=(ROBUST, "holds"))
    assert ok["Decision"] == ACCEPT_REAL and ok["Workload distribution robustness (grouped ops)"]
    bad = transfer_check(k2, dyn(), 0.05, skew=(SKEW_REJECT, "uniform only"))
    assert bad["Decision"] == REJECT


def test_attribution_composes_multiplicatively() -> None:
    rounds = [
        RoundGain(2, "K1", ACCEPT_REAL, 0.10),
        RoundGain(3, "K3", ACCEPT_REAL, 0.05),
        RoundGain(4, "W1", ACCEPT_ASTERISK, 0.12, real_gain=0.03),
    ]
    att = attribute_gain(rounds)
    assert att.S_real == pytest.approx(1.10 * 1.05 - 1)  # 15.5%
    assert att.W_real == pytest.approx(1.155 * 1.03 - 1.155)  # 3.465%
    assert att.R_real == 0
    assert att.headline == pytest.approx(1.10 * 1.05 * 1.12 - 1)  # 29.36%
    assert att.gap == pytest.approx(0.2936 - (0.155 + 0.03465))
    assert att.called_out and "CALLED OUT" in att.text and "the gap exceeds 1%" in att.text


def test_attribution_clean_campaign_is_not_called_out() -> None:
    rounds = [RoundGain(2, "K1", ACCEPT_REAL, 0.04), RoundGain(3, "K4", ACCEPT_REAL, 0.02)]
    att = attribute_gain(rounds, headline=1.04 * 1.02 - 1 + 0.004)
    assert att.R_real == 0 and att.W_real == 0
    assert att.S_real == pytest.approx(att.headline) and att.gap == pytest.approx(0.0)
    assert not att.called_out and "CALLED OUT" not in att.text


def test_a_measured_headline_is_split_by_log_shares_not_blamed_on_overfitting() -> None:
    # the CPU example: harness full validation +138%, the one K round's paired gain +87.7%
    att = attribute_gain([RoundGain(2, "K1", ACCEPT_REAL, 0.8774)], headline=1.3810)
    assert att.S_real == pytest.approx(1.3810) and att.gap == pytest.approx(0.0, abs=1e-12)
    assert not att.called_out and "compose to +87.74%" in att.text
    # with a W2 round in the chain its log share of the measured headline stays in the gap
    rounds = [RoundGain(2, "K1", ACCEPT_REAL, 0.10), RoundGain(3, "W2", REJECT, 0.10)]
    att = attribute_gain(rounds, headline=0.30)
    assert att.S_real == pytest.approx(math.sqrt(1.30) - 1)  # half of the log gain
    assert att.R_real == pytest.approx(math.sqrt(1.30) - 1)
    assert att.gap == pytest.approx(0.30 - (math.sqrt(1.30) - 1)) and att.called_out


def test_no_accepted_round_leaves_nothing_to_call_out() -> None:
    att = attribute_gain([], headline=0.02)  # baseline code against itself: noise
    assert att.gap == 0.0 and att.S_real == 0 and not att.called_out


def test_attribution_calls_out_an_overfit_round_in_the_chain() -> None:
    rounds = [RoundGain(2, "K1", ACCEPT_REAL, 0.05), RoundGain(3, "W2", REJECT, 0.30)]
    att = attribute_gain(rounds)
    assert att.R_real == pytest.approx(0.30)
    assert att.gap == pytest.approx(1.05 * 1.30 - 1 - 0.05)
    assert att.called_out and "R_real is +30.00%, not 0" in att.text


def test_unmeasured_w1_counts_nothing_and_records_validate() -> None:
    att = attribute_gain([RoundGain(2, "W1", ACCEPT_ASTERISK, 0.02)])
    assert att.W_real == 0 and att.gap == pytest.approx(0.02) and att.called_out
    with pytest.raises(ValueError):
        RoundGain(2, "K9", ACCEPT_REAL, 0.1)
    with pytest.raises(ValueError):
        RoundGain(2, "K1", "MAYBE", 0.1)
    with pytest.raises(ValueError):
        RoundGain(2, "K1", ACCEPT_REAL, -1.5)
