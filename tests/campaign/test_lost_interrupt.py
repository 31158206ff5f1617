"""A Ctrl+C is never lost: when its KeyboardInterrupt was dropped in flight (Python drops one
raised in a fork's at-fork hooks), the round still closes as interrupted, with no decision."""

from __future__ import annotations

import json
import os

import pytest

from kernel_ratchet import errors
from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.errors import Terminated
from kernel_ratchet.scoring.decision import Status
from tests.decisions import measured_record

from .conftest import KERNEL, campaign_dir, git, set_blocks
from .test_rehearsal import _open


@pytest.fixture
def baselined(project, monkeypatch):
    """The baselined project, as the CLI would run in it."""
    paths = [str(project), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.chdir(project)
    return project


@pytest.mark.parametrize(
    ("flag", "raised", "named"),
    [
        ("INTERRUPT_REQUESTED", KeyboardInterrupt, "Ctrl+C"),
        ("TERMINATION_REQUESTED", Terminated, "SIGTERM"),
    ],
)
def test_a_lost_interruption_during_the_measurement_leaves_no_decision(
    baselined, monkeypatch, flag, raised, named
):
    """A Ctrl+C or SIGTERM whose raise was lost while the round measured (the CLI's handler set
    the flag): the measured accept is not committed, the round closes as interrupted and says
    which signal closed it."""
    event = getattr(errors, flag)
    accepted = measured_record(2, Status.ACCEPTED, 0.2795, Category.OK)

    def measured_then_interrupted(c, n, p):
        event.set()
        return accepted

    monkeypatch.setattr(engine, "measure", measured_then_interrupted)
    head = git(baselined, "rev-parse", "HEAD")
    set_blocks(baselined, M=32, N=32)
    try:
        with _open(baselined) as c, pytest.raises(raised):
            c.validate("warps 8")
    finally:
        event.clear()
    with _open(baselined) as c:
        last = c.state.closed[-1]
    assert last.category == "interrupted" and git(baselined, "rev-parse", "HEAD") == head
    record = json.loads((campaign_dir(baselined) / "rounds/round-2/round.json").read_text())
    assert named in record["reason"]
    assert "BLOCK_M = 16" in (baselined / KERNEL).read_text()
