"""CudaEventEngine pieces that need no GPU: parameter validation and the pure helpers that
turn raw timed calls into samples (iterations, clock settling, throttling, graph choice,
flush subtraction, host cross-check), plus the sample hooks of the perf_counter engine."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.timing import graphs
from kernel_ratchet.harness.timing.cuda_events import CudaEventEngine
from kernel_ratchet.harness.timing.cuda_support import (
    choose_graph,
    clock_settled,
    host_crosscheck,
    is_throttled,
    iterations_for,
    per_call_ms,
    reset_persisting_l2,
)
from kernel_ratchet.harness.timing.engine import SampleHooks, Timing
from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine
from kernel_ratchet.harness.timing.registry import make_engine


def test_iterations_fill_the_sample_duration_within_bounds():
    assert iterations_for(75.0, 0.5, 1, 100_000) == 150
    assert iterations_for(75.0, 300.0, 1, 100) == 1  # a slow op: one call per sample
    assert iterations_for(75.0, 1e-6, 1, 2000) == 2000  # capped
    assert iterations_for(75.0, 0.0, 3, 50) == 50  # unknown time: the cap
    assert iterations_for(75.0, 40.0, 4, 50) == 4  # floor


def test_clock_settles_only_over_a_full_quiet_window():
    assert not clock_settled([1980, 1980], 5, 15)
    assert not clock_settled([1980, 1700, 1650, 1640, 1645, 1650], 5, 15)
    assert clock_settled([1980, 1700, 1650, 1645, 1648, 1652, 1640], 5, 15)


def test_throttle_threshold_is_relative_to_the_settled_clock():
    assert is_throttled(1500.0, 1650.0, 0.05)  # 9% below
    assert not is_throttled(1600.0, 1650.0, 0.05)  # 3% below
    assert not is_throttled(None, 1650.0, 0.05)
    assert not is_throttled(1500.0, None, 0.05)


@pytest.mark.parametrize(
    ("mode", "us", "expected"),
    [
        ("auto", 5.0, True),
        ("auto", 20.0, False),
        ("auto", 500.0, False),
        ("on", 900.0, True),
        ("off", 1.0, False),
    ],
)
def test_graph_choice(mode, us, expected):
    assert choose_graph(mode, us, 20.0) is expected


def test_flush_time_is_subtracted_per_call_and_never_clamped():
    assert per_call_ms(100.0, 1000, 40.0) == pytest.approx(0.06)
    assert per_call_ms(75.0, 150) == pytest.approx(0.5)
    assert per_call_ms(10.0, 1000, 50.0) < 0  # refused by the engine, never turned into 0


def test_host_crosscheck_flags_event_time_far_below_host_time():
    assert host_crosscheck(75.0, 76.0, 0.5, 1.0) is None
    assert "host time" in host_crosscheck(10.0, 76.0, 0.5, 1.0)
    assert host_crosscheck(0.01, 0.5, 0.5, 1.0) is None  # too short to judge


@pytest.mark.parametrize(
    "params",
    [
        {"samples": 1},
        {"sample_ms": 0},
        {"min_iters": 0},
        {"min_iters": 5, "max_iters": 4},
        {"graph": "sometimes"},
        {"throttle_tol": 1.0},
        {"host_ratio": 0},
        {"settle_window": 1},
        {"warmup_ms": -1},
    ],
)
def test_cuda_engine_rejects_bad_parameters_before_looking_for_a_gpu(params):
    with pytest.raises(RatchetError, match="cuda_events"):
        CudaEventEngine(**params)


def test_unknown_engine_parameter_lists_the_allowed_ones():
    with pytest.raises(RatchetError, match="graph_below_us"):
        make_engine("cuda_events", {"no_such_param": 1})


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only behaviour")
def test_persisting_l2_reset_reports_why_not_on_the_cpu():
    assert isinstance(reset_persisting_l2(), str)


def test_timing_keeps_its_old_four_field_form():
    t = Timing(1.0, 0.1, (1.0, 1.1), "perf_counter")
    assert t.clock_mhz == () and t.dropped == 0 and t.flags == () and t.details == {}


class Recorder(SampleHooks):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def before_sample(self, index: int) -> None:
        self.events.append(("before", index))

    def after_sample(self, index: int) -> None:
        self.events.append(("after", index))


def test_perf_counter_calls_hooks_around_every_sample_outside_the_batch():
    calls = []
    hooks = Recorder()
    fn = lambda: calls.append(len(hooks.events))  # noqa: E731 -- records hook count per call
    PerfCounterEngine(warmup=1, samples=3, min_sample_ms=0.0, max_batch=2).measure(fn, hooks)
    assert hooks.events == [
        ("before", 0),
        ("after", 0),
        ("before", 1),
        ("after", 1),
        ("before", 2),
        ("after", 2),
    ]
    # warm-up + calibration see no hooks; every batched call sees an odd count (inside a sample)
    assert calls[:2] == [0, 0] and all(c % 2 == 1 for c in calls[2:])


@pytest.mark.parametrize(
    ("iters", "per_call_ms", "expected"),
    [
        (611, 0.08, (62, 10)),  # ~5 ms graphs, replayed to cover the sample (620 calls)
        (100, 0.0, (100, 1)),  # no estimate: one graph of every call
        (10, 2.0, (2, 5)),
        (3, 20.0, (1, 3)),  # a call longer than a chunk: one call per graph
        (4, 0.01, (4, 1)),  # fewer calls than a chunk holds: one graph
    ],
)
def test_a_sample_replays_a_graph_of_a_few_milliseconds(iters, per_call_ms, expected):
    per, times = graphs.chunked(iters, per_call_ms)
    assert (per, times) == expected and per * times >= iters
    calls: list[int] = []
    graphs.replays(lambda: calls.append(1), times)()
    assert len(calls) == times


def test_the_prelude_before_every_call_is_subtracted_from_the_time(monkeypatch):
    """On a clock that only the calls move (3 ms a prelude, 1 ms an op call), so a busy
    machine cannot move it."""
    from types import SimpleNamespace

    from kernel_ratchet.harness.timing import perf_counter
    from kernel_ratchet.harness.timing.engine import SampleHooks
    from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine

    now = [0.0]
    monkeypatch.setattr(perf_counter, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    calls = {"prelude": 0, "op": 0}

    class Slow(SampleHooks):
        @staticmethod
        def prelude() -> None:
            calls["prelude"] += 1
            now[0] += 3e-3

    def op() -> None:
        calls["op"] += 1
        now[0] += 1e-3

    t = PerfCounterEngine(samples=3, warmup=1, min_sample_ms=2.0).measure(op, Slow())
    assert calls["prelude"] >= calls["op"]  # before every call, and alone for the baseline
    assert t.median_ms == pytest.approx(1.0), t  # 4 ms if the prelude were counted


def test_graph_mode_pins_an_engine_that_chooses_and_leaves_the_others():
    from types import SimpleNamespace

    from kernel_ratchet.harness.timing.engine import graph_mode

    auto, off, plain = SimpleNamespace(graph="auto"), SimpleNamespace(graph="off"), object()
    with graph_mode(auto, "on"), graph_mode(off, "on"), graph_mode(plain, "on"):
        assert auto.graph == "on" and off.graph == "off"
    with graph_mode(auto, None):
        assert auto.graph == "auto"
    with pytest.raises(KeyError), graph_mode(auto, "off"):
        assert auto.graph == "off"
        raise KeyError("the request failed")
    assert auto.graph == "auto"
