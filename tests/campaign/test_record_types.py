"""The typed history: round records, decisions, the pending round and the closed index read the
JSON a campaign holds on disk and write it back unchanged; they refuse what cannot be."""

from __future__ import annotations

import json
import math

import pytest

from kernel_ratchet.campaign.category import VERIFIED_CATEGORIES, Category
from kernel_ratchet.campaign.record import (
    RoundDraft,
    RoundRecord,
    category_of,
    read_record,
    verified_ineffective,
    write_record,
)
from kernel_ratchet.campaign.round_decision import RoundDecision, ShapeResult
from kernel_ratchet.campaign.state import ClosedEntry, PendingRound, Stage, State
from kernel_ratchet.harness.paired_run import FAILURE_CATEGORIES, Failure, PairedRun
from kernel_ratchet.harness.worker import CATEGORIES
from kernel_ratchet.scoring.decision import Status

TEST = "python -m pytest tests/test_kernel.py -q"
BASELINE = {
    "round": 1,
    "status": "BASELINE",
    "category": "baseline",
    "hypothesis": "Baseline measurement",
    "bucket": "-",
    "change": "none (baseline)",
    "level": "full",
    "started": "2026-01-05 10:00",
    "finished": "2026-01-05 10:01",
    "reason": "baseline: 4/4 shapes PASS; schema frozen; representative shapes chosen",
    "csv": "rounds/round-1/artifacts/benchmark.csv",
    "quick_csv": None,
    "incumbent_csv": None,
    "decision": None,
    "test_command": TEST,
    "harness_command": "python quick_test_bench.py --level full",
}
DRIVER = {
    "expected": "faster",
    "lesson": "",
    "next_direction": "",
    "takeaway": "",
    "summary": "32x32 tiles",
    "direction": "tiles:32",
    "incumbent_round": 1,
    "out_of_scope": [],
}
PAIRED = {
    "status": "ROLLED BACK",
    "reason": "AMBIGUOUS: aggregate speed ratio 1.0423x [0.9723, 1.1042]; too noisy to confirm",
    "paired": True,
    "trade_off": False,
    "regressions": [],
    "aggregate_before": 3.23e-06,
    "aggregate_after": 3.37e-06,
    "gain": 0.0423,
    "gain_noise": 0.066,
    "gain_ci": [-0.028, 0.104],
    "ambiguous": True,
    "rounds": 6,
    "min_detectable": 0.0,
    "unconfirmed": False,
    "early_stop": None,
    "per_shape": [
        {
            "label": "m32",
            "incumbent": None,
            "candidate": None,
            "delta": -0.017,
            "noise": 0.15,
            "ci": [-0.19, 0.11],
            "verdict": "AMBIGUOUS",
            "rounds": 6,
        }
    ],
    "harness_only": {"status": "ROLLED BACK", "reason": "3 shape(s) regressed", "gain": -0.44},
    "skew": ["NOT-APPLICABLE", "not a grouped op"],
}
NOISE = {
    **BASELINE,
    **DRIVER,
    "round": 2,
    "status": "ROLLED BACK",
    "category": "noise",
    "hypothesis": "32x32 tiles: fewer programs",
    "bucket": "K1",
    "change": "32x32 tiles",
    "level": "quick",
    "reason": PAIRED["reason"],
    "csv": "rounds/round-2/artifacts/benchmark.csv",
    "incumbent_csv": "rounds/round-1/artifacts/benchmark.csv",
    "decision": PAIRED,
    "seconds": {"test": 11.0, "harness_quick": 12.7, "ab_quick": 52.2, "measure": 76.5},
    "transfer_static": {
        "bucket": "K1",
        "evidence": ["kernel.py — only constants changed (tiles/config)"],
        "cache_keys": [],
        "verdict": "ALLOW",
        "reason": "K1 confirmed by the syntax tree",
    },
}
CHECK_FAIL = {
    **NOISE,
    "round": 3,
    "category": "correctness",
    "reason": "Check=FAIL on 1 shape(s): m32",
    "decision": {
        "status": "ROLLED BACK",
        "reason": "Check=FAIL on 1 shape(s): m32",
        "paired": False,
        "trade_off": False,
        "regressions": [],
        "aggregate_before": 3.23e-06,
        "aggregate_after": math.nan,
        "gain": math.nan,
        "gain_noise": math.nan,
        "ambiguous": False,
        "per_shape": [],
    },
}
INTERRUPTED = {
    **BASELINE,
    **DRIVER,
    "round": 4,
    "status": "ROLLED BACK",
    "category": "interrupted",
    "bucket": "K1",
    "level": "quick",
    "csv": None,
    "harness_command": "",
    "reason": "interrupted by Ctrl+C before a decision",
}


