"""Parallel rounds without a cluster: which candidate a round keeps, how the others are
recorded, the search's batch of moves, and the CLI's answers when Dask is missing or the
options are wrong."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernel_ratchet.campaign.batch import best_of, outcome_record, superseded
from kernel_ratchet.campaign.candidate import CandidateJob
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.cli.common import app
from kernel_ratchet.errors import RatchetError
from kernel_ratchet.fleet.pool import parse_gpus
from kernel_ratchet.optimizers.search import SearchOptimizer
from kernel_ratchet.optimizers.testing import RecordedRounds, make_toy_project
from kernel_ratchet.scoring.decision import Status
from tests.decisions import paired_decision


def _decided(n: int, gain: float, status: Status = Status.ACCEPTED) -> RoundRecord:
    d = paired_decision(status, gain, reason=f"measured {gain:+.2%}", before=100.0)
    category = Category.OK if status is Status.ACCEPTED else Category.NO_GAIN
    return RoundRecord(
        round=n,
        status=status,
        category=category,
        hypothesis=f"move {n}",
        direction=f"E:knob={n}",
        reason=d.reason,
        decision=d,
        incumbent_round=1,
    )


def _job(n: int) -> CandidateJob:
    return CandidateJob("p", "c", n, "t", f"move {n}", "K1", "quick", {"direction": f"E:{n}"})


def test_the_largest_confirmed_gain_is_kept_and_a_tie_goes_to_the_earlier_round():
    records = [_decided(2, 0.05), _decided(3, 0.12), _decided(4, 0.30, Status.ROLLED_BACK)]
    assert best_of(records).round == 3  # a rolled-back record never wins, whatever its gain
    assert best_of([_decided(5, 0.1), _decided(4, 0.1)]).round == 4
    assert best_of([_decided(2, 0.3, Status.ROLLED_BACK)]) is None


def _fix_alone(n: int) -> RoundRecord:
    """A fix accepted on correctness alone (the incumbent passed no shape): gain NaN."""
    rec = _decided(n, 0.0)
    d = replace(rec.decision, gain=math.nan, paired=False, correctness_only=True)
    return replace(rec, decision=d, reason="FIX, accepted on correctness alone")


def test_fixes_accepted_on_correctness_alone_keep_the_first_and_claim_no_gain():
    assert best_of([_fix_alone(3), _fix_alone(2), _fix_alone(4)]).round == 2
    rec = superseded(_fix_alone(3), _fix_alone(2))
    assert rec.status is Status.ROLLED_BACK and rec.category is Category.SUPERSEDED
    assert "round-2 of the same parallel round is its one change" in rec.reason
    assert "nan" not in rec.reason.lower() and "nan" not in rec.lesson.lower()
    assert RoundRecord.from_dict(rec.to_dict()).reason == rec.reason


def test_a_superseded_candidate_keeps_its_verdict_and_may_be_tried_again():
    rec = superseded(_decided(2, 0.05), _decided(3, 0.12))
    assert rec.status is Status.ROLLED_BACK and rec.category is Category.SUPERSEDED
    assert not rec.verified_ineffective  # the direction paid: the search may try it again
    assert rec.gain == pytest.approx(0.05) and rec.decision.status is Status.ROLLED_BACK
    assert "round-3" in rec.reason and "+12.00%" in rec.reason and "measured +5.00%" in rec.reason
    assert RoundRecord.from_dict(rec.to_dict()) == rec


def test_a_worker_that_gave_no_result_is_the_candidates_recorded_loss():
    rec = outcome_record(_job(4), "its worker process died while measuring it")
    assert rec.round == 4 and rec.status is Status.ROLLED_BACK
    assert rec.category is Category.INTERRUPTED and not rec.verified_ineffective
    assert "died" in rec.reason and rec.direction == "E:4"
    kept = _decided(5, 0.02)
    assert outcome_record(_job(5), kept.to_dict()) == kept


def test_the_search_states_one_distinct_move_per_slot(tmp_path: Path):
    toy = make_toy_project(tmp_path / "toy")
    ctx = RecordedRounds(toy).context()
    batch = SearchOptimizer().propose_batch(ctx, 3)
    assert len(batch) == 3 and len({p.direction for p in batch}) == 3
    assert batch[0] == SearchOptimizer().propose(ctx)  # the first is the one-at-a-time move
    assert len(SearchOptimizer(knobs="num_warps").propose_batch(ctx, 50)) < 50


@pytest.mark.parametrize("spec", ["", "0,0", "a,1", " , "])
def test_gpus_must_be_distinct_indices(spec):
    with pytest.raises(RatchetError, match="--gpus"):
        parse_gpus(spec)
    assert parse_gpus(" 1, 0") == ["1", "0"]


def _usage_error(args: list[str]) -> str:
    """The message of the exit-2 error ``ratchet ARGS`` stops with (before any profile)."""
    r = CliRunner().invoke(app, args)
    assert isinstance(r.exception, RatchetError) and r.exception.exit_code == 2, r.output
    return str(r.exception)


def test_gpus_without_dask_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    monkeypatch.chdir(tmp_path)  # no ratchet.yaml: the options are judged first
    for cmd in (["run", "--op", "x"], ["resume"]):
        msg = _usage_error([*cmd, "--gpus", "0,1"])
        assert "pip install 'kernel-ratchet[fleet]'" in msg


def test_two_kinds_of_workers_at_once_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    msg = _usage_error(["run", "--op", "x", "--gpus", "0", "--workers", "2"])
    assert "one of --gpus, --workers" in msg
    assert "--gpus" in _usage_error(["run", "--op", "x", "--gpus", "0,0"])
