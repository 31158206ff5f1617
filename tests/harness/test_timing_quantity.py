"""What a campaign measures (``measure`` in ratchet.yaml) and the engine logic around it, on
the CPU: validation, the fallback of an op that cannot be captured, the flush subtraction per
sample and the launch-floor guard (the GPU pieces replaced by test doubles)."""

from __future__ import annotations

import pytest

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.timing import graphs, quantity
from kernel_ratchet.harness.timing.cuda_events import CudaEventEngine
from kernel_ratchet.harness.timing.engine import SampleHooks


@pytest.mark.parametrize(
    ("raw", "default", "expected"),
    [
        (None, quantity.DEFAULT, ("step_time", "warm")),
        ({"quantity": "kernel_time"}, quantity.DEFAULT, ("kernel_time", "warm")),
        ({"quantity": "kernel_time", "l2": "cold"}, quantity.DEFAULT, ("kernel_time", "cold")),
        ({"l2": "warm"}, quantity.Measure("kernel_time", "cold"), ("kernel_time", "warm")),
        ({}, quantity.Measure("kernel_time", "cold"), ("kernel_time", "cold")),
        ({"quantity": "step_time"}, quantity.Measure("kernel_time", "cold"), ("step_time", "warm")),
    ],
)
def test_the_op_setting_resolves_over_the_project_default(raw, default, expected):
    m = quantity.resolve(raw, default)
    assert (m.quantity, m.l2) == expected
    assert m.quantity.replace("_", " ").split()[0] in m.label()


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("kernel_time", "expected a mapping"),
        ({"quantity": "gpu_time"}, "'gpu_time' is not allowed"),
        ({"l2": "hot"}, "'hot' is not allowed"),
        ({"quantity": "kernel_time", "flush": True}, "unknown key"),
    ],
)
def test_bad_measure_values_are_named_with_their_fix(raw, needle):
    found = quantity.problems(raw)
    assert found and any(needle in problem for _, problem, _ in found)
    assert all(fix for _, _, fix in found)


def test_step_time_with_a_cold_l2_is_refused_with_the_alternative():
    with pytest.raises(ValueError, match="quantity: kernel_time"):
        quantity.resolve({"quantity": "step_time", "l2": "cold"})


@pytest.mark.parametrize(
    ("params", "needle"),
    [({"quantity": "fast"}, "quantity must be one of"), ({"l2": "cold"}, "quantity must be")],
)
def test_engine_rejects_bad_quantities_before_looking_for_a_gpu(params, needle):
    with pytest.raises(RatchetError, match=needle):
        CudaEventEngine(**params)


def test_records_name_the_quantity_of_any_engine_parameters():
    assert "graph replay, cold L2" in quantity.of_params(
        "cuda_events", {"quantity": "kernel_time", "l2": "cold"}
    )
    assert "eager step time" in quantity.of_params("cuda_events", {"graph": "off"})
    assert quantity.of_params("perf_counter", {}) == quantity.CPU_LABEL


def test_a_reading_at_or_below_zero_or_under_the_launch_floor_is_no_time():
    assert graphs.below_floor([0.010, 0.011], 0.002) is None
    assert "<= 0 ms" in graphs.below_floor([0.010, 0.0], 0.002)
    assert "launch floor" in graphs.below_floor([0.0004, 0.0005], 0.002)


# -- the engine's measure() around test doubles of the GPU pieces --


class Replay:
    """A timed call of a fake graph: ``ms`` per replay."""

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def __call__(self) -> None:
        pass


def fake_engine(measured, graphed, floor_ms=0.002, eager_ms_per_call=0.05):
    """A CudaEventEngine without a GPU: warm-up, device probe, timed call, capture and launch
    floor replaced; eager timed calls run ``fn`` and read ``eager_ms_per_call`` per call."""
    eng = CudaEventEngine.__new__(CudaEventEngine)
    kernel = measured is not None and measured.quantity == "kernel_time"
    eng.measured, eng.device = measured, "cpu"
    eng.graph = "on" if kernel else ("auto" if measured is None else "off")
    eng.flush_l2 = measured is None or measured.l2 == "cold"
    eng.samples, eng.sample_ms, eng.min_iters, eng.max_iters = 3, 1.0, 1, 100
    eng.max_graph_iters, eng.graph_below_us, eng.settle_max_ms = 100, 20.0, 100.0
    eng.throttle_tol, eng.host_ratio, eng._floors = 0.05, 0.5, {}
    eng._warmup = lambda fn: (0.05, None, {"clock_settled": None})
    eng._device_ms = lambda fn, host: 0.005
    eng._graphed = graphed
    eng._floor = lambda graph: floor_ms
    calls = []

    def timed(run):
        if isinstance(run, Replay):
            return run.ms, run.ms, None
        before = len(calls)
        run()
        n = len(calls) - before
        return n * eager_ms_per_call, n * eager_ms_per_call, None

    eng._timed = timed
    return eng, (lambda: calls.append(1))


