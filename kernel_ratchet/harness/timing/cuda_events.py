"""The ``cuda_events`` timing engine (:class:`CudaEventEngine`).

Its pure helpers and device probes are in :mod:`.cuda_support`, called through that module
(``cuda_support.per_call_ms``), not imported by name: the worker's
:class:`~kernel_ratchet.harness.anticheat.Sentinel` watches the functions a module defines, so a
patch of the helper the engine really calls is then always seen.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.timing import cuda_support, engine

#: Graph mode subtracts the L2-flush cost; a result under this fraction of it is noise.
GRAPH_MIN_FRACTION = 0.05


class CudaEventEngine(engine.TimingEngine):
    """CUDA events around the op only, cold L2 at every sample, clocks watched.

    Per ``measure``:

    1. Persisting L2 reset (:func:`reset_persisting_l2`).
    2. Warm-up: eager calls for at least ``warmup_ms`` and until the SM clock settled (the last
       ``settle_window`` readings within ``settle_tol_mhz``, read through pynvml), at most
       ``settle_max_ms``. Without pynvml the warm-up is time-based: ``fallback_warmup_ms``.
       The warm-up also estimates the per-call time.
    3. Mode: ``graph="auto"`` captures a CUDA graph of ``iters`` x (L2 flush, op) for ops under
       ``graph_below_us`` and subtracts the flush cost (measured the same way, a graph of 50
       flushes; ``iters`` then counts flush + op and is at most ``max_graph_iters``); larger
       ops run eagerly, ``iters`` calls back to back. A failed capture falls back to eager
       (flagged). The op's device time for this choice is measured with the GPU kept busy by
       a ``torch.cuda._sleep`` ahead of it, so host launch overhead does not hide a small op
       (``graph="off"`` skips that probe and sizes the timed calls from the warm-up's time).
    4. One sample = one timed call of ``iters`` calls lasting about ``sample_ms``: the L2 is
       flushed (``2 x L2``) before it, the start event is recorded right before the first call,
       the whole device is synchronized (so work on any side stream is counted) before the end
       event. The sample is the timed call's time divided by ``iters``; per-call times inside it
       are never independent samples. Eager calls after the first of a timed call see a warm
       L2 (steady-state throughput); graph mode flushes before every call.
    5. The SM clock is read while each sample runs; a sample more than ``throttle_tol`` below
       the settled clock is dropped and re-taken (at most ``samples`` extra; if that is not
       enough, the throttled ones are kept and flagged).
    6. Host time around each timed call is compared with the event time: event time under
       ``host_ratio`` x host time is flagged (see :func:`host_crosscheck`).
    """

    name = "cuda_events"
    GRAPH_MODES = ("auto", "on", "off")

    def __init__(
        self,
        device: str = "cuda",
        warmup_ms: float = 25.0,
        samples: int = 30,
        flush_l2: bool = True,
        sample_ms: float = 75.0,
        min_iters: int = 1,
        max_iters: int = 100_000,
        settle_window: int = 5,
        settle_tol_mhz: float = 15.0,
        settle_max_ms: float = 3000.0,
        fallback_warmup_ms: float = 300.0,
        throttle_tol: float = 0.05,
        graph: str = "auto",
        graph_below_us: float = 20.0,
        max_graph_iters: int = 2000,
        host_ratio: float = 0.5,
    ) -> None:
        if samples < 2:
            raise RatchetError("cuda_events engine needs samples >= 2 to report a stddev")
        if not 0 < sample_ms <= 10_000:
            raise RatchetError("cuda_events sample_ms must be in (0, 10000] ms (50-100 advised)")
        if not 1 <= min_iters <= min(max_iters, max_graph_iters):
            raise RatchetError("cuda_events needs 1 <= min_iters <= max_iters, max_graph_iters")
        if graph not in self.GRAPH_MODES:
            raise RatchetError(
                f"cuda_events graph must be one of {self.GRAPH_MODES}, not {graph!r}"
            )
        if not 0 <= throttle_tol < 1 or not 0 < host_ratio <= 1 or settle_window < 2:
            raise RatchetError(
                "cuda_events needs 0 <= throttle_tol < 1, 0 < host_ratio <= 1, settle_window >= 2"
            )
        if min(warmup_ms, settle_max_ms, fallback_warmup_ms, settle_tol_mhz, graph_below_us) < 0:
            raise RatchetError("cuda_events durations and tolerances must be >= 0")
        if not torch.cuda.is_available():
            raise RatchetError(
                "cuda_events timing needs a CUDA GPU; use the perf_counter engine on the CPU"
            )
        self.device, self.warmup_ms, self.samples, self.flush_l2 = (
            device,
            warmup_ms,
            samples,
            flush_l2,
        )
        self.sample_ms, self.min_iters, self.max_iters = sample_ms, min_iters, max_iters
        self.settle_window, self.settle_tol_mhz = settle_window, settle_tol_mhz
        self.settle_max_ms, self.fallback_warmup_ms = settle_max_ms, fallback_warmup_ms
        self.throttle_tol, self.graph, self.graph_below_us = throttle_tol, graph, graph_below_us
        self.host_ratio, self.max_graph_iters = host_ratio, max_graph_iters
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        self._flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.int8, device=device)
        self._clock = cuda_support.nvml_sm_clock(device)

    # -- pieces --

    def _warmup(self, fn: Callable[[], Any]) -> tuple[float, float | None, dict[str, Any]]:
        """(per-call ms estimate, settled SM clock or None, facts) after warming up."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        calls, clocks, batch = 0, [], 1
        limit = self.settle_max_ms if self._clock else max(self.warmup_ms, self.fallback_warmup_ms)
        while True:
            b0 = time.perf_counter()
            for _ in range(batch):
                fn()
            torch.cuda.synchronize()
            one_ms = (time.perf_counter() - b0) * 1e3 / batch
            calls += batch
            batch = cuda_support.iterations_for(
                10.0, one_ms, 1, 10_000
            )  # ~10 ms between clock readings
            if self._clock and (c := self._clock()) is not None:
                clocks.append(c)
            elapsed = (time.perf_counter() - t0) * 1e3
            settled = cuda_support.clock_settled(clocks, self.settle_window, self.settle_tol_mhz)
            done = bool(self._clock) and settled and elapsed >= self.warmup_ms
            if calls >= 2 and (done or elapsed >= limit):
                break
        ref = statistics.median(clocks[-self.settle_window :]) if clocks else None
        facts = {
            "warmup_ms_spent": round(elapsed, 1),
            "warmup_calls": calls,
            "clock_settled": settled if self._clock else None,
        }
        return one_ms, ref, facts

    def _device_ms(self, fn: Callable[[], Any], host_ms: float) -> float:
        """Device time of one call: events around it while a sleep kernel queued ahead keeps
        the GPU busy during the launch (median of 5). Falls back to ``host_ms``."""
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is None:
            return host_ms
        times = []
        for _ in range(5):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            sleep(2_000_000)  # ~1 ms at 2 GHz: longer than any launch overhead
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    def _timed(self, run: Callable[[], None]) -> tuple[float, float, float | None]:
        """(event ms, host ms, SM clock read while it ran) of one timed call."""
        if self.flush_l2:
            self._flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        start.record()
        run()
        clock = self._clock() if self._clock else None  # the device is still busy here
        torch.cuda.synchronize()  # whole device: side-stream work lands inside the events
        end.record()
        end.synchronize()
        host_ms = (time.perf_counter() - h0) * 1e3
        return start.elapsed_time(end), host_ms, clock

    def _graph(self, body: Callable[[], None], iters: int) -> Callable[[], None]:
        g = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            body()  # warm-up on the capture stream (lazy inits must not happen in capture)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for _ in range(iters):
                body()
        torch.cuda.synchronize()
        return g.replay

    def _eager(self, fn: Callable[[], Any], est_ms: float) -> tuple[Callable[[], None], int]:
        """(timed call, calls in it): ``fn`` back to back, about ``sample_ms`` long."""
        iters = cuda_support.iterations_for(self.sample_ms, est_ms, self.min_iters, self.max_iters)

        def run() -> None:
            for _ in range(iters):
                fn()

        return run, iters

    def _graphed(
        self, fn: Callable[[], Any], device_ms: float
    ) -> tuple[Callable[[], None], int, float]:
        """(graph replay, calls in it, flush ms per call): a CUDA graph of (L2 flush, ``fn``)
        pairs, about ``sample_ms`` long. Raises whatever a failed capture raises."""
        flush = self._flush.zero_
        flush_each = self._flush_cost(flush, 50) if self.flush_l2 else 0.0
        iters = cuda_support.iterations_for(
            self.sample_ms, device_ms + flush_each, self.min_iters, self.max_graph_iters
        )

        def body() -> None:
            if self.flush_l2:
                flush()
            fn()

        return self._graph(body, iters), iters, flush_each

    def _plan(
        self, fn: Callable[[], Any], device_ms: float, est_ms: float, flags: list[str]
    ) -> tuple[Callable[[], None], int, float, bool]:
        """(timed call, calls in it, flush ms per call, graph mode) for ``fn`` (step 3)."""
        if cuda_support.choose_graph(self.graph, device_ms * 1e3, self.graph_below_us):
            try:
                return (*self._graphed(fn, device_ms), True)
            except Exception as exc:  # capture is not possible for every op: time it eagerly
                flags.append(f"CUDA graph capture failed, timed eagerly ({type(exc).__name__})")
        return (*self._eager(fn, est_ms), 0.0, False)

    # -- the measurement --

    def measure(
        self, fn: Callable[[], Any], hooks: engine.SampleHooks | None = None
    ) -> engine.Timing:
        hooks = hooks or engine.SampleHooks()
        flags: list[str] = []
        l2_reset = cuda_support.reset_persisting_l2()
        host_est_ms, settled_mhz, details = self._warmup(fn)
        if details["clock_settled"] is False:
            flags.append(f"SM clock did not settle within {self.settle_max_ms:g} ms of warm-up")
        # The device-time probe only serves the graph choice: with graph mode off it would
        # cost 5 more calls per measurement (250 ms on a 50 ms backward) for nothing.
        probe = self.graph != "off"
        device_ms = self._device_ms(fn, host_est_ms) if probe else host_est_ms
        details["device_ms_estimate"] = device_ms
        details["device_ms_source"] = "event probe behind a sleep" if probe else "warm-up"
        est_ms = max(host_est_ms, device_ms)  # an eager timed call lasts as long as the slower
        run, iters, flush_each, use_graph = self._plan(fn, device_ms, est_ms, flags)
        out, clocks, host, dropped = self._collect(
            run, iters, flush_each, settled_mhz, hooks, flags
        )
        if use_graph and statistics.median(out) <= GRAPH_MIN_FRACTION * flush_each:
            # the op is lost in the flush-cost subtraction (an op of ~10 us, a small GEMM on an
            # H200, reads 0 ms): time it eagerly instead of reporting a number that means nothing
            flags.append("graph timing ill-conditioned (op << L2 flush): timed eagerly")
            use_graph, flush_each = False, 0.0
            run, iters = self._eager(fn, est_ms)
            out, clocks, host, dropped = self._collect(run, iters, 0.0, settled_mhz, hooks, flags)
        details.update(
            mode="graph" if use_graph else "eager",
            iters_per_sample=iters,
            flush_ms_per_iter=flush_each,
            persisting_l2_reset=l2_reset,
            settled_clock_mhz=settled_mhz,
            host_ms_per_call=host,
        )
        t = engine.summarize(out, self.name)
        return engine.Timing(
            t.median_ms,
            t.stddev_ms,
            t.samples_ms,
            self.name,
            tuple(clocks),
            dropped,
            tuple(flags),
            details,
        )

    def _collect(
        self,
        run: Callable[[], None],
        iters: int,
        flush_each: float,
        settled_mhz: float | None,
        hooks: engine.SampleHooks,
        flags: list[str],
    ) -> tuple[list[float], list[float], list[float], int]:
        """``self.samples`` per-call times of ``run`` (throttled samples re-taken)."""
        out: list[float] = []
        clocks: list[float] = []
        host: list[float] = []
        dropped = 0
        attempts = 0
        while len(out) < self.samples:
            hooks.before_sample(attempts)
            ev_ms, host_ms, clock = self._timed(run)
            hooks.after_sample(attempts)
            attempts += 1
            throttled = cuda_support.is_throttled(clock, settled_mhz, self.throttle_tol)
            if throttled and dropped < self.samples:
                dropped += 1
                continue
            if throttled:
                flags.append(f"sample {attempts - 1} kept although throttled ({clock:.0f} MHz)")
            note = cuda_support.host_crosscheck(ev_ms, host_ms, self.host_ratio, min_host_ms=1.0)
            if note and note not in flags:
                flags.append(note)
            out.append(cuda_support.per_call_ms(ev_ms, iters, flush_each))
            if out[-1] <= 0.0 and "flush subtraction" not in " ".join(flags):
                flags.append("flush subtraction left <= 0 ms: the op is too small to time cold")
            host.append(host_ms / iters)
            if clock is not None:
                clocks.append(clock)
        return out, clocks, host, dropped

    def _flush_cost(self, flush: Callable[[], Any], iters: int) -> float:
        """Median ms of one L2 flush inside a graph of ``iters`` flushes (3 timed replays)."""
        replay = self._graph(flush, iters)
        costs = []
        for _ in range(3):
            ev_ms, _, _ = self._timed(replay)
            costs.append(ev_ms / iters)
        return statistics.median(costs)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "device": self.device,
            "warmup_ms": self.warmup_ms,
            "samples": self.samples,
            "flush_l2_bytes": int(self._flush.numel()) if self.flush_l2 else 0,
            "sample_ms": self.sample_ms,
            "min_iters": self.min_iters,
            "max_iters": self.max_iters,
            "settle_window": self.settle_window,
            "settle_tol_mhz": self.settle_tol_mhz,
            "settle_max_ms": self.settle_max_ms,
            "fallback_warmup_ms": self.fallback_warmup_ms,
            "throttle_tol": self.throttle_tol,
            "graph": self.graph,
            "graph_below_us": self.graph_below_us,
            "max_graph_iters": self.max_graph_iters,
            "host_ratio": self.host_ratio,
            "sm_clock_source": "pynvml" if self._clock else "none (time-based warm-up)",
            "gpu": torch.cuda.get_device_name(self.device),
        }
