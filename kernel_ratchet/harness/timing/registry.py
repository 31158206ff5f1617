"""Timing engines by name, imported on first use, and the one way to build one.

:data:`ENGINES` maps each engine's name to ``"module:attr"``; nothing is imported until an
engine is asked for, so adding an engine never makes this module import its dependencies.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

from kernel_ratchet.errors import RatchetError

if TYPE_CHECKING:
    from kernel_ratchet.harness.timing.engine import TimingEngine

ENGINES: dict[str, str] = {
    "perf_counter": "kernel_ratchet.harness.timing.perf_counter:PerfCounterEngine",
    "cuda_events": "kernel_ratchet.harness.timing.cuda_events:CudaEventEngine",
}


def _load(ref: str) -> type[TimingEngine]:
    module, attr = ref.split(":", 1)
    return getattr(importlib.import_module(module), attr)


def engines() -> dict[str, type[TimingEngine]]:
    """Every engine class by name (importing their modules)."""
    return {name: _load(ref) for name, ref in ENGINES.items()}


def default_engine_name() -> str:
    """``cuda_events`` on a GPU machine, ``perf_counter`` on the CPU."""
    import torch  # here, like the engines: naming the engines needs no torch

    return "cuda_events" if torch.cuda.is_available() else "perf_counter"


def make_engine(name: str, params: dict[str, Any] | None = None) -> TimingEngine:
    """Build a named engine; unknown names or parameters are errors listing the allowed ones."""
    if name not in ENGINES:
        raise RatchetError(f"unknown timing engine {name!r}; known: {sorted(ENGINES)}")
    cls = _load(ENGINES[name])
    try:
        return cls(**(params or {}))
    except TypeError as exc:
        allowed = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
        raise RatchetError(
            f"bad parameters for timing engine {name!r}: {exc}; allowed: {allowed}"
        ) from None
