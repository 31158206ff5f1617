"""`ratchet run` after a second Ctrl+C: the round the engine closed reaches the driver."""

from __future__ import annotations

import math
import threading

import pytest

from kernel_ratchet.campaign import steps
from kernel_ratchet.optimizers import loop
from kernel_ratchet.optimizers.base import Proposal
from tests.campaign.conftest import KERNEL, set_blocks


def test_a_second_ctrl_c_in_ratchet_run_shows_the_closed_round(
    accepted_project, open_accepted, monkeypatch
):
    """`ratchet run`'s table gets the round a second Ctrl+C closed, as written on disk."""

    def interrupted(step, timeout_s):
        raise KeyboardInterrupt

    monkeypatch.setattr(steps.RunningStep, "wait", interrupted)
    set_blocks(accepted_project, M=64, N=64)
    shown: list = []
    run = loop.LoopSettings(None, 20, math.inf, None, threading.Event(), print, shown.append, "T4")
    p = Proposal("64x64 tiles", "K1", "faster", "64x64 output tiles", "E:64", files={})
    with open_accepted() as c, pytest.raises(KeyboardInterrupt):
        loop._validate(c, run, c.state.next_round, p)
    assert [(r.round, r.category) for r in shown] == [(3, "interrupted")]
    assert "BLOCK_M = 32" in (accepted_project / KERNEL).read_text()