def test_an_op_that_cannot_be_captured_is_timed_in_eager_batches_and_says_so():
    def graphed(fn, device_ms, prelude=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    eng, fn = fake_engine(quantity.Measure("kernel_time", "warm"), graphed)
    t = eng.measure(fn)
    assert t.details["mode"] == "eager" and "capture failed" in t.details["fallback"]
    assert any("capture failed" in f and "eager" in f for f in t.flags), t.flags
    assert t.details["quantity"] == quantity.Measure().label()  # what was really measured
    assert t.median_ms == pytest.approx(0.05)


def test_cold_l2_subtracts_the_flushes_timed_in_the_same_sample():
    eng, fn = fake_engine(
        quantity.Measure("kernel_time", "cold"),
        lambda fn, device_ms, prelude=None: graphs.Plan(Replay(3.0), 100, Replay(2.0), True),
    )
    t = eng.measure(fn)
    assert t.median_ms == pytest.approx(0.01) and t.details["flush_ms_per_iter"] == 0.02
    assert t.details["mode"] == "graph" and "cold L2" in t.details["quantity"]


def test_a_graph_that_reads_no_work_raises_instead_of_reporting_a_number():
    eng, fn = fake_engine(
        quantity.Measure("kernel_time", "warm"),
        lambda fn, device_ms, prelude=None: graphs.Plan(Replay(0.0001), 100, None, True),
    )
    with pytest.raises(RatchetError, match="not a time.*launch floor"):
        eng.measure(fn)
    cold, fn = fake_engine(
        quantity.Measure("kernel_time", "cold"),
        lambda fn, device_ms, prelude=None: graphs.Plan(Replay(2.0), 100, Replay(2.1), True),
    )
    with pytest.raises(RatchetError, match="<= 0 ms.*l2: warm"):
        cold.measure(fn)


def test_a_size_chosen_graph_lost_in_the_flush_is_retimed_eagerly_and_flagged():
    eng, fn = fake_engine(
        None, lambda fn, device_ms, prelude=None: graphs.Plan(Replay(2.0), 100, Replay(2.0), True)
    )
    t = eng.measure(fn, SampleHooks())
    assert t.details["mode"] == "eager" and t.median_ms == pytest.approx(0.05)
    assert any("ill-conditioned" in f for f in t.flags), t.flags


class Wobbling(Replay):
    """A fake graph whose timed calls alternate between times (each read twice: device and
    host)."""

    def __init__(self, *ms: float) -> None:
        self._ms, self._n = ms, 0

    @property
    def ms(self) -> float:
        self._n += 1
        return self._ms[self._n // 2 % len(self._ms)]


def test_the_flags_of_discarded_graph_samples_are_labelled_as_discarded():
    """Graph samples lost in the flush that also disagreed: the eager samples are kept, and the
    note about the graph samples says they were discarded (the kept samples did not disagree)."""
    eng, fn = fake_engine(
        None,
        lambda fn, device_ms, prelude=None: graphs.Plan(
            Wobbling(2.05, 2.08), 100, Replay(2.0), True
        ),
    )
    t = eng.measure(fn, SampleHooks())
    assert t.details["mode"] == "eager" and len(t.samples_ms) == eng.samples
    disagreed = [f for f in t.flags if "samples disagreed" in f]
    assert disagreed and all(f.startswith("discarded graph samples: ") for f in disagreed)
    assert t.flags[-1].startswith("graph timing ill-conditioned"), t.flags


def test_an_uncaptured_op_with_a_prelude_is_timed_without_the_preludes():
    def graphed(fn, device_ms, prelude=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    eng, fn = fake_engine(quantity.Measure("kernel_time", "warm"), graphed)
    hooks = SampleHooks()
    hooks.prelude = fn  # as long as a call of the op: read with it, the op would take 0.1 ms
    t = eng.measure(fn, hooks)
    assert t.details["mode"] == "eager"
    assert t.median_ms == pytest.approx(0.05)
