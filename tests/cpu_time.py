"""CPU time of a call for the tests that check how work grows with input size."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable


def best_cpu_seconds(fn: Callable[[], object], repeats: int = 3) -> float:
    """Best-of-``repeats`` CPU time of ``fn()`` (CPU time, so other processes do not count),
    with the garbage collector off: its pauses depend on everything else alive in the test
    process and swung a 4x-input ratio from 2.6x to 7.3x; without them it read 4.0-4.3x."""
    best = math.inf
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            fn()
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
    return best
