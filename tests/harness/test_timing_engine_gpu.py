"""CudaEventEngine on a real GPU: modes, flush subtraction, side-stream work, hooks, clocks.
Run on the H200 with ``python -m pytest -m gpu tests/harness``."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from kernel_ratchet.harness.timing.cuda_events import CudaEventEngine
from kernel_ratchet.harness.timing.engine import SampleHooks

pytestmark = [pytest.mark.gpu, pytest.mark.gpu_alone]


def fast_engine(**kw) -> CudaEventEngine:
    return CudaEventEngine(samples=5, sample_ms=20.0, settle_max_ms=1000.0, **kw)


def test_large_op_is_timed_eagerly_with_all_parameters_described():
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    eng = fast_engine()
    t = eng.measure(lambda: a @ a)
    assert len(t.samples_ms) == 5 and 0.05 < t.median_ms < 50, t
    assert t.details["mode"] == "eager" and t.details["iters_per_sample"] >= 1
    tflops = 2 * 4096**3 / (t.median_ms * 1e-3) / 1e12
    assert 50 < tflops < 1500, tflops
    d = eng.describe()
    for key in (
        "sample_ms",
        "throttle_tol",
        "graph",
        "graph_below_us",
        "host_ratio",
        "settle_window",
        "flush_l2_bytes",
        "sm_clock_source",
    ):
        assert key in d
    assert t.details["persisting_l2_reset"]


def test_small_op_uses_a_graph_and_subtracts_the_flush():
    x = torch.randn(4 << 20, device="cuda")  # 16 MB in, 16 MB out: ~10 us from HBM
    t = fast_engine().measure(lambda: x.mul(2.0))
    assert t.details["mode"] == "graph", (t.details, t.flags)
    assert t.details["flush_ms_per_iter"] > 0
    assert 0.002 < t.median_ms < 0.05, t  # microseconds, not the flush's cost


def test_op_lost_in_the_flush_is_never_reported_as_zero():
    """A 16 KB multiply (~2 us) beside a ~30 us L2 flush: where the subtraction cannot resolve
    it, it is timed eagerly and said so; either way the reading is above the launch floor."""
    x = torch.randn(4096, device="cuda")
    t = fast_engine().measure(lambda: x.mul(2.0))
    assert t.median_ms >= 0.5 * t.details["launch_floor_ms"] > 0, t
    if t.details["mode"] == "eager":
        assert any("ill-conditioned" in f for f in t.flags), t.flags


def test_graph_mode_can_be_forced_off():
    x = torch.randn(4096, device="cuda")
    t = fast_engine(graph="off").measure(lambda: x.mul(2.0))
    assert t.details["mode"] == "eager" and t.details["flush_ms_per_iter"] == 0.0
    assert t.details["device_ms_source"] == "warm-up"  # no device-time probe without graphs
    on = fast_engine().measure(lambda: x.mul(2.0))
    assert on.details["device_ms_source"] == "event probe behind a sleep"


def test_work_left_on_a_side_stream_is_counted():
    side = torch.cuda.Stream()
    cycles = 2_000_000  # ~1 ms

    def on_side() -> None:
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)

    def on_main() -> None:
        torch.cuda._sleep(cycles)

    t_side = fast_engine(graph="off").measure(on_side)
    t_main = fast_engine(graph="off").measure(on_main)
    assert t_side.median_ms > 0.7 * t_main.median_ms, (t_side, t_main)


def test_hooks_run_around_every_sample():
    seen: list[str] = []

    class Hooks(SampleHooks):
        def before_sample(self, index: int) -> None:
            seen.append(f"b{index}")

        def after_sample(self, index: int) -> None:
            seen.append(f"a{index}")

    x = torch.randn(1 << 20, device="cuda")
    t = fast_engine().measure(lambda: x.add(1.0), Hooks())
    n = len(t.samples_ms) + t.dropped
    assert seen == [f"{p}{i}" for i in range(n) for p in "ba"]


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is None, reason="needs nvidia-ml-py")
def test_sm_clock_is_logged_per_kept_sample():
    a = torch.randn(2048, 2048, device="cuda")
    t = fast_engine().measure(lambda: a @ a)
    assert len(t.clock_mhz) == len(t.samples_ms)
    assert all(300 < c < 3000 for c in t.clock_mhz), t.clock_mhz
    assert t.details["settled_clock_mhz"] is not None


def test_a_pinned_mode_overrides_the_automatic_choice_for_one_request():
    """A large op is timed eagerly and a small one as a graph on their own; pinned by the
    A/B (``graph_mode``), each is timed the other way, and the engine's choice returns after."""
    from kernel_ratchet.harness.timing.engine import graph_mode

    small = torch.randn(4 << 20, device="cuda")
    big = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    engine = fast_engine()
    with graph_mode(engine, "off"):
        assert engine.measure(lambda: small.mul(2.0)).details["mode"] == "eager"
    with graph_mode(engine, "on"):
        assert engine.measure(lambda: big @ big).details["mode"] == "graph"
    assert engine.measure(lambda: small.mul(2.0)).details["mode"] == "graph"
    assert engine.graph == "auto"
