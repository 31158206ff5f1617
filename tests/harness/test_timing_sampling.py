"""The samples of one cuda_events measurement, driven by a fake engine on the CPU: cold-L2
samples that disagree get more and the median leaves the spoiled one out; agreeing samples,
and warm-L2 ones, get none."""

from __future__ import annotations

import statistics

from kernel_ratchet.harness.timing import engine, graphs, sampling


class FakeEngine:
    """Times from a script: each timed call of ``run`` pops the next op+flush time (ms)."""

    samples, throttle_tol, host_ratio = 2, 0.05, 0.5

    def __init__(self, run_ms: list[float], flush_ms: float = 100.0) -> None:
        self.run_ms, self.flush_ms, self.calls = list(run_ms), flush_ms, 0

    def _timed(self, run):
        self.calls += 1
        ms = self.run_ms.pop(0) if run == "run" else self.flush_ms
        return ms, ms, 1980.0


def _collect(eng: FakeEngine, cold: bool = True) -> tuple[graphs.Collected, list[str]]:
    plan = graphs.Plan("run", 10, "flush" if cold else None, True)
    flags: list[str] = []
    return sampling.collect(eng, plan, 1980.0, engine.SampleHooks(), flags), flags


def test_disagreeing_cold_samples_get_one_more_and_the_median_drops_the_outlier():
    # per call: (op+flush - flush) / 10 -> 1.3, 2.9 (a spoiled subtraction), 1.3
    got, flags = _collect(FakeEngine([113.0, 129.0, 113.0]))
    assert len(got.out) == 3 and statistics.median(got.out) == 1.3
    assert len(got.flush) == 3
    assert any("disagreed by 123.1%" in f for f in flags)


def test_agreeing_cold_samples_and_warm_samples_get_none():
    got, flags = _collect(FakeEngine([113.0, 113.1]))
    assert len(got.out) == 2 and not flags
    eng = FakeEngine([13.0, 29.0])
    got, flags = _collect(eng, cold=False)  # no subtraction: a slow sample is the op's own
    assert got.out == [1.3, 2.9] and not flags and eng.calls == 2


def test_a_long_ops_disagreeing_cold_samples_get_none():
    # per call: the op 109 and 114 ms against 1 ms of flushes: its own clock, not the flushes
    got, flags = _collect(FakeEngine([1100.0, 1150.0], flush_ms=10.0))
    assert got.out == [109.0, 114.0] and not flags


def test_disagreement_of_samples():
    assert sampling.disagreement([1.0]) == 0.0 and sampling.disagreement([1.0, 0.0]) == 0.0
    assert abs(sampling.disagreement([1.0, 1.5, 1.2]) - 0.5) < 1e-12
