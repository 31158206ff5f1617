"""Timing engines (kernel_ratchet.harness.timing)."""

from __future__ import annotations

import statistics
import time

import pytest
import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.timing.cuda_events import CudaEventEngine
from kernel_ratchet.harness.timing.engine import Timing
from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine
from kernel_ratchet.harness.timing.registry import default_engine_name, engines, make_engine


class Counter:
    """A callable that counts its calls and sleeps ``slow_s`` for the first ``slow_calls``."""

    def __init__(self, sleep_s: float = 0.0, slow_calls: int = 0, slow_s: float = 0.0) -> None:
        self.calls = 0
        self.sleep_s, self.slow_calls, self.slow_s = sleep_s, slow_calls, slow_s

    def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.slow_calls:
            time.sleep(self.slow_s)
        elif self.sleep_s:
            time.sleep(self.sleep_s)


def test_perf_counter_measures_a_2ms_sleep():
    eng = PerfCounterEngine(warmup=1, samples=5)
    t = eng.measure(Counter(sleep_s=0.002))
    assert isinstance(t, Timing) and t.engine == "perf_counter"
    assert len(t.samples_ms) == 5
    # Generous band: time.sleep never returns early; a loaded 2-core CI box may add a lot.
    assert 1.5 <= t.median_ms <= 20.0
    assert all(s >= 1.5 for s in t.samples_ms)
    assert t.median_ms == statistics.median(t.samples_ms)
    assert t.stddev_ms == pytest.approx(statistics.stdev(t.samples_ms))


def test_perf_counter_slow_fn_is_not_batched_and_call_count_is_exact():
    fn = Counter(sleep_s=0.002)
    PerfCounterEngine(warmup=3, samples=4, min_sample_ms=1.0).measure(fn)
    # 3 warm-up calls + 1 calibration call + 4 samples of one call each.
    assert fn.calls == 3 + 1 + 4


def test_perf_counter_warmup_calls_are_not_timed():
    # The first three calls (the warm-up) take 60 ms each, every later one ~2 ms.
    fn = Counter(sleep_s=0.002, slow_calls=3, slow_s=0.06)
    t = PerfCounterEngine(warmup=3, samples=4).measure(fn)
    assert max(t.samples_ms) < 40.0, t.samples_ms
    # Without warm-up the slow calls are the calibration call and the first sample.
    fn0 = Counter(sleep_s=0.002, slow_calls=2, slow_s=0.06)
    t0 = PerfCounterEngine(warmup=0, samples=4).measure(fn0)
    assert t0.samples_ms[0] >= 50.0


def test_perf_counter_batches_a_fast_function():
    fn = Counter()
    t = PerfCounterEngine(warmup=2, samples=3, min_sample_ms=1.0, max_batch=50).measure(fn)
    # A no-op takes well under 1 ms / 50, so every sample is a full batch of 50 calls.
    assert fn.calls == 2 + 1 + 3 * 50
    assert fn.calls > len(t.samples_ms)
    assert t.median_ms < 0.5  # per-call time, not per-batch


@pytest.mark.parametrize("samples", [1, 0, -3])
def test_perf_counter_rejects_fewer_than_two_samples(samples):
    with pytest.raises(RatchetError, match="samples >= 2"):
        PerfCounterEngine(samples=samples)


def test_perf_counter_describe_reports_its_parameters():
    d = PerfCounterEngine(device="cpu", warmup=4, samples=7, min_sample_ms=2.5).describe()
    assert d == {
        "engine": "perf_counter",
        "device": "cpu",
        "warmup": 4,
        "samples": 7,
        "min_sample_ms": 2.5,
    }


def test_make_engine_builds_the_named_engine_with_params():
    eng = make_engine("perf_counter", {"samples": 3, "warmup": 0})
    assert isinstance(eng, PerfCounterEngine)
    assert (eng.samples, eng.warmup) == (3, 0)
    assert isinstance(make_engine("perf_counter"), PerfCounterEngine)


def test_make_engine_unknown_name_lists_known_engines():
    with pytest.raises(RatchetError) as exc:
        make_engine("nsight", {})
    msg = str(exc.value)
    assert "'nsight'" in msg
    for name in engines():
        assert name in msg


def test_make_engine_unknown_param_names_it_and_the_allowed_ones():
    with pytest.raises(RatchetError) as exc:
        make_engine("perf_counter", {"repeats": 5})
    msg = str(exc.value)
    assert "repeats" in msg and "perf_counter" in msg
    assert "samples" in msg and "warmup" in msg and "min_sample_ms" in msg


def test_make_engine_invalid_value_is_a_ratchet_error():
    with pytest.raises(RatchetError, match="samples >= 2"):
        make_engine("perf_counter", {"samples": 1})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_event_engine_without_cuda_says_use_perf_counter():
    with pytest.raises(RatchetError, match="perf_counter"):
        CudaEventEngine()
    with pytest.raises(RatchetError, match="CUDA"):
        make_engine("cuda_events", {"samples": 3})
    assert default_engine_name() == "perf_counter"


@pytest.mark.gpu
def test_cuda_event_engine_times_gpu_work_and_reports_flush():
    eng = CudaEventEngine(warmup_ms=5.0, samples=5)
    t = eng.measure(lambda: torch.cuda._sleep(1_000_000))
    assert t.engine == "cuda_events" and len(t.samples_ms) == 5
    assert t.median_ms > 0.0 and all(s > 0.0 for s in t.samples_ms)
    l2 = torch.cuda.get_device_properties("cuda").L2_cache_size
    d = eng.describe()
    assert d["engine"] == "cuda_events" and d["samples"] == 5
    assert d["flush_l2_bytes"] == max(2 * l2, 1 << 20)
    a = torch.randn(2048, 2048, device="cuda")
    tm = eng.measure(lambda: a @ a)
    assert tm.median_ms > 0.0
    assert CudaEventEngine(samples=2, flush_l2=False).describe()["flush_l2_bytes"] == 0
    assert default_engine_name() == "cuda_events"
