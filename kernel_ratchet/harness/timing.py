"""Timing engines: how one callable is turned into a time in milliseconds.

An engine is chosen once per campaign and recorded in the manifest, so every round of a
campaign is timed the same way. Two engines ship:

* ``perf_counter`` -- the seed's hand-rolled loop: ``time.perf_counter`` around a batch of calls,
  with a device synchronize before and after when the device is a GPU. Works on the CPU (the
  only engine there). Each sample is the mean of one batch; the batch size is calibrated so a
  sample lasts at least ``min_sample_ms``.
* ``cuda_events`` -- CUDA events around one short timed call (~75 ms of calls) per sample, an
  L2 flush (a write over twice the L2 size) before each, warm-up until the SM clock settles,
  throttled samples re-taken, a CUDA graph for ops under ~20 us, the whole device synchronized
  before the end event. See :class:`kernel_ratchet.harness.timing_cuda.CudaEventEngine` (its
  own module: it builds on the types here).

Engines accept optional :class:`SampleHooks`, called around every sample outside the timed
region (the worker's anti-cheat uses them).

Both report the median of the samples and their standard deviation. Every engine describes
itself (``describe()``) so the numbers it produced can say how they were measured.
"""

from __future__ import annotations

import inspect
import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from kernel_ratchet.errors import RatchetError


@dataclass(frozen=True)
class Timing:
    """Result of timing one callable: per-call milliseconds.

    ``clock_mhz`` is the SM clock read after each kept sample (empty when unknown),
    ``dropped`` the number of samples discarded as throttled, ``flags`` readable warnings
    (e.g. event time much shorter than host time), ``details`` engine-specific facts of this
    measurement (mode, iterations per sample, flush cost).
    """

    median_ms: float
    stddev_ms: float
    samples_ms: tuple[float, ...]
    engine: str
    clock_mhz: tuple[float, ...] = ()
    dropped: int = 0
    flags: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


class SampleHooks:
    """Called by an engine around each sample, outside the timed region.

    The worker uses them for anti-cheat: poison the previous outputs and rebind inputs before
    a sample, check the outputs of the sample's last call after it. The default does nothing.
    """

    def before_sample(self, index: int) -> None:
        """Before sample ``index`` (0-based), after warm-up."""

    def after_sample(self, index: int) -> None:
        """After sample ``index`` has been timed and synchronized."""


class TimingEngine(ABC):
    """Contract: ``measure(fn)`` calls ``fn()`` (no arguments) and returns per-call times.

    ``fn`` must be safe to call repeatedly. Engines warm up first (compilation, caches,
    clocks) and never count warm-up calls.
    """

    name: ClassVar[str]

    @abstractmethod
    def measure(self, fn: Callable[[], Any], hooks: SampleHooks | None = None) -> Timing:
        """Time ``fn``; ``hooks`` (optional) run around every sample, untimed."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Engine name and parameters, for the manifest and provenance."""


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _summary(samples: list[float], name: str) -> Timing:
    std = statistics.stdev(samples) if len(samples) > 1 else 0.0
    return Timing(statistics.median(samples), std, tuple(samples), name)


class PerfCounterEngine(TimingEngine):
    """The seed's loop: host clock around a synchronized batch of calls."""

    name = "perf_counter"

    def __init__(
        self,
        device: str = "cpu",
        warmup: int = 2,
        samples: int = 10,
        min_sample_ms: float = 1.0,
        max_batch: int = 1000,
    ) -> None:
        if samples < 2:
            raise RatchetError("perf_counter engine needs samples >= 2 to report a stddev")
        self.device, self.warmup, self.samples = device, warmup, samples
        self.min_sample_ms, self.max_batch = min_sample_ms, max_batch

    def measure(self, fn: Callable[[], Any], hooks: SampleHooks | None = None) -> Timing:
        hooks = hooks or SampleHooks()
        for _ in range(self.warmup):
            fn()
        _sync(self.device)
        t0 = time.perf_counter()
        fn()
        _sync(self.device)
        one_ms = (time.perf_counter() - t0) * 1e3
        batch = max(1, min(self.max_batch, int(self.min_sample_ms / max(one_ms, 1e-6)) + 1))
        out = []
        for i in range(self.samples):
            hooks.before_sample(i)
            _sync(self.device)
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            _sync(self.device)
            out.append((time.perf_counter() - t0) * 1e3 / batch)
            hooks.after_sample(i)
        return _summary(out, self.name)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "device": self.device,
            "warmup": self.warmup,
            "samples": self.samples,
            "min_sample_ms": self.min_sample_ms,
        }


# -- CUDA event engine: pure helpers (tested on the CPU) ------------------------------------------


def iterations_for(target_ms: float, per_call_ms: float, min_iters: int, max_iters: int) -> int:
    """Calls in one timed call so that it lasts about ``target_ms`` (clamped to the bounds)."""
    if not per_call_ms > 0:
        return max_iters
    return max(min_iters, min(max_iters, round(target_ms / per_call_ms)))


def engines() -> dict[str, type[TimingEngine]]:
    """Every engine by name. The CUDA engine's module is imported here rather than at the top
    because it builds on this one."""
    from kernel_ratchet.harness.timing_cuda import CudaEventEngine

    return {PerfCounterEngine.name: PerfCounterEngine, CudaEventEngine.name: CudaEventEngine}


def default_engine_name() -> str:
    """``cuda_events`` on a GPU machine, ``perf_counter`` on the CPU."""
    return "cuda_events" if torch.cuda.is_available() else PerfCounterEngine.name


def make_engine(name: str, params: dict[str, Any] | None = None) -> TimingEngine:
    """Build a named engine; unknown names or parameters are errors listing the allowed ones."""
    known = engines()
    try:
        cls = known[name]
    except KeyError:
        raise RatchetError(f"unknown timing engine {name!r}; known: {sorted(known)}") from None
    try:
        return cls(**(params or {}))
    except TypeError as exc:
        allowed = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
        raise RatchetError(
            f"bad parameters for timing engine {name!r}: {exc}; allowed: {allowed}"
        ) from None
