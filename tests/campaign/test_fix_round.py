"""``ratchet validate --fix``: the round's paired A/B is judged as a correctness fix."""

from __future__ import annotations

import os

import pytest

from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.state import PendingRound, Stage
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.scoring.paired_fix import FIX
from tests.campaign.conftest import campaign_dir, set_blocks


def test_the_fix_flag_survives_the_state_file():
    p = PendingRound(3, Stage.MEASURING, "t0", "h", "K1", "quick", fix=True)
    assert PendingRound.from_dict(p.to_dict()).fix
    assert not PendingRound.from_dict(p.at(Stage.MEASURING, fix=False).to_dict()).fix


@pytest.mark.slow
def test_a_fix_round_runs_its_a_b_under_the_fix_rule(accepted_project, monkeypatch):
    from kernel_ratchet.campaign.rounds import paired as rounds_paired

    rules = []
    real = rounds_paired.run_paired

    def spy(*args, **kwargs):
        rules.append(kwargs["rule"])
        return real(*args, **kwargs)

    monkeypatch.setattr(rounds_paired, "run_paired", spy)
    root = accepted_project
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(root)
    set_blocks(root, M=64, N=64)
    c = Campaign(load_profile(root), campaign_dir(root))
    rec = c.validate("64x64 tiles fix a wrong result", fix=True)
    assert rules and all(r.fix for r in rules)
    d = rec.decision
    assert d is not None and d.paired
    # accepted exactly when the fix rule found it not slower; never for a claimed gain
    assert rec.accepted == rec.reason.startswith(FIX)
    assert "aggregate's CI excludes no gain" not in rec.reason
