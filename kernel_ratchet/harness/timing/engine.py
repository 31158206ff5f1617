"""The timing-engine contract: what an engine is given, what it returns, and its sample hooks.

Engines accept optional :class:`SampleHooks`, called around every sample outside the timed
region (the worker's anti-cheat uses them). Every engine reports the median of its samples and
their standard deviation, and describes itself (``describe()``) so the numbers it produced can
say how they were measured.
"""

from __future__ import annotations

import contextlib
import statistics
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch


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
    ``prelude`` (None here) is run before every timed call, its own time subtracted
    (:func:`prelude`).
    """

    prelude: Callable[[], Any] | None = None

    def before_sample(self, index: int) -> None:
        """Before sample ``index`` (0-based), after warm-up."""

    def after_sample(self, index: int) -> None:
        """After sample ``index`` has been timed and synchronized."""

    def batch(self, calls: int) -> None:
        """Each coming sample makes ``calls`` calls of the op, back to back (1 for a graph
        replay, whose calls run no Python)."""


class Fixed(SampleHooks):
    """``hooks`` as they are when a measurement starts: its methods bound now, so a method of
    their class replaced by a timed call (and put back by a later one) is never the one an
    engine calls between samples. Engines wrap their hooks in it before the first call."""

    def __init__(self, hooks: SampleHooks | None) -> None:
        hooks = hooks or SampleHooks()
        self.before_sample = hooks.before_sample  # type: ignore[method-assign]
        self.after_sample = hooks.after_sample  # type: ignore[method-assign]
        self.batch = getattr(hooks, "batch", None) or SampleHooks().batch  # type: ignore[method-assign]
        self.prelude = getattr(hooks, "prelude", None)


#: What runs before every timed call, outside the op (see :func:`prelude`), or None.
Prelude = Callable[[], Any] | None


def prelude(hooks: Any) -> Prelude:
    """What must run before every timed call, outside the op (``hooks.prelude``: an in-place
    op's inputs written back to their kept values), or None. Engines run it before each call
    and subtract its own time, measured alone the same way."""
    return getattr(hooks, "prelude", None)


def with_prelude(fn: Callable[[], Any], before: Callable[[], Any] | None) -> Callable[[], Any]:
    """``fn`` with ``before`` called ahead of every call (``fn`` itself without one)."""
    if before is None:
        return fn

    def call() -> None:
        before()
        fn()

    return call


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


def sync(device: str) -> None:
    """Wait for the device's queued work when ``device`` is a GPU; nothing on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def summarize(samples: list[float], name: str) -> Timing:
    """A :class:`Timing` of per-call ``samples`` (ms): their median and standard deviation."""
    std = statistics.stdev(samples) if len(samples) > 1 else 0.0
    return Timing(statistics.median(samples), std, tuple(samples), name)


@contextlib.contextmanager
def graph_mode(engine: Any, mode: str | None) -> Iterator[None]:
    """Within the block, ``engine`` (one that chooses between CUDA graphs and eager calls: a
    ``graph`` attribute of ``"auto"`` or ``"on"``) uses ``mode`` (``"on"``/``"off"``); any
    other engine, an engine set to ``"off"``, or ``mode`` None: unchanged. A paired A/B pins
    the mode its first timing of a shape chose, so both sides measure the same quantity."""
    if mode not in ("on", "off") or getattr(engine, "graph", "off") == "off":
        yield
        return
    before = engine.graph
    engine.graph = mode
    try:
        yield
    finally:
        engine.graph = before
