"""``ratchet validate --fix``: the round's paired A/B is judged as a correctness fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.rounds import paired as rounds_paired
from kernel_ratchet.campaign.state import PendingRound, Stage
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import campaign_dir, set_blocks


class Stop(Exception):
    """Ends the round where the test has seen what it needs."""


def test_the_fix_flag_survives_the_state_file():
    p = PendingRound(3, Stage.MEASURING, "t0", "h", "K1", "quick", fix=True)
    assert PendingRound.from_dict(p.to_dict()).fix
    assert not PendingRound.from_dict(p.at(Stage.MEASURING, fix=False).to_dict()).fix


@pytest.fixture
def opened(project, monkeypatch) -> Campaign:
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(project), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.chdir(project)
    return Campaign(load_profile(project), campaign_dir(project))


@pytest.mark.parametrize("fix", [True, False])
def test_validate_hands_the_flag_to_the_round(opened, monkeypatch, fix):
    seen = []

    def measure(ctx, n, pending):
        seen.append(pending.fix)
        raise Stop

    monkeypatch.setattr(engine, "measure", measure)
    set_blocks(Path.cwd(), M=32, N=32)  # a change to measure
    with pytest.raises(Stop):
        opened.validate("guard the race", fix=fix)
    assert seen == [fix]


@pytest.mark.parametrize("fix", [True, False])
def test_the_round_a_b_runs_under_the_fix_rule_of_its_pending_round(opened, monkeypatch, fix):
    rules = []

    def run_paired(*args, **kwargs):
        rules.append(kwargs["rule"])
        raise Stop

    monkeypatch.setattr(rounds_paired, "run_paired", run_paired)
    ctx = opened.ctx
    ctx.state.pending = PendingRound(2, Stage.MEASURING, "t0", "h", "K1", "quick", fix=fix)
    labels = [s["label"] for s in ctx.m.target_shapes][:1]
    with pytest.raises(Stop):
        rounds_paired.run_ab(ctx, labels, opened.round_dir(2) / "paired")
    with pytest.raises(Stop):  # calibration's A/A trials never judge a fix
        rounds_paired.run_ab(ctx, labels, opened.round_dir(2) / "aa", a_a=True)
    assert [r.fix for r in rules] == [fix, False]
