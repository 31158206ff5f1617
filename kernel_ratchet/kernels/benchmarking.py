"""Timing and SNR helpers shared by the kernel pack's benchmark modules (``*/bench.py``).

Benchmarks report what one op costs next to its vendor baselines; they are not the campaign's
measurement (that is the harness's timing engine and the paired A/B).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping

import torch
from torch.utils.benchmark import Timer


def time_ms(fn: Callable[[], object], min_run_time: float) -> tuple[float, float]:
    """(median ms, stddev ms) of ``fn`` over blocked runs (warm-up call first)."""
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    m = Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    times = [t * 1e3 for t in m.times]
    return statistics.median(times), (statistics.pstdev(times) if len(times) > 1 else 0.0)


def snr_gpu(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Same definition as harness.correctness.snr_db, evaluated on the device (fast)."""
    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return -math.inf
    noise, signal = float(((o - r) ** 2).sum()), float((r**2).sum())
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(signal / noise) if signal else -math.inf


def tflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e-3) / 1e12 if ms > 0 else math.nan


def do_bench_ms(
    warmup_ms: float = 5.0, rep_ms: float = 25.0
) -> Callable[[Callable[[], object]], float]:
    """A timer ``fn -> median ms`` by ``triton.testing.do_bench`` (CUDA only): it zeroes a
    buffer larger than L2 before every call, so each call starts with a cold cache."""
    import triton.testing

    def timer(fn: Callable[[], object]) -> float:
        return float(
            triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
        )

    return timer


def wall_ms(fn: Callable[[], object]) -> float:
    """Host wall time of one call in ms (the CPU interpreter's timer: no device, no L2)."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def interleaved_medians(
    fns: Mapping[str, Callable[[], object]],
    timer: Callable[[Callable[[], object]], float],
    rounds: int,
) -> dict[str, float]:
    """Median ms of each of ``fns`` over ``rounds`` rounds; a round times every function once,
    in order, so clock and thermal drift reach all of them alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(max(rounds, 1)):
        for name, fn in fns.items():
            times[name].append(timer(fn))
    return {k: statistics.median(v) for k, v in times.items()}