def _same(a, b) -> bool:
    """JSON equality with NaN equal to NaN."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize(
    "d", [BASELINE, NOISE, CHECK_FAIL, INTERRUPTED], ids=lambda d: d["category"]
)
def test_a_round_json_reads_and_writes_back_unchanged(d, tmp_path):
    record = RoundRecord.from_dict(d)
    assert _same(record.to_dict(), d)
    path = tmp_path / "round.json"
    write_record(path, record)
    assert _same(read_record(path).to_dict(), d)
    assert isinstance(record.status, Status) and isinstance(record.category, Category)


def test_a_record_keeps_its_decision_typed():
    record = RoundRecord.from_dict(NOISE)
    d = record.decision
    assert isinstance(d, RoundDecision) and d.paired and d.gain_ci == (-0.028, 0.104)
    assert d.per_shape == (
        ShapeResult("m32", None, None, -0.017, 0.15, "AMBIGUOUS", (-0.19, 0.11), 6),
    )
    assert record.transfer_static.evidence == (NOISE["transfer_static"]["evidence"][0],)
    assert record.gain == 0.0423 and record.direction_key == "tiles:32"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"status": "ACCEPTED", "category": "noise"}, "category 'ok'"),
        ({"status": "ROLLED BACK", "category": "ok"}, "cannot have category"),
        ({"status": "BASELINE", "category": "test"}, "category 'baseline'"),
        ({"category": "misread"}, "misread"),
        ({"level": "medium"}, "quick or full"),
        ({"bucket": "K9"}, "bucket"),
        ({"round": 0}, "round"),
    ],
)
def test_a_record_that_cannot_be_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        RoundRecord.from_dict({**NOISE, **changes})


def test_the_draft_is_where_a_failure_becomes_a_record():
    draft = RoundDraft(2, "h", "K1", "c", "quick", "t0", TEST, 1, notes={"lesson": "l"})
    draft.timed("test", 3.04)
    rec = draft.failed(Category.TEST, "focused test failed", "t1")
    assert (rec.status, rec.category, rec.reason, rec.lesson) == (
        Status.ROLLED_BACK,
        Category.TEST,
        "focused test failed",
        "l",
    )
    assert rec.seconds == {"test": 3.0} and rec.decision is None
    assert rec.with_seconds("measure", 4.26).seconds == {"test": 3.0, "measure": 4.3}


def test_an_accepted_round_keeps_no_lesson_stated_for_a_rollback():
    notes = {"lesson": "scales were hidden already", "expected": "+2%"}
    draft = RoundDraft(2, "h", "K1", "c", "full", "t0", TEST, 1, notes=notes)
    decision = RoundDecision.from_dict({**PAIRED, "status": "ACCEPTED"})
    rec = draft.decided(decision, Category.OK, "t1", level="full", csv="c.csv",
                        incumbent_csv=None)  # fmt: skip
    assert (rec.status, rec.lesson, rec.expected) == (Status.ACCEPTED, "", "+2%")
    rolled = draft.decided(RoundDecision.from_dict(PAIRED), Category.NOISE, "t1", level="full",
                           csv="c.csv", incumbent_csv=None)  # fmt: skip
    assert rolled.lesson == "scales were hidden already"


def test_a_decision_names_its_own_category():
    d = RoundDecision.from_dict(PAIRED)
    assert category_of(d, 0.05) is Category.NOISE
    regressed = RoundDecision.from_dict(
        {**PAIRED, "ambiguous": False, "regressions": ["m32"], "per_shape": []}
    )
    worse = ShapeResult("m32", None, None, -0.08, 0.01, "SLOWER", (-0.09, -0.07), 6)
    assert category_of(regressed, 0.05) is Category.NO_GAIN  # no shape past the threshold
    assert category_of(type(d)(**{**regressed.__dict__, "per_shape": (worse,)}), 0.05) is (
        Category.REGRESSION
    )
    overfit = RoundDecision.from_dict({**PAIRED, "status": "ACCEPTED"}).rejected_as_overfit("x")
    assert overfit.status is Status.ROLLED_BACK and overfit.reason.startswith("REJECT-as-overfit")
    assert category_of(overfit, 0.05) is Category.OVERFIT


def test_one_rule_for_verified_ineffective_directions():
    records = [RoundRecord.from_dict(d) for d in (BASELINE, NOISE, CHECK_FAIL, INTERRUPTED)]
    assert [r.round for r in verified_ineffective(records)] == [2, 3]
    entries = [ClosedEntry(r.round, r.status, r.level, r.category, r.hypothesis) for r in records]
    assert [e.round for e in entries if e.verified_ineffective] == [2, 3]
    assert Category.INTERRUPTED not in VERIFIED_CATEGORIES and Category.TEST.verified
    assert Category.TEST.root_cause == "the focused test failed (correctness gate)"
    assert Category.OVERFIT.root_cause == "overfit"  # no sentence of its own: its name


def test_the_pending_round_writes_only_what_it_was_given():
    base = PendingRound(1, Stage.MEASURING, "t0")
    assert base.to_dict() == {"round": 1, "stage": "MEASURING", "started": "t0"}
    p = PendingRound(3, Stage.MEASURING, "t0", "h", "K1", "quick", notes={"change": "c"})
    assert p.to_dict() == {
        "round": 3,
        "stage": "MEASURING",
        "started": "t0",
        "hypothesis": "h",
        "bucket": "K1",
        "level": "quick",
        "change": "c",
    }
    applied = p.at(Stage.DECIDED).at(Stage.APPLIED, commit=None)
    assert applied.to_dict()["commit"] is None and PendingRound.from_dict(applied.to_dict()) == (
        applied
    )
    with pytest.raises(ValueError, match="unknown round notes"):
        PendingRound(3, Stage.MEASURING, "t0", "h", "K1", "quick", notes={"mood": "x"})


def test_the_state_keeps_an_entry_closed_before_the_chain_was_kept(tmp_path):
    old = {"round": 2, "status": "ACCEPTED", "level": "quick", "category": "ok"}
    entry = ClosedEntry.from_dict({**old, "hypothesis": "h", "gain": 0.05})
    assert not entry.chain_kept and "paired_chain" not in entry.to_dict()
    kept = ClosedEntry.from_dict({**old, "hypothesis": "h", "paired_chain": None})
    assert kept.chain_kept and kept.to_dict()["paired_chain"] is None
    State(closed=[entry, kept]).save(tmp_path)
    again = State.load(tmp_path)
    assert again.closed == [entry, kept]
    assert json.loads((tmp_path / "state.json").read_text())["phase"] == "INITIALIZED"


@pytest.mark.parametrize("category", FAILURE_CATEGORIES)
def test_every_way_an_ab_run_can_fail_closes_the_round_with_its_cause(category):
    """A candidate less precise than the incumbent ended an H200 round in a ValueError: the A/B
    named a category the round records did not have. Every failure the A/B can report now maps
    to a rollback category with its own root cause; the incumbent's are the incumbent's."""
    from kernel_ratchet.campaign.rounds.paired import PairedFailure, _to_decision

    assert set(CATEGORIES) - {"ok"} <= set(FAILURE_CATEGORIES)
    for side, expected in (("candidate", Category(category)), ("incumbent", Category.INCUMBENT)):
        failure = Failure(side, "check", "m1", category, "why", "log")
        run = PairedRun(
            labels=("m1",),
            phases=("fwd",),
            campaign_type="compute_fwd",
            times={},
            order=(),
            rounds=0,
            failure=failure,
            decision=None,
            wall_s=0.0,
            check_wall_s=0.0,
            rng_seed=0,
            logs={},
        )
        out = _to_decision(None, run, None, [], "", "", ["m1"])  # type: ignore[arg-type]
        assert isinstance(out, PairedFailure) and out.category is expected
        assert out.category.root_cause != out.category.value


def test_a_round_rolled_back_at_a_gate_keeps_the_index_and_its_record_in_agreement(tmp_path):
    """A Check=FAIL round has no gain (NaN); the seal's comparison of the index with the
    sealed record took NaN for a forged gain, and every later command stopped."""
    from types import SimpleNamespace

    from kernel_ratchet.campaign.seal import index_mismatches

    record = RoundRecord.from_dict(CHECK_FAIL)
    (tmp_path / "round-3").mkdir()
    write_record(tmp_path / "round-3" / "round.json", record)
    entry = ClosedEntry(3, record.status, "quick", record.category, "h", gain=record.gain)
    entry = ClosedEntry.from_dict(json.loads(json.dumps(entry.to_dict())))  # as state.json
    c = SimpleNamespace(
        state=SimpleNamespace(closed=[entry]), round_dir=lambda n: tmp_path / f"round-{n}"
    )
    assert math.isnan(record.gain) and index_mismatches(c) == []
    forged = ClosedEntry(3, record.status, "quick", record.category, "h", gain=0.5)
    c.state.closed = [forged]
    assert index_mismatches(c) == ["round-3: gain"]
