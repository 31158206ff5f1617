"""A fix round against an incumbent that passes no shape starts the candidate's worker alone
and checks every target shape in it, as an A/B's checks would (no processes: fake workers)."""

from __future__ import annotations

import pytest

from kernel_ratchet.campaign.rounds import workers
from tests.campaign.test_round_workers import FakeWorker, _spec


@pytest.fixture
def fake_workers(monkeypatch):
    """The fake worker class in place of :class:`~kernel_ratchet.harness.worker.Worker`; the
    list of those made."""
    FakeWorker.made, FakeWorker.starts_ok = [], True
    monkeypatch.setattr(workers, "Worker", FakeWorker)
    return FakeWorker.made


def _checking(results: dict[str, tuple[bool, str]]):
    """A FakeWorker ``check``: the (ok, category) of ``results`` by shape label, recorded."""
    from types import SimpleNamespace

    def check(self, shape, seed):
        ok, cat = results[shape.label]
        self.checked = [*getattr(self, "checked", []), shape.label]
        return SimpleNamespace(ok=ok, category=cat, detail=f"{cat} on {shape.label}")

    return check


@pytest.mark.parametrize("early", [None, "0"])
def test_a_fix_alone_is_checked_in_the_candidates_worker_only(
    tmp_path, monkeypatch, fake_workers, early
):
    """No incumbent tree, no incumbent worker: the candidate's checks, made beside the focused
    test (or, with RATCHET_EARLY_CHECKS=0, when asked), stop at the first failing shape and
    name it with the worker's category; a worker that failed to start is replaced first."""
    monkeypatch.setattr(workers, "_specs", lambda _c: pytest.fail("no incumbent tree"))
    monkeypatch.setattr(workers, "candidate_spec", lambda _c: _spec("cand"))
    results = {"a": (True, "ok"), "b": (False, "cheat"), "c": (True, "ok")}
    monkeypatch.setattr(FakeWorker, "check", _checking(results), raising=False)
    if early is None:
        monkeypatch.delenv(workers.EARLY_ENV, raising=False)
    else:
        monkeypatch.setenv(workers.EARLY_ENV, early)
    shapes = [{"label": x, "M": 2, "N": 3} for x in "abc"]
    with workers.RoundWorkers(None, tmp_path) as rw:
        rw.start(candidate_only=True)
        rw.check_early(shapes)
        f = rw.candidate_failure(shapes)
        (w,) = fake_workers
        assert w.checked == ["a", "b"]  # once each, stopped at the failure
        assert (f.side, f.stage, f.label, f.category) == ("candidate", "check", "b", "cheat")
        assert f.log_path == str(rw.log_path("candidate"))
    FakeWorker.made.clear()
    FakeWorker.starts_ok = False  # the round's worker died starting: a fresh one checks
    with workers.RoundWorkers(None, tmp_path) as rw:
        rw.start(candidate_only=True)
        ok = [{"label": x, "M": 2, "N": 3} for x in "ac"]
        assert rw.candidate_failure(ok) is None
        dead, fresh = fake_workers
        assert dead.dead and not hasattr(dead, "checked") and fresh.checked == ["a", "c"]
