"""A round's workers start beside the focused test and serve the A/B and the transfer check:
what the concurrency must not change (a failing test still rolls the round back, Ctrl+C still
closes it, the harness never times beside a starting worker) and when a worker is not reused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.rounds import level_harness, measure, workers
from kernel_ratchet.campaign.steps import StepResult
from kernel_ratchet.harness.worker import WorkerSpec
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import KERNEL, campaign_dir, set_blocks


class FakeWorker:
    """Stands in for a worker process: records how it was started, waited for and closed."""

    made: list[FakeWorker] = []
    starts_ok = True

    def __init__(self, spec: WorkerSpec, log_path: Path) -> None:
        self.spec, self.log_path = spec, Path(log_path)
        self.ready = self.dead = self.released = False
        self.closed_with: float | None = None
        FakeWorker.made.append(self)

    @property
    def alive(self) -> bool:
        return self.closed_with is None and not self.dead

    def wait_ready(self, deadline: float) -> bool:
        self.ready, self.dead = FakeWorker.starts_ok, not FakeWorker.starts_ok
        return self.ready

    def close(self, grace_s: float = 5.0) -> None:
        self.closed_with = grace_s

    def release(self) -> None:
        self.released = True


@pytest.fixture
def fake_workers(monkeypatch):
    FakeWorker.made, FakeWorker.starts_ok = [], True
    monkeypatch.setattr(workers, "Worker", FakeWorker)
    return FakeWorker.made


def _spec(root: str) -> WorkerSpec:
    return WorkerSpec(root, "m:A", "perf_counter", {}, "cpu", True)


# -- lending ------------------------------------------------------------------------------------


def test_the_round_lends_its_own_healthy_workers_and_nothing_else(
    tmp_path, monkeypatch, fake_workers
):
    specs = (_spec("inc"), _spec("cand"))
    monkeypatch.setattr(workers, "_specs", lambda _c: specs)
    rw = workers.RoundWorkers(None, tmp_path)
    rw.start()
    inc, cand = fake_workers
    lend = rw.lend()  # the A/B opens the incumbent's first, then the candidate's
    assert lend(specs[0], rw.log_path("incumbent")).__enter__() is inc
    assert lend(specs[1], rw.log_path("candidate")).__enter__() is cand
    cand.dead = True  # the candidate's worker failed during the A/B
    assert rw.live() == {"incumbent": inc}
    again = rw.lend()
    assert again(specs[0], rw.log_path("incumbent")).__enter__() is inc
    fresh = again(specs[1], rw.log_path("candidate"))
    assert isinstance(fresh, FakeWorker) and fresh is not cand
    # another log (the escalated full level's A/B) or another spec: fresh processes
    other = rw.lend()
    assert other(specs[0], tmp_path / "full/paired/incumbent_worker.log") not in (inc, cand)
    assert other(_spec("elsewhere"), rw.log_path("candidate")) not in (inc, cand)
    rw.close()
    assert inc.closed_with == 5.0


def test_both_workers_are_closed_at_once(tmp_path, monkeypatch, fake_workers):
    import threading

    both = threading.Barrier(2, timeout=5.0)  # a close waits until the other one has begun
    met: list[bool] = []

    def close(self, grace_s: float = 5.0) -> None:
        try:
            both.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            met.append(False)
        self.closed_with = grace_s

    monkeypatch.setattr(FakeWorker, "close", close)
    monkeypatch.setattr(workers, "_specs", lambda _c: (_spec("inc"), _spec("cand")))
    rw = workers.RoundWorkers(None, tmp_path)
    rw.start()
    rw.close(3.0)
    assert met == [True, True] and [w.closed_with for w in fake_workers] == [3.0, 3.0]
    assert rw.live() == {}


def test_a_worker_that_fails_to_start_is_replaced_by_a_fresh_one(
    tmp_path, monkeypatch, fake_workers
):
    specs = (_spec("inc"), _spec("cand"))
    monkeypatch.setattr(workers, "_specs", lambda _c: specs)
    FakeWorker.starts_ok = False
    with workers.RoundWorkers(None, tmp_path) as rw:
        rw.start()
        rw.settle()
        assert rw.live() == {}
        lent = rw.lend()(specs[0], rw.log_path("incumbent"))
        assert lent is fake_workers[-1] and len(fake_workers) == 3  # a fresh start, recorded
    assert all(w.closed_with is not None for w in fake_workers[:2])


# -- the round around them ----------------------------------------------------------------------


@pytest.fixture
def campaign(project, monkeypatch, fake_workers):
    paths = [str(project), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.chdir(project)
    set_blocks(project, M=32, N=32)
    return lambda: Campaign(load_profile(project), campaign_dir(project))


def _last_round(project: Path) -> dict:
    return json.loads((campaign_dir(project) / "rounds/round-2/round.json").read_text())


def _step(name: str, ok: bool) -> StepResult:
    return StepResult(name, "cmd", ok, 0 if ok else 1, 0.1, "log", "ok" if ok else "it failed")


class _Started:
    """The round's focused test, started (``start_step``); ``outcome`` runs when it is waited
    for, as the real test's end is."""

    def __init__(self, outcome, name, command, kw):
        self.outcome, self.args, self.stopped = outcome, (name, command, kw), False

    def wait(self, timeout_s):
        name, command, kw = self.args
        return self.outcome(name, command, **kw)

    def stop(self):
        self.stopped = True


