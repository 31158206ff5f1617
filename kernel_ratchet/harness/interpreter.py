"""What the Triton interpreter (``TRITON_INTERPRET=1``, CPU rehearsals) cannot do alone.

``@triton.autotune`` benchmarks its configs through the active GPU driver, which the
interpreter does not have (``0 active drivers``). :func:`install` gives the autotuner a
benchmarker that times nothing, so the first config is taken: a rehearsal exercises the
mechanics, and interpreter timings could not rank configs anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _no_bench(fn: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> Any:
    """Every config "takes" 0 ms: the autotuner keeps its first one."""
    return [0.0] * len(quantiles) if quantiles else 0.0


def install() -> None:
    """Make ``@triton.autotune`` work in the interpreter (idempotent)."""
    from triton.runtime import autotuner

    autotuner.Autotuner.do_bench = property(lambda self: _no_bench)  # type: ignore[assignment]
