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
from kernel_ratchet.harness.timing import cuda_support, engine, graphs, sampling
from kernel_ratchet.harness.timing import quantity as quantity_mod


class CudaEventEngine(engine.TimingEngine):
    """CUDA events around the op only, clocks watched, in the mode the measured quantity asks.

    ``quantity``/``l2`` (see :mod:`.quantity`) pick the mode: ``kernel_time`` replays a CUDA
    graph of many calls (``l2="cold"``: an L2 flush before every call inside the graph, and a
    graph of as many flushes timed in the same sample and subtracted), ``step_time`` times
    eager calls back to back. Without them, ``graph`` decides (``"auto"``: graphs for ops
    under ``graph_below_us``). Per ``measure``:

    1. Persisting L2 reset (:func:`reset_persisting_l2`).
    2. Warm-up: eager calls for at least ``warmup_ms`` and until the SM clock settled (the last
       ``settle_window`` readings within ``settle_tol_mhz``, read through pynvml), at most
       ``settle_max_ms``. Without pynvml the warm-up is time-based: ``fallback_warmup_ms``.
       The warm-up also estimates the per-call time.
    3. Mode: ``iters`` calls (at most ``max_graph_iters``) as replays of a CUDA graph of
       about 5 ms of them (:func:`graphs.chunked`), or ``iters`` eager calls back to back.
       The op's device time, which sizes ``iters``, is measured with the GPU kept busy by a
       ``torch.cuda._sleep`` ahead of it, so host launch overhead does not hide a small op
       (``graph="off"`` skips that probe and uses the warm-up's time). An op that cannot be
       captured (host synchronisation, data-dependent shapes, CPU work) is timed in eager
       back-to-back batches instead: the fallback is flagged and kept in the details.
    4. One sample = one timed call of ``iters`` calls lasting about ``sample_ms``: the L2 is
       flushed (``2 x L2``) before it when ``flush_l2``, the start event is recorded right
       before the first call, the whole device is synchronized (so work on any side stream is
       counted) before the end event. The sample is the timed call's time divided by
       ``iters``; per-call times inside it are never independent samples.
    5. The SM clock is read while each sample runs; a sample more than ``throttle_tol`` below
       the settled clock is dropped and re-taken (at most ``samples`` extra; if that is not
       enough, the throttled ones are kept and flagged). In cold-L2 graph mode a sample is
       the difference of two timed replays (the op with a flush before every call, then the
       flushes alone): a disturbance of either moves it by the flushes' error, several times
       a short op's time (H200: one 50 ms sample of a 13 us norm read 29 us). Where the
       flushes outlast the op, samples over ``sampling.AGREE_TOL`` apart get more (median kept).
    6. Host time around each timed call is compared with the event time: event time under
       ``host_ratio`` x host time is flagged (see :func:`host_crosscheck`).
    7. A sample at or below 0 ms, or a median under half the launch floor (one trivial kernel
       in the same mode, :func:`.graphs.launch_floor_ms`), is a RatchetError, never a time.
    """

    name = "cuda_events"
    GRAPH_MODES = ("auto", "on", "off")
    #: Graphs of the op this engine captured. The worker's sample hooks read it on the engine,
    #: which the op cannot import (a module's counter, the op could bump).
    captures: int

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
        quantity: str | None = None,
        l2: str | None = None,
    ) -> None:
        self.measured = quantity_mod.engine_measure(quantity, l2)
        if self.measured is not None:  # the quantity decides the mode and the L2 state
            kernel = self.measured.quantity == "kernel_time"
            graph = "on" if kernel else "off"
            flush_l2 = self.measured.l2 == "cold" if kernel else flush_l2
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
        self.device, self.warmup_ms, self.samples, self.captures = device, warmup_ms, samples, 0
        self.flush_l2, self.sample_ms = flush_l2, sample_ms
        self.min_iters, self.max_iters = min_iters, max_iters
        self.settle_window, self.settle_tol_mhz = settle_window, settle_tol_mhz
        self.settle_max_ms, self.fallback_warmup_ms = settle_max_ms, fallback_warmup_ms
        self.throttle_tol, self.graph, self.graph_below_us = throttle_tol, graph, graph_below_us
        self.host_ratio, self.max_graph_iters = host_ratio, max_graph_iters
        if graph != "off":
            graphs.use_capture_stream()  # the op's forwards run where its backward is captured
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        self._flush = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.int8, device=device)
        self._clock = cuda_support.nvml_sm_clock(device)
        self._floors: dict[bool, float] = {}

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

    def _eager(self, fn: Callable[[], Any], est_ms: float, prelude: engine.Prelude = None):
        """(timed call, calls in it, baseline): ``fn`` back to back, about ``sample_ms`` long;
        with a ``prelude`` (already inside ``fn``), as many preludes alone, subtracted."""
        iters = cuda_support.iterations_for(self.sample_ms, est_ms, self.min_iters, self.max_iters)

        def run() -> None:
            for _ in range(iters):
                fn()

        def base() -> None:
            for _ in range(iters):
                prelude()

        return run, iters, base if prelude is not None else None

    def _graphed(
        self, fn: Callable[[], Any], device_ms: float, prelude: engine.Prelude = None
    ) -> graphs.Plan:
        """Replays of a CUDA graph of ``fn`` calls (each after an L2 flush when ``flush_l2``),
        about ``sample_ms`` long in all, and as many replays of a graph of the same number of
        flushes (and ``prelude`` calls, already inside ``fn``), subtracted. Raises whatever a
        failed capture raises."""
        flush = self._flush.zero_
        flush_est = graphs.events_ms(flush) if self.flush_l2 else 0.0
        iters = cuda_support.iterations_for(
            self.sample_ms, device_ms + flush_est, self.min_iters, self.max_graph_iters
        )
        per, times = graphs.chunked(iters, device_ms + flush_est)

        def body() -> None:
            if self.flush_l2:
                flush()
            fn()

        def overhead() -> None:
            if self.flush_l2:
                flush()
            if prelude is not None:
                prelude()

        # what is subtracted is replayed exactly as the timed calls are
        subtract = self.flush_l2 or prelude is not None
        base = graphs.replays(graphs.capture(overhead, per), times) if subtract else None
        replay = graphs.capture(body, per)
        self.captures += 1
        return graphs.Plan(graphs.replays(replay, times), per * times, base, True)

    def _plan(self, fn: Callable[[], Any], device_ms: float, est_ms: float, prelude=None):
        """How ``fn`` is timed (step 3): a graph, or eager calls (also when capture fails)."""
        if cuda_support.choose_graph(self.graph, device_ms * 1e3, self.graph_below_us):
            try:
                return self._graphed(fn, device_ms, prelude)
            except Exception as exc:  # capture is not possible for every op: time it eagerly
                engine.sync(self.device)
                why = f"CUDA graph capture failed ({type(exc).__name__}: {str(exc)[:160]})"
                return graphs.Plan(*self._eager(fn, est_ms, prelude), False, why)
        return graphs.Plan(*self._eager(fn, est_ms, prelude), False)

    def _floor(self, graph: bool) -> float:
        if graph not in self._floors:
            self._floors[graph] = graphs.launch_floor_ms(graph, self.device)
        return self._floors[graph]

    # -- the measurement --

    def measure(
        self, fn: Callable[[], Any], hooks: engine.SampleHooks | None = None
    ) -> engine.Timing:
        hooks = engine.Fixed(hooks)  # bound before the first call of the op
        flags: list[str] = []
        prelude = engine.prelude(hooks)
        fn = engine.with_prelude(fn, prelude)
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
        plan = self._plan(fn, device_ms, est_ms, prelude)
        if plan.fallback:
            flags.append(f"{plan.fallback}: timed as back-to-back eager calls, launches included")
        got = self._collect(plan, settled_mhz, hooks, flags)
        plan, got, floor = self._guarded(fn, plan, got, est_ms, settled_mhz, hooks, flags, prelude)
        details.update(
            mode="graph" if plan.graph else "eager",
            quantity=self._what(plan),
            fallback=plan.fallback,
            launch_floor_ms=floor,
            iters_per_sample=plan.iters,
            flush_ms_per_iter=statistics.median(got.flush) if got.flush else 0.0,
            persisting_l2_reset=l2_reset,
            settled_clock_mhz=settled_mhz,
            host_ms_per_call=got.host,
        )
        t = engine.summarize(got.out, self.name)
        return engine.Timing(
            t.median_ms,
            t.stddev_ms,
            t.samples_ms,
            self.name,
            tuple(got.clocks),
            got.dropped,
            tuple(flags),
            details,
        )

    def _guarded(
        self,
        fn: Callable[[], Any],
        plan: graphs.Plan,
        got: graphs.Collected,
        est_ms: float,
        settled_mhz: float | None,
        hooks: engine.SampleHooks,
        flags: list[str],
        prelude: engine.Prelude = None,
    ) -> tuple[graphs.Plan, graphs.Collected, float]:
        """(plan, samples, launch floor) once the samples are a time (step 7): raises
        RatchetError when they are not one."""
        floor = self._floor(plan.graph)
        why = graphs.below_floor(got.out, floor)
        if why and plan.graph and self.measured is None:
            # graph mode chosen by size, not by the profile: an op lost in the flush
            # subtraction is timed eagerly instead (flagged); the eager reading is guarded too
            # the graph samples' own flags describe samples no longer kept: say so
            flags[:] = [f"discarded graph samples: {f}" if f in got.notes else f for f in flags]
            flags.append(f"graph timing ill-conditioned ({why}): timed eagerly")
            plan = graphs.Plan(
                *self._eager(fn, est_ms, prelude), False, "graph timing ill-conditioned"
            )
            got = self._collect(plan, settled_mhz, hooks, flags)
            floor = self._floor(False)
            why = graphs.below_floor(got.out, floor)
        if why:
            raise RatchetError(
                f"{self._what(plan)} is not a time: {why}. The timed region holds no GPU work "
                "of the op (a graph that captured nothing, a returned cached result, work on "
                "an unsynchronized stream) or the op is too small for this quantity"
                + (": measure it with l2: warm" if self.flush_l2 and plan.graph else "")
            )
        return plan, got, floor

    def _what(self, plan: graphs.Plan) -> str:
        """The quantity this plan measured, named."""
        if plan.graph:
            l2 = "cold L2 (flushed per call)" if self.flush_l2 else "warm L2"
            return f"kernel GPU time, CUDA-graph replay, {l2}"
        return quantity_mod.Measure("step_time", "warm").label()

    def _collect(
        self,
        plan: graphs.Plan,
        settled_mhz: float | None,
        hooks: engine.SampleHooks,
        flags: list[str],
    ) -> graphs.Collected:
        """``self.samples`` per-call times of ``plan`` (step 5: :func:`.sampling.collect`)."""
        hooks.batch(1 if plan.graph else plan.iters)
        return sampling.collect(self, plan, settled_mhz, hooks, flags)

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
            "quantity": self.measured.to_dict() if self.measured else None,
            "graph_below_us": self.graph_below_us,
            "max_graph_iters": self.max_graph_iters,
            "host_ratio": self.host_ratio,
            "sm_clock_source": "pynvml" if self._clock else "none (time-based warm-up)",
            "gpu": torch.cuda.get_device_name(self.device),
        }