def _fake_test(monkeypatch, outcome, started=None):
    """The focused test's runs replaced by ``outcome`` (``started`` collects each start)."""

    def start(name, command, **kw):
        run = _Started(outcome, name, command, kw)
        (started if started is not None else []).append(run)
        return run

    monkeypatch.setattr(measure, "start_step", start)
    monkeypatch.setattr(measure, "run_step", outcome)  # a re-run alone, after an OOM


def test_a_failing_focused_test_rolls_back_and_nothing_is_measured(
    project, campaign, monkeypatch, fake_workers
):
    seen = []

    def focused_test(name, command, **kw):
        seen.append([w.alive for w in fake_workers])  # started before the test, beside it
        harness = campaign_dir(project) / "rounds/round-2/artifacts/benchmark.log.pgid"
        seen.append(harness.exists())  # so is the round's harness, held at its start gate
        return _step(name, ok=False)

    def harness(*_a, **_kw):
        raise AssertionError("the harness ran after a failed focused test")

    _fake_test(monkeypatch, focused_test)
    monkeypatch.setattr(level_harness, "_run_harness", harness)
    with campaign() as c:
        rec = c.validate("32x32 tiles")
    assert seen == [[True, True], True]
    assert rec.status == "ROLLED BACK" and rec.category.value == "test", rec.reason
    assert [w.closed_with for w in fake_workers] == [5.0, 5.0]
    assert not (campaign_dir(project) / "rounds/round-2/artifacts/benchmark.csv").exists()
    assert "BLOCK_M = 16" in (project / KERNEL).read_text()


def test_the_focused_test_starts_before_the_workers_and_stops_if_they_cannot(
    project, campaign, monkeypatch, fake_workers
):
    """The workers' start imports torch in the driver: the test is already running beside it.
    A start that raises stops the test it would have run beside."""
    workers_then, runs = [], []
    _fake_test(monkeypatch, lambda name, cmd, **kw: _step(name, ok=False), runs)
    fake_start = measure.start_step

    def start(*a, **kw):
        workers_then.append(len(fake_workers))
        return fake_start(*a, **kw)

    monkeypatch.setattr(measure, "start_step", start)
    with campaign() as c:
        c.validate("32x32 tiles")
    assert workers_then == [0] and len(fake_workers) == 2 and not runs[0].stopped

    def no_specs(_c):
        raise RuntimeError("torch is broken")

    monkeypatch.setattr(workers, "_specs", no_specs)
    set_blocks(project, M=32, N=32)  # the rolled-back change again
    with campaign() as c, pytest.raises(RuntimeError, match="torch is broken"):
        c.validate("32x32 tiles, again")
    assert runs[1].stopped


def test_ctrl_c_beside_the_starting_workers_closes_the_round_and_kills_them(
    project, campaign, monkeypatch, fake_workers
):
    def interrupted(name, command, **kw):
        raise KeyboardInterrupt

    _fake_test(monkeypatch, interrupted)
    with campaign() as c, pytest.raises(KeyboardInterrupt):
        c.validate("32x32 tiles")
    assert [w.closed_with for w in fake_workers] == [0.0, 0.0]  # not waited for
    with campaign() as c:
        assert c.state.pending is None and c.state.closed[-1].category == "interrupted"
    assert "Ctrl+C" in _last_round(project)["reason"]
    assert "BLOCK_M = 16" in (project / KERNEL).read_text()


def test_the_harness_waits_until_the_workers_are_idle_and_light(
    project, campaign, monkeypatch, fake_workers
):
    when_timed = []

    def harness(c, art, level, name, early=None):
        when_timed.append([(w.ready, w.released) for w in fake_workers])
        return _step("harness", ok=False), art / name

    _fake_test(monkeypatch, lambda name, cmd, **kw: _step(name, ok=True))
    monkeypatch.setattr(level_harness, "_run_harness", harness)
    with campaign() as c:
        rec = c.validate("32x32 tiles")
    assert when_timed == [[(True, True), (True, True)]]  # idle, their cached memory given back
    assert rec.category.value == "harness" and all(w.closed_with for w in fake_workers)


