"""Paired interleaved A/B: both sides timed the same way (CUDA graphs or eager calls), a
side that fell back refused, and the mode the first timing of a shape fixes. Driven by
the fake workers of :mod:`tests.harness.fake_ab`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel_ratchet.harness.adapter import Shape
from tests.harness.fake_ab import SHAPES, FakeMachine, FakeResult, FakeSpec, FakeWorker, ab


class ModeMachine(FakeMachine):
    """Fake workers that report how they timed: a graph, or eager calls after a failed capture
    on the side named ``fell_back``."""

    def __init__(self, fell_back: str | None) -> None:
        super().__init__()
        self.fell_back = fell_back

    def factory(self, spec: FakeSpec, log_path: Path) -> FakeWorker:
        worker = FakeWorker(self, spec, log_path)
        timed = worker.time

        def time(shape: Shape, seed: int, phase: str, **kw: Any) -> FakeResult:
            res = timed(shape, seed, phase, **kw)
            eager = spec.name == self.fell_back
            res.payload["engine"] = {
                "mode": "eager" if eager else "graph",
                "fallback": "CUDA graph capture failed (RuntimeError)" if eager else None,
            }
            return res

        worker.time = time
        return worker


@pytest.mark.parametrize(("fell_back", "side"), [("cand", "candidate"), ("inc", "incumbent")])
def test_sides_timed_in_different_modes_fail_the_side_that_fell_back(tmp_path, fell_back, side):
    run = ab(tmp_path, FakeSpec("cand", speed=1.2), machine=ModeMachine(fell_back))
    assert not run.ok and run.failure.side == side and run.failure.category == "bad_timing"
    assert "same quantity on both sides" in run.failure.detail
    assert "capture failed" in run.failure.detail


class ThresholdMachine(FakeMachine):
    """Workers whose engine picks graphs or eager calls by a device time that sits at its
    threshold: each request flips its own choice unless the request names a mode."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str | None] = []

    def factory(self, spec: FakeSpec, log_path: Path) -> FakeWorker:
        worker = FakeWorker(self, spec, log_path)
        timed = worker.time

        def time(shape: Shape, seed: int, phase: str, **kw: Any) -> FakeResult:
            res = timed(shape, seed, phase, **kw)
            self.asked.append(kw.get("graph"))
            own = "graph" if worker.n_time % 2 else "eager"
            mode = {"on": "graph", "off": "eager"}.get(kw.get("graph"), own)
            res.payload["engine"] = {"mode": mode, "fallback": None}
            return res

        worker.time = time
        return worker


def test_the_first_timing_of_a_shape_fixes_the_mode_of_both_sides(tmp_path):
    machine = ThresholdMachine()
    run = ab(tmp_path, FakeSpec("cand", speed=1.0), machine=machine)
    assert run.ok, run.failure
    firsts = len(SHAPES)  # each shape's (one phase's) first request chooses on its own
    assert machine.asked.count(None) == firsts and len(machine.asked) > 4 * firsts
    assert set(machine.asked) - {None} <= {"on", "off"}


def test_a_capture_that_failed_first_fixes_nothing(tmp_path):
    """A first timing that fell back to eager calls pins no mode: the other side's graph then
    fails the side that fell back, as before."""
    run = ab(tmp_path, FakeSpec("cand", speed=1.2), machine=ModeMachine("cand"))
    assert not run.ok and run.failure.side == "candidate"


def test_sides_timed_the_same_way_are_compared(tmp_path):
    run = ab(tmp_path, FakeSpec("cand", speed=1.05), machine=ModeMachine(None))
    assert run.ok and run.decision.accepted
