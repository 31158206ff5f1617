"""Timing engines: how one callable is turned into a time in milliseconds.

An engine is chosen once per campaign and recorded in the manifest, so every round of a
campaign is timed the same way. Two engines ship:

* ``perf_counter`` -- the seed's hand-rolled loop: ``time.perf_counter`` around a batch of calls,
  with a device synchronize before and after when the device is a GPU. Works on the CPU (the
  only engine there). Each sample is the mean of one batch; the batch size is calibrated so a
  sample lasts at least ``min_sample_ms``.
* ``cuda_events`` -- CUDA events around each call, with an L2 flush (a write over a buffer of
  twice the L2 size) between samples so every sample starts with a cold cache.

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


class CudaEventEngine(TimingEngine):
    """CUDA events around each call, L2 flushed between samples."""

    name = "cuda_events"

    def __init__(
        self,
        device: str = "cuda",
        warmup_ms: float = 25.0,
        samples: int = 30,
        flush_l2: bool = True,
    ) -> None:
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
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
        self._flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.int8, device=device)

    def measure(self, fn: Callable[[], Any], hooks: SampleHooks | None = None) -> Timing:
        hooks = hooks or SampleHooks()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = 0
        while (time.perf_counter() - t0) * 1e3 < self.warmup_ms or n < 2:
            fn()
            n += 1
            torch.cuda.synchronize()
        out = []
        for i in range(self.samples):
            hooks.before_sample(i)
            if self.flush_l2:
                self._flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end))
            hooks.after_sample(i)
        return _summary(out, self.name)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "device": self.device,
            "warmup_ms": self.warmup_ms,
            "samples": self.samples,
            "flush_l2_bytes": int(self._flush.numel()) if self.flush_l2 else 0,
        }


ENGINES: dict[str, type[TimingEngine]] = {
    PerfCounterEngine.name: PerfCounterEngine,
    CudaEventEngine.name: CudaEventEngine,
}


def default_engine_name() -> str:
    """``cuda_events`` on a GPU machine, ``perf_counter`` on the CPU."""
    return CudaEventEngine.name if torch.cuda.is_available() else PerfCounterEngine.name


def make_engine(name: str, params: dict[str, Any] | None = None) -> TimingEngine:
    """Build a named engine; unknown names or parameters are errors listing the allowed ones."""
    try:
        cls = ENGINES[name]
    except KeyError:
        raise RatchetError(f"unknown timing engine {name!r}; known: {sorted(ENGINES)}") from None
    try:
        return cls(**(params or {}))
    except TypeError as exc:
        allowed = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
        raise RatchetError(
            f"bad parameters for timing engine {name!r}: {exc}; allowed: {allowed}"
        ) from None
