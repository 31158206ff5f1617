"""The ``perf_counter`` timing engine: the host clock around a synchronized batch of calls.

Works on the CPU (the only engine there) and on a GPU, with a device synchronize before and
after every batch. Each sample is the mean of one batch; the batch size is calibrated so a
sample lasts at least ``min_sample_ms``.

The shared helpers are called through their module (``engine.summarize``), not imported by
name: the worker's :class:`~kernel_ratchet.harness.anticheat.Sentinel` watches the functions a
module defines, so a patch of the helper the engine really calls is then always seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness.timing import engine


class PerfCounterEngine(engine.TimingEngine):
    """Host clock around a synchronized batch of calls."""

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

    def measure(
        self, fn: Callable[[], Any], hooks: engine.SampleHooks | None = None
    ) -> engine.Timing:
        hooks = engine.Fixed(hooks)  # bound before the first call of the op
        before = engine.prelude(hooks)
        fn = engine.with_prelude(fn, before)
        for _ in range(self.warmup):
            fn()
        engine.sync(self.device)
        t0 = time.perf_counter()
        fn()
        engine.sync(self.device)
        one_ms = (time.perf_counter() - t0) * 1e3
        batch = max(1, min(self.max_batch, int(self.min_sample_ms / max(one_ms, 1e-6)) + 1))
        hooks.batch(batch)
        out = []
        for i in range(self.samples):
            hooks.before_sample(i)
            ms = self._batch_ms(fn, batch)
            hooks.after_sample(i)
            # the preludes' own time, from as many of them alone, is not the op's
            out.append(ms - (self._batch_ms(before, batch) if before is not None else 0.0))
        return engine.summarize(out, self.name)

    def _batch_ms(self, fn: Callable[[], Any], batch: int) -> float:
        """Per-call ms of ``batch`` back-to-back calls, synchronized before and after."""
        engine.sync(self.device)
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        engine.sync(self.device)
        return (time.perf_counter() - t0) * 1e3 / batch

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "device": self.device,
            "warmup": self.warmup,
            "samples": self.samples,
            "min_sample_ms": self.min_sample_ms,
        }
