"""Timing and SNR helpers shared by the kernel pack's benchmark modules (``*/bench.py``).

Benchmarks report what one op costs next to its vendor baselines; they are not the campaign's
measurement (that is the harness's timing engine and the paired A/B).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
from torch.utils.benchmark import Timer


def output_dir(path: str) -> str:
    """argparse type of an output folder: made now, with its parents, so that a run which
    measures for minutes does not die at its first write; a folder that cannot be made is a
    usage error naming it."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot make the output folder {path!r}: {exc}") from exc
    return path


def output_file(path: str) -> str:
    """argparse type of an output file: its folder made now (:func:`output_dir`)."""
    output_dir(str(Path(path).parent))
    return path


def time_ms(fn: Callable[[], object], min_run_time: float) -> tuple[float, float]:
    """(median ms, stddev ms) of ``fn`` over blocked runs (warm-up call first)."""
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    m = Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    times = [t * 1e3 for t in m.times]
    return statistics.median(times), (statistics.pstdev(times) if len(times) > 1 else 0.0)


#: What :func:`rotated_samples` times: a call, or a captured CUDA graph.
T = TypeVar("T")


@dataclass(frozen=True)
class Timed:
    """Median and stddev of one call, in milliseconds."""

    ms: float
    std_ms: float


def time_call(fn: Callable[[], object], min_run_time: float) -> Timed:
    """``Timer.blocked_autorange`` after two warm-up calls (compilation stays out); stddev over
    its blocks."""
    fn()
    fn()
    m = Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    times = m.times
    std = statistics.stdev(times) if len(times) > 1 else 0.0
    return Timed(m.median * 1e3, std * 1e3)


def timed_rounds(
    fns: Mapping[str, Callable[[], object]], min_run_time: float, rounds: int = 1
) -> dict[str, Timed]:
    """Each of ``fns`` over ``rounds`` rounds, after two warm-up calls each: the median of its
    rounds' ``blocked_autorange`` medians, and their stddev (0 with one round). A round times
    every call once, starting one later in the list than the round before, so the calls
    compared in a row are timed in the same minutes and none is always first; one round times
    them one after another."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    for fn in fns.values():
        fn()
        fn()

    def blocked_ms(fn: Callable[[], object]) -> float:
        return (
            Timer(stmt="fn()", globals={"fn": fn})
            .blocked_autorange(min_run_time=min_run_time)
            .median
            * 1e3
        )

    got = rotated_samples(fns, blocked_ms, rounds)
    return {
        n: Timed(statistics.median(v), statistics.stdev(v) if len(v) > 1 else 0.0)
        for n, v in got.items()
    }


def time_rounds(
    fns: Mapping[str, Callable[[], object]], min_run_time: float, rounds: int = 1
) -> dict[str, float]:
    """The median milliseconds of :func:`timed_rounds`."""
    return {n: t.ms for n, t in timed_rounds(fns, min_run_time, rounds).items()}


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


#: Bounds on the calls :func:`back_to_back_ms` times in one batch.
MIN_CALLS, MAX_CALLS = 5, 200


def batch_calls(one_call_ms: float, rep_ms: float) -> int:
    """Calls in one back-to-back batch: about ``rep_ms`` of work, within [MIN_CALLS, MAX_CALLS]
    (a call that took no measurable time gets the most)."""
    if not one_call_ms > 0:
        return MAX_CALLS
    return max(MIN_CALLS, min(MAX_CALLS, math.ceil(rep_ms / one_call_ms)))


def host_issue_ms(fn: Callable[[], object], calls: int = 20) -> float:
    """Host time to issue one call of ``fn`` (CUDA only): ``calls`` calls back to back with no
    synchronization between them, the Python and launch work of each while the GPU runs the
    previous ones. Where it reaches the call's GPU time, a back-to-back timing measures the
    host as much as the kernels."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e3 / calls


def back_to_back_ms(
    warmup_ms: float = 50.0, rep_ms: float = 50.0
) -> Callable[[Callable[[], object]], float]:
    """A timer ``fn -> ms per call`` of eager calls back to back (CUDA only), as a training
    step runs them: ``warmup_ms`` of calls first (the SM clock settles at the rate it can
    sustain), then one batch of about ``rep_ms`` of calls between two CUDA events, launches
    included, the L2 holding what the previous call left. Unlike :func:`do_bench_ms`, no
    idle flush between calls lets the clock rise above that rate: on an H200 a flushed
    Mixtral-sized grouped GEMM ran 807 TFLOP/s against 690 back to back, and repeated within
    3-7% where back to back repeated within 0-3%."""

    def timer(fn: Callable[[], object]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        one = start.elapsed_time(end)
        for _ in range(batch_calls(one, warmup_ms) - 1):
            fn()
        calls = batch_calls(one, rep_ms)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

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
    """Median ms of each of ``fns`` over ``rounds`` rounds (at least one) of
    :func:`rotated_samples`."""
    times = rotated_samples(fns, timer, max(rounds, 1))
    return {k: statistics.median(v) for k, v in times.items()}


def rotated_samples(
    fns: Mapping[str, T], timer: Callable[[T], float], rounds: int
) -> dict[str, list[float]]:
    """``timer`` of each of ``fns`` in ``rounds`` rounds: a round times every function once,
    so clock and thermal drift reach all of them alike, and round r starts at the r-th
    function, so none always follows the same one (a path timed right after a heavy one meets
    the clock that one left)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(timer(fns[name]))
    return times


#: Calls of one path captured in one CUDA graph by :func:`graph_rounds`.
GRAPH_CALLS = 20


def graph_rounds(
    fns: Mapping[str, Callable[[], object]],
    min_run_time: float,
    rounds: int = 1,
    calls: int = GRAPH_CALLS,
) -> dict[str, float]:
    """Median GPU milliseconds per call of each of ``fns``, the host's launch work left out:
    each is warmed up on a side stream, ``calls`` calls of it are captured in one CUDA graph,
    and the graph is replayed between two CUDA events for ``min_run_time`` seconds per round
    (the L2 warm, as in back-to-back calls). Rounds rotate the order
    (:func:`rotated_samples`). A path that cannot be captured (a host synchronization, a
    host read of device data) raises RuntimeError naming it."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if not torch.cuda.is_available():
        raise RuntimeError("graph timing needs a CUDA GPU; time on the host's clock instead")
    graphs = {name: _captured(name, fn, calls) for name, fn in fns.items()}
    got = rotated_samples(graphs, lambda g: _replayed(g, min_run_time) / calls, rounds)
    return {n: statistics.median(v) for n, v in got.items()}


def _captured(name: str, fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(side):
            fn()
            fn()
            with torch.cuda.graph(graph, stream=side):
                for _ in range(calls):
                    fn()
    except Exception as exc:
        raise RuntimeError(
            f"{name} cannot be captured in a CUDA graph ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:160]}); time it on the host's clock instead"
        ) from exc
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return graph


def _replayed(graph: torch.cuda.CUDAGraph, min_run_time: float) -> float:
    """Median milliseconds of one replay of ``graph``, over replays for ``min_run_time`` s."""
    graph.replay()
    torch.cuda.synchronize()
    times: list[float] = []
    t0 = time.perf_counter()
    while not times or time.perf_counter() - t0 < min_run_time:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
