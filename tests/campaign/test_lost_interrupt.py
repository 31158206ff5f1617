"""A Ctrl+C is never lost: when its KeyboardInterrupt was dropped in flight (Python drops one
raised in a fork's at-fork hooks), the round still closes as interrupted, with no decision."""

from __future__ import annotations

import os

import pytest

from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.scoring.decision import Status

from .conftest import KERNEL, git, set_blocks
from .test_rehearsal import _measured, _open


@pytest.fixture
def baselined(project, monkeypatch):
    """The baselined project, as the CLI would run in it."""
    paths = [str(project), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.chdir(project)
    return project


def test_a_lost_ctrl_c_during_the_measurement_leaves_no_decision(baselined, monkeypatch):
    """A Ctrl+C whose KeyboardInterrupt was lost while the round measured (the CLI's handler
    set INTERRUPT_REQUESTED): the measured accept is not committed, the round closes as
    interrupted."""
    from kernel_ratchet.errors import INTERRUPT_REQUESTED

    accepted = _measured(2, Status.ACCEPTED, 0.2795, Category.OK)

    def measured_then_interrupted(c, n, p):
        INTERRUPT_REQUESTED.set()
        return accepted

    monkeypatch.setattr(engine, "measure", measured_then_interrupted)
    head = git(baselined, "rev-parse", "HEAD")
    set_blocks(baselined, M=32, N=32)
    try:
        with _open(baselined) as c, pytest.raises(KeyboardInterrupt):
            c.validate("warps 8")
    finally:
        INTERRUPT_REQUESTED.clear()
    with _open(baselined) as c:
        last = c.state.closed[-1]
    assert last.category == "interrupted" and git(baselined, "rev-parse", "HEAD") == head
    assert "BLOCK_M = 16" in (baselined / KERNEL).read_text()
