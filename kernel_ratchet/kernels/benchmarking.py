"""Timing and SNR helpers shared by the kernel pack's benchmark modules (``*/bench.py``).

Benchmarks report what one op costs next to its vendor baselines; they are not the campaign's
measurement (that is the harness's timing engine and the paired A/B).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

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
