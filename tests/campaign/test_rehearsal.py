"""A rehearsal round (Triton interpreter) is labelled REHEARSAL everywhere and never committed:
whatever its timings say, the candidate is rolled back and no gain is counted."""

from __future__ import annotations

import json
import os

import pytest

from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.record import WOULD_ACCEPT, RoundDraft, RoundRecord
from kernel_ratchet.campaign.state import State
from kernel_ratchet.campaign.status import campaign_status
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.scoring.decision import Status
from tests.decisions import measured_record

from .conftest import KERNEL, campaign_dir, git, set_blocks


@pytest.fixture
def rehearsing(project, monkeypatch):
    """The baselined project, its rounds' measurement replaced by a decision that accepts."""
    paths = [str(project), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.chdir(project)
    accepted = measured_record(2, Status.ACCEPTED, 0.2795, Category.OK)
    monkeypatch.setattr(engine, "measure", lambda c, n, p: accepted)
    return project


def _open(project) -> Campaign:
    return Campaign(load_profile(project), campaign_dir(project))


@pytest.mark.parametrize("how", ["validate --rehearse", "rehearsal campaign"])
def test_a_rehearsal_round_that_would_accept_is_rolled_back_and_labelled(rehearsing, how):
    project = rehearsing
    if how == "rehearsal campaign":  # what `ratchet run/init --rehearse` persist
        st = State.load(campaign_dir(project))
        st.rehearsal = True
        st.save(campaign_dir(project))
    head = git(project, "rev-parse", "HEAD")
    set_blocks(project, M=32, N=32)
    with _open(project) as c:
        rec = c.validate("warps 8", rehearse=how == "validate --rehearse")
        status = campaign_status(c.ctx)
        incumbent = c.state.incumbent_round
        stalled = c.state.consecutive_rollbacks
    assert (rec.status, rec.category, rec.label) == (
        Status.ROLLED_BACK,
        Category.REHEARSAL,
        WOULD_ACCEPT,
    )
    assert rec.reason.startswith("REHEARSAL: would accept (+27.95%)")
    assert rec.decision.rehearsed is Status.ACCEPTED and not rec.verified_ineffective
    assert git(project, "rev-parse", "HEAD") == head, "a rehearsal round was committed"
    assert "BLOCK_M = 16" in (project / KERNEL).read_text()
    assert incumbent == 1
    assert stalled == 0  # rolled back as a rehearsal, not a direction that failed
    assert status["rounds"][-1]["rehearsal"] == WOULD_ACCEPT
    cdir = campaign_dir(project)
    assert f"## Round 2 — {WOULD_ACCEPT}" in (cdir / "logs/optimize.md").read_text()
    summary = (cdir / "rounds/round-2/summary.md").read_text()
    assert "ROLLED BACK: REHEARSAL: would accept" in summary and "Rollback Analysis" in summary
    assert RoundRecord.from_dict(rec.to_dict()) == rec


def test_a_plain_campaign_still_commits_what_it_accepts(rehearsing):
    """The control: the same measured accept outside a rehearsal is committed."""
    head = git(rehearsing, "rev-parse", "HEAD")
    set_blocks(rehearsing, M=32, N=32)
    with _open(rehearsing) as c:
        rec = c.validate("warps 8")
    assert rec.accepted and rec.label == "ACCEPTED" and not rec.rehearsal
    assert git(rehearsing, "rev-parse", "HEAD") != head


def test_a_rehearsal_keeps_verdicts_that_do_not_stand_on_timings():
    noise = measured_record(3, Status.ROLLED_BACK, 0.01, Category.NOISE).as_rehearsal()
    assert noise.category is Category.REHEARSAL and noise.label == "REHEARSAL: would roll back"
    draft = RoundDraft(4, "h", "K1", "c", "quick", "t0", "pytest", 1)
    failed = draft.failed(Category.TEST, "focused test failed", "t1").as_rehearsal()
    assert failed.category is Category.TEST and failed.label == "REHEARSAL: ROLLED BACK"
    assert failed.reason == "REHEARSAL: focused test failed" and failed.verified_ineffective


def test_the_rehearsal_flag_survives_the_state_file(tmp_path):
    State(rehearsal=True).save(tmp_path)
    assert State.load(tmp_path).rehearsal
    State().save(tmp_path)
    assert not State.load(tmp_path).rehearsal


def test_an_interrupted_rehearsal_round_is_closed_as_a_rehearsal(rehearsing, monkeypatch):
    """Ctrl+C inside ``validate --rehearse`` of a normal campaign: the round closes ROLLED BACK
    as interrupted, and its record still says REHEARSAL (the flag lives in the pending round,
    so a recovery in a later command labels it too)."""

    def interrupted(c, n, p):
        assert State.load(campaign_dir(rehearsing)).pending.rehearsal  # written before measuring
        raise KeyboardInterrupt("Ctrl+C")

    monkeypatch.setattr(engine, "measure", interrupted)
    set_blocks(rehearsing, M=32, N=32)
    with _open(rehearsing) as c, pytest.raises(KeyboardInterrupt):
        c.validate("warps 8", rehearse=True)
    with _open(rehearsing) as c:
        status = campaign_status(c.ctx)
    last = status["rounds"][-1]
    assert last["rehearsal"] == "REHEARSAL: ROLLED BACK", last
    path = campaign_dir(rehearsing) / "rounds/round-2/round.json"
    rec = RoundRecord.from_dict(json.loads(path.read_text()))
    assert rec.category is Category.INTERRUPTED and rec.reason.startswith("REHEARSAL: interrupted")
