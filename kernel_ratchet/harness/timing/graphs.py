"""CUDA graphs of many calls for the ``cuda_events`` engine, and the launch floor.

:func:`capture` records ``iters`` calls of a body into a ``torch.cuda.CUDAGraph`` (the approach
of ``triton.testing.do_bench_cudagraph``: warm the body on a side stream first, so lazy
initialisation never happens inside the capture) and replays it once before returning, so the
graph's upload to the device is never inside a timed replay.

:func:`chunked` splits a sample's calls into replays of one graph of a few milliseconds of
work: capture runs the op's Python once per captured call (an autotuned, decorated op pays
100 us or more each), and a graph's memory pool keeps every captured call's outputs, so one
graph of a whole 50 ms sample cost more to capture than to replay.

:func:`launch_floor_ms` measures what one trivial kernel costs per call in the same mode (graph
replay or eager back-to-back calls): no op that does GPU work can be timed below it, so a
reading under it means the timed region held no work (a graph that captured nothing, a
returned cached result, work left on another stream) and is an error, never a number.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

#: A per-call time under this fraction of the launch floor is an error.
FLOOR_FRACTION = 0.5
#: Trivial kernels per floor measurement.
FLOOR_CALLS = 200
#: Device work of one captured graph when a sample replays it several times.
CHUNK_MS = 5.0


def use_capture_stream() -> torch.cuda.Stream:
    """Make one side stream this process's current stream (once; returns it). An autograd
    backward runs on the stream of its forward: a forward run on the default stream leaves
    its backward's kernels outside a graph captured on a side stream (replays that compute
    nothing). With every call on the capture stream, the forward of a timed backward is
    where its capture happens."""
    global _CAPTURE_STREAM
    if _CAPTURE_STREAM is None:
        _CAPTURE_STREAM = torch.cuda.Stream()
        _CAPTURE_STREAM.wait_stream(torch.cuda.current_stream())
        torch.cuda.set_stream(_CAPTURE_STREAM)
    return _CAPTURE_STREAM


_CAPTURE_STREAM: torch.cuda.Stream | None = None
#: Module globals this module rebinds as it runs (the Sentinel keeps every other one).
RUN_TIME_STATE = ("_CAPTURE_STREAM",)


def capture(body: Callable[[], Any], iters: int) -> Callable[[], None]:
    """The replay of a CUDA graph of ``iters`` calls of ``body`` (raises what capture raises:
    host synchronisation, CPU tensors read on the host, an illegal call during capture),
    captured on the process's capture stream (:func:`use_capture_stream`)."""
    g = torch.cuda.CUDAGraph()
    stream = use_capture_stream()
    with torch.cuda.stream(stream):
        body()  # warm-up on the capture stream: lazy inits and autotuning happen here
        _without_host_sync(body)
    torch.cuda.synchronize()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(iters):
            body()
    torch.cuda.synchronize()
    g.replay()  # the first replay uploads the graph: never a timed one
    torch.cuda.synchronize()
    return g.replay


def chunked(iters: int, per_call_ms: float) -> tuple[int, int]:
    """(calls per graph, replays per sample) for about ``iters`` calls of ``per_call_ms``
    each: a graph holds about :data:`CHUNK_MS` of work, and the sample replays it as many
    times as the ``iters`` calls need (rounded up)."""
    per = iters if not per_call_ms > 0 else max(1, min(iters, round(CHUNK_MS / per_call_ms)))
    return per, -(-iters // per)


def replays(replay: Callable[[], None], times: int) -> Callable[[], None]:
    """One timed call that replays a graph ``times`` times back to back."""
    if times == 1:
        return replay

    def run() -> None:
        for _ in range(times):
            replay()

    return run


def _without_host_sync(body: Callable[[], Any]) -> None:
    """Run ``body`` once with synchronising CUDA calls (``.item()``, ``.cpu()``...) made errors:
    such a body cannot be captured, and a capture that fails half-way leaves PyTorch's CUDA
    generator in capture mode, so later random draws of the process fail. Finding the sync in
    an eager call keeps the process clean and the fallback says why."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        body()
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def events_ms(run: Callable[[], Any]) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def launch_floor_ms(graph: bool, device: str = "cuda") -> float:
    """Per-call ms of a one-element add, ``FLOOR_CALLS`` of them in a graph replay or back to
    back eagerly (median of 3)."""
    tiny = torch.zeros(1, device=device)

    def one() -> None:
        tiny.add_(1.0)

    if graph:
        run = capture(one, FLOOR_CALLS)
    else:

        def run() -> None:
            for _ in range(FLOOR_CALLS):
                one()

        run()
    return statistics.median(events_ms(run) for _ in range(3)) / FLOOR_CALLS


def below_floor(samples_ms: list[float], floor_ms: float) -> str | None:
    """Why these per-call samples are not a time (a sample at or below 0, or a median under
    ``FLOOR_FRACTION`` x the launch floor), or None when they are one."""
    low = [x for x in samples_ms if not x > 0]
    if low:
        return f"{len(low)} of {len(samples_ms)} samples read <= 0 ms per call"
    med = statistics.median(samples_ms)
    if med < FLOOR_FRACTION * floor_ms:
        return (
            f"the median {med * 1e3:.3f} us per call is under {FLOOR_FRACTION:g}x the launch "
            f"floor ({floor_ms * 1e3:.3f} us: one trivial kernel in the same mode)"
        )
    return None


@dataclass(frozen=True)
class Plan:
    """How an op is timed: the timed call, the calls in it, the graph of flushes subtracted
    from it (cold-L2 graph mode), whether it is a graph, and why not when capture failed."""

    run: Callable[[], None]
    iters: int
    baseline: Callable[[], None] | None
    graph: bool
    fallback: str | None = None


@dataclass
class Collected:
    """The kept samples of one measurement (per-call ms) and what was read beside them."""

    out: list[float] = field(default_factory=list)
    clocks: list[float] = field(default_factory=list)
    host: list[float] = field(default_factory=list)
    flush: list[float] = field(default_factory=list)
    dropped: int = 0
    #: the flags these samples added (a discarded collection's are relabelled, not kept as is)
    notes: list[str] = field(default_factory=list)