@pytest.mark.parametrize("early", [None, "0"])
def test_early_checks_can_be_left_to_the_a_b(tmp_path, monkeypatch, fake_workers, early):
    """By default the workers check the round's shapes beside the focused test; with
    RATCHET_EARLY_CHECKS=0 (a GPU too small for the test and both checks at once) nothing is
    checked early and the A/B gets no early results."""
    specs = (_spec("inc"), _spec("cand"))
    monkeypatch.setattr(workers, "_specs", lambda _c: specs)
    if early is None:
        monkeypatch.delenv(workers.EARLY_ENV, raising=False)
    else:
        monkeypatch.setenv(workers.EARLY_ENV, early)
    checked = []
    monkeypatch.setattr(
        workers, "precheck", lambda w, shapes, secret: checked.append(shapes) or {("x", "a"): 1}
    )
    with workers.RoundWorkers(None, tmp_path) as rw:
        rw.start()
        rw.check_early([{"label": "a", "M": 2, "N": 3}])
        rw.settle()
        if early is None:
            assert [[s.label for s in shapes] for shapes in checked] == [["a"]]
            assert rw.prechecked() == {("x", "a"): 1}
        else:
            assert checked == [] and rw.prechecked() == {}


def test_a_sigterm_while_the_checks_start_closes_the_round_with_it(
    tmp_path, monkeypatch, fake_workers
):
    """A SIGTERM that lands inside the early checks' ``Thread.start``: closing the round's
    workers must not try to join a thread that never started (its RuntimeError replaced the
    Terminated, and the CLI did not close the round and exit 143)."""
    import threading

    from kernel_ratchet.errors import Terminated

    monkeypatch.setattr(workers, "_specs", lambda _c: (_spec("inc"), _spec("cand")))
    monkeypatch.delenv(workers.EARLY_ENV, raising=False)
    monkeypatch.setattr(workers, "precheck", lambda w, shapes, secret: {})
    start = threading.Thread.start

    def killed_while_starting(self):
        if self.name == "kr-early-checks":
            raise Terminated("SIGTERM")
        return start(self)

    monkeypatch.setattr(threading.Thread, "start", killed_while_starting)
    with pytest.raises(Terminated), workers.RoundWorkers(None, tmp_path) as rw:
        rw.start()
        rw.check_early([{"label": "a", "M": 2, "N": 3}])
    assert fake_workers and all(w.closed_with == 0.0 for w in fake_workers)


def _build_and_test_with(tmp_path, script: str, checked_early: bool):
    """``_build_and_test`` of a round whose focused test is ``script`` (a Python program given
    the marker path), with stand-ins for the workers and the early harness."""
    import shlex
    import sys
    from types import SimpleNamespace

    from kernel_ratchet.campaign.record import RoundDraft
    from kernel_ratchet.campaign.rounds.measure import _build_and_test

    marker = tmp_path / "ran-once"
    test = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)} {shlex.quote(str(marker))}"
    said: list[str] = []
    closed: list[bool] = []
    m = SimpleNamespace(rebuild_command=None, test_command=test, level_shape_dicts=lambda _: [])
    c = SimpleNamespace(
        m=m,
        root=tmp_path,
        say=said.append,
        incumbent_fails=lambda rel=None: set(),
        incumbent_passes_none=lambda: False,
    )
    workers = SimpleNamespace(
        start=lambda: None,
        check_early=lambda _: None,
        checked_early=checked_early,
        close=lambda: closed.append(True),
    )
    early = SimpleNamespace(start=lambda: None)
    art = tmp_path / "artifacts"
    art.mkdir()
    draft = RoundDraft(2, "h", "K1", "c", "quick", "t0", test, 1)
    failed = _build_and_test(c, 2, draft, art, workers, early)  # type: ignore[arg-type]
    return failed, said, closed, art


OOM_ONCE = (
    "import pathlib, sys; m = pathlib.Path(sys.argv[1]); first = not m.exists(); m.touch(); "
    "print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.00 GiB' "
    "if first else 'passed'); sys.exit(1 if first else 0)"
)


def test_a_test_out_of_device_memory_beside_the_checks_runs_again_alone(tmp_path):
    """On the H200 a grouped GEMM round's focused test ran out of memory while both workers
    held the largest MoE shapes they were checking beside it: the round blamed the candidate.
    The workers are now closed (their memory freed) and the test runs again alone."""
    failed, said, closed, art = _build_and_test_with(tmp_path, OOM_ONCE, checked_early=True)
    assert failed is None and closed == [True]
    assert any("ran out of device memory beside the workers' checks" in s for s in said)
    assert "CUDA out of memory" in (art / "test-beside-checks.log").read_text()
    assert "passed" in (art / "test.log").read_text()


def test_an_out_of_memory_test_without_checks_beside_it_fails_the_round(tmp_path):
    failed, said, closed, _ = _build_and_test_with(tmp_path, OOM_ONCE, checked_early=False)
    assert failed is not None and failed.category.value == "test" and not closed
    fails = "import sys; print('AssertionError: wrong'); sys.exit(1)"
    (tmp_path / "b").mkdir()
    failed, _, closed, _ = _build_and_test_with(tmp_path / "b", fails, checked_early=True)
    assert failed is not None and failed.category.value == "test" and not closed
