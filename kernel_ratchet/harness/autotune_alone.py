"""Autotuning that a check did beside other GPU work, done again alone before timing.

A round's workers check their shapes while the focused test runs, the two sides of a shape at
once (:mod:`kernel_ratchet.harness.paired_checks`). A kernel under ``@triton.autotune`` picks
its config on its first call with a new key, by timing every config: picked beside other
work, the choice rests on contended timings, and a side could keep a slower config for all
its timed requests. So before a worker times anything after a check, the configs its
autotuners picked since it last timed are forgotten, and the timing request picks them again
on its own GPU (in its warm-up), as a training process does. Keys picked during timing
requests, which run alone, are kept. An autotuner that keeps its choices on disk
(``cache_results``) reads them back instead of timing again.
"""

from __future__ import annotations

import gc
from typing import Any


def autotuners() -> list[Any]:
    """The Triton autotuners alive in this process (none without Triton)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - Triton is a dependency of every kernel we time
        return []
    # by type, not isinstance: a lazy proxy (torch.distributed.reduce_op) warns on __class__
    return [o for o in gc.get_objects() if issubclass(type(o), Autotuner)]


class TunedAlone:
    """What a worker's autotuners picked alone; :meth:`before_timing` forgets the rest."""

    def __init__(self) -> None:
        self.checked = False  # a check ran since the last timing request
        self.alone: dict[int, set[Any]] = {}  # id(autotuner) -> keys picked in timing requests
        self.tuners: list[Any] | None = None

    def after_check(self) -> None:
        self.checked = True

    def before_timing(self) -> int:
        """Forget the configs picked outside timing requests; the number forgotten."""
        if not self.checked:
            return 0
        self.checked = False
        self.tuners = autotuners()  # a check may have imported or built new ones
        forgotten = 0
        for tuner in self.tuners:
            cache = getattr(tuner, "cache", None)
            if not isinstance(cache, dict):
                continue
            kept = self.alone.get(id(tuner), set())
            for key in [k for k in cache if k not in kept]:
                del cache[key]
                forgotten += 1
        return forgotten

    def after_timing(self) -> None:
        """Record the keys the timing request picked (alone) as kept."""
        if self.tuners is None:
            self.tuners = autotuners()
        for tuner in self.tuners:
            cache = getattr(tuner, "cache", None)
            if isinstance(cache, dict):
                self.alone.setdefault(id(tuner), set()).update(cache)
