"""Processes that escape a worker (:mod:`kernel_ratchet.harness.strays`): found while the A/B
runs, killed, and the A/B's measurement refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernel_ratchet.harness import strays
from tests.harness.fake_ab import FakeMachine, FakeSpec, FakeWorker, ab

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="child subreapers and /proc are Linux's"
)

#: A shell that starts a sleeper in a session of its own and exits (once the sleeper runs its
#: program): the sleeper is orphaned.
ESCAPE = ["sh", "-c", "setsid sleep 97 >/dev/null 2>&1 </dev/null & sleep 0.2"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _escape_and_check(w: strays.Watch) -> str:
    subprocess.run(ESCAPE, check=True)
    deadline = time.monotonic() + 5
    found = w.check()
    while not found and time.monotonic() < deadline:
        time.sleep(0.01)
        found = w.check()
    return found


def test_a_process_that_left_its_parent_is_found_and_killed():
    with strays.Watch() as w:
        assert w.check() == ""
        found = _escape_and_check(w)
    assert found.startswith(strays.ESCAPED) and "sleep 97" in found
    pid = int(found.split("pid ")[1].split()[0])
    assert not _alive(pid)
    assert w.found == [found[len(strays.ESCAPED) :]]


def test_children_started_on_purpose_or_there_before_and_waited_ones_are_not_escapes():
    before = subprocess.Popen(["sleep", "30"])
    try:
        with strays.Watch() as w:
            mine = subprocess.Popen(["sleep", "30"])
            strays.own(mine.pid)
            subprocess.run(["true"], check=True)
            assert w.check() == ""
            mine.kill()
            mine.wait()
    finally:
        before.kill()
        before.wait()


def test_the_subreaper_is_given_back_when_the_watch_closes():
    assert not strays._is_subreaper()
    with strays.Watch():
        assert strays._is_subreaper()
    assert not strays._is_subreaper()


class EscapingWorker(FakeWorker):
    """A fake candidate whose code starts an escaped process on its third timing request."""

    def time(self, shape, seed, phase, **kw):
        if self.spec.name == "cand" and self.n_time == 2:
            subprocess.run(ESCAPE, check=True)
        return super().time(shape, seed, phase, **kw)


def test_an_ab_beside_an_escaped_process_is_refused_as_a_cheat(tmp_path):
    machine = FakeMachine()
    machine.factory = lambda spec, log: EscapingWorker(machine, spec, log)
    run = ab(tmp_path, FakeSpec("cand", speed=1.3), machine=machine)
    assert not run.ok and run.decision is None
    f = run.failure
    assert (f.side, f.stage, f.category) == ("candidate", "time", "cheat")
    assert f.detail.startswith(strays.ESCAPED) and "sleep 97" in f.detail
