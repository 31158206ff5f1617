"""Paired interleaved A/B: a side that crashes, cheats or fails its check, and which side the
failure is laid on. Driven by the fake workers of :mod:`tests.harness.fake_ab`."""

from __future__ import annotations

import json
from typing import Any

from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.scoring.paired_looks import PairedLooks
from tests.harness.fake_ab import SHAPES, FakeMachine, FakeResult, FakeSpec, FakeWorker, ab


def test_crash_mid_run_is_a_recorded_failure_of_that_side(tmp_path):
    run = ab(tmp_path, FakeSpec("cand", crash_at_call=23))
    assert not run.ok and run.decision is None
    f = run.failure
    assert (f.side, f.stage, f.category, f.phase) == ("candidate", "time", "crash", "fwd")
    assert f.round == 4 and f.log_path == str(tmp_path / "candidate_worker.log")
    assert "illegal memory access" in f.sentence() and "round 4" in f.sentence()
    assert "the incumbent's same request passed" in f.detail
    assert run.rounds == 4 and len(run.times["candidate"]["s256"]["fwd"]) == 4
    json.dumps(run.to_dict())


def test_a_timing_crash_on_both_sides_is_not_blamed_on_the_candidate(tmp_path):
    """A request that crashes the candidate is made again on the incumbent (same shape, seed
    and phase); crashing there too, the failure is both sides' (the round's category is then
    the infrastructure's, not the candidate's), whichever side was timed first."""
    where = ("s1024", "bwd")
    machine = FakeMachine()
    run = ab(
        tmp_path,
        FakeSpec("cand", crashes_on=where),
        inc=FakeSpec("inc", crashes_on=where),
        machine=machine,
        phases=("fwd", "bwd"),
    )
    f = run.failure
    assert (f.side, f.stage, f.category, f.label, f.phase) == ("both", "time", "crash", *where)
    assert "both sides failed the same timing request" in f.detail and "not the candidate" in (
        f.sentence()
    )
    assert str(tmp_path / "candidate_worker.log") in f.log_path
    json.dumps(run.to_dict())


def test_a_cheat_is_never_excused_by_asking_the_incumbent(tmp_path):
    class Cheats(FakeWorker):
        def time(self, shape: Shape, seed: int, phase: str, **kw: Any) -> FakeResult:
            if self.spec.name == "cand":
                return self._fail("cheat", "spot check of timed sample 1 failed")
            return super().time(shape, seed, phase, **kw)

    machine = FakeMachine()
    run = run_paired(
        FakeSpec("inc"),
        FakeSpec("cand"),
        SHAPES,
        phases=("fwd",),
        seed=1234,
        log_dir=tmp_path,
        worker_factory=lambda spec, log: Cheats(machine, spec, log),
        rule=PairedLooks(),
        rng_seed=1,
    )
    assert (run.failure.side, run.failure.category) == ("candidate", "cheat")
    assert "incumbent" not in run.failure.detail


def test_failing_check_ends_the_run_before_any_timing(tmp_path):
    machine = FakeMachine()
    run = ab(tmp_path, FakeSpec("cand", failing_check="s1024"), machine=machine)
    assert run.failure.stage == "check" and run.failure.category == "wrong"
    assert run.failure.label == "s1024" and machine.calls == [] and run.rounds == 0


def test_a_request_that_ran_out_of_memory_is_made_again_with_room(tmp_path):
    """Out of memory beside the other side's cached memory: the other side releases it, the
    failed side's worker starts again and the same request is made once more; the run then
    decides as if nothing happened, and says so."""
    machine, said = FakeMachine(), []
    run = ab(tmp_path, FakeSpec("cand", ooms=1), machine=machine, progress=said.append)
    assert run.ok and run.decision is not None and run.failure is None
    assert machine.started == ["inc", "cand", "cand"] and machine.released == ["inc"]
    note = next(m for m in said if "ran out of device memory" in m)
    assert "candidate's worker restarted (incumbent released" in note and "it passed" in note
    rows = (tmp_path / "timings.jsonl").read_text().splitlines()
    assert len(rows) == 1 + sum(
        len(run.times[s][k]["fwd"]) for s in run.times for k in run.times[s]
    )


def test_memory_that_stays_short_is_still_a_recorded_failure(tmp_path):
    """A retry that runs out again stands: the failure is judged as any (here the incumbent's
    same request passes, so it is the candidate's), and no third worker is started."""
    machine = FakeMachine()
    run = ab(tmp_path, FakeSpec("cand", ooms=2), machine=machine)
    f = run.failure
    assert (f.side, f.stage, f.category) == ("candidate", "time", "oom")
    assert machine.started == ["inc", "cand", "cand"]


def test_a_check_that_ran_out_of_memory_is_made_again_alone(tmp_path):
    machine, said = FakeMachine(), []
    run = ab(
        tmp_path,
        FakeSpec("cand"),
        inc=FakeSpec("inc", check_ooms=1),
        machine=machine,
        progress=said.append,
    )
    assert run.ok and machine.started == ["inc", "cand", "inc"]
    assert machine.released == ["cand"] and any("incumbent's request ran out" in m for m in said)
