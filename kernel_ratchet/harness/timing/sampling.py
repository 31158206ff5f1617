"""The samples of one :class:`~.cuda_events.CudaEventEngine` measurement (its step 5).

Each sample is one timed call of the plan; a sample taken while the SM clock sat more than
``throttle_tol`` below the settled clock is dropped and re-taken (at most ``samples`` extra,
then kept and flagged). With a flush baseline (cold-L2 graph mode) a sample subtracts the
flushes timed right after it, so a disturbance of either replay moves it by the flushes'
error, several times a short op's own time: on an H200, one of two 50 ms samples of a 13 us
RMS norm forward read 29 us where every other read 13 us (in requests that had just spent up
to a second on the host). Where the flushes a sample subtracts take longer than the op itself,
samples further apart than :data:`AGREE_TOL` get ``samples - 1`` more (at least one), and the
median is kept. A longer op's samples differ by its clock, which a third sample does not fix.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Protocol

from kernel_ratchet.harness.timing import cuda_support, engine, graphs


class Sampler(Protocol):
    """What sampling reads of its engine (a :class:`~.cuda_events.CudaEventEngine`)."""

    samples: int
    throttle_tol: float
    host_ratio: float

    def _timed(self, run: Callable[[], None]) -> tuple[float, float, float | None]:
        """(event ms, host ms, SM clock MHz or None) of one timed call of ``run``."""
        ...


#: Cold-L2 samples further apart than this fraction ((max - min) / min) get more.
AGREE_TOL = 0.02


def collect(
    eng: Sampler,
    plan: graphs.Plan,
    settled_mhz: float | None,
    hooks: engine.SampleHooks,
    flags: list[str],
) -> graphs.Collected:
    """``eng.samples`` per-call times of ``plan``, and more when cold-L2 samples disagree."""
    got = graphs.Collected()
    start = len(flags)
    attempts = _take(eng, plan, settled_mhz, hooks, flags, got, eng.samples, 0)
    spread = disagreement(got.out)
    if plan.baseline is not None and spread > AGREE_TOL and _flush_bound(got):
        extra = max(1, eng.samples - 1)
        flags.append(f"cold-L2 samples disagreed by {spread:.1%}: {extra} more taken, median kept")
        _take(eng, plan, settled_mhz, hooks, flags, got, len(got.out) + extra, attempts)
    got.notes = flags[start:]
    return got


def disagreement(samples_ms: list[float]) -> float:
    """How far apart a measurement's samples are: (max - min) / min (0 for fewer than two, or
    when a sample is not positive: the floor check says what is wrong with those)."""
    if len(samples_ms) < 2 or min(samples_ms) <= 0:
        return 0.0
    return (max(samples_ms) - min(samples_ms)) / min(samples_ms)


def _flush_bound(got: graphs.Collected) -> bool:
    """Whether the flushes subtracted per call take longer than the op's own time."""
    return bool(got.flush) and statistics.median(got.flush) > statistics.median(got.out)


def _take(
    eng: Sampler,
    plan: graphs.Plan,
    settled_mhz: float | None,
    hooks: engine.SampleHooks,
    flags: list[str],
    got: graphs.Collected,
    until: int,
    attempts: int,
) -> int:
    """Samples into ``got`` until it holds ``until``; returns the attempts made so far."""
    while len(got.out) < until:
        hooks.before_sample(attempts)
        ev_ms, host_ms, clock = eng._timed(plan.run)
        hooks.after_sample(attempts)
        attempts += 1
        throttled = cuda_support.is_throttled(clock, settled_mhz, eng.throttle_tol)
        if throttled and got.dropped < eng.samples:
            got.dropped += 1
            continue
        if throttled:
            flags.append(f"sample {attempts - 1} kept although throttled ({clock:.0f} MHz)")
        note = cuda_support.host_crosscheck(ev_ms, host_ms, eng.host_ratio, min_host_ms=1.0)
        if note and note not in flags:
            flags.append(note)
        base_ms = eng._timed(plan.baseline)[0] if plan.baseline else 0.0
        got.flush.append(base_ms / plan.iters)
        got.out.append(cuda_support.per_call_ms(ev_ms, plan.iters, base_ms))
        got.host.append(host_ms / plan.iters)
        if clock is not None:
            got.clocks.append(clock)
    return attempts
