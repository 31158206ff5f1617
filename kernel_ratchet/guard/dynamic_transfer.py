"""Dynamic transfer check: the judgement of the benchmark idiom against the training idiom.

A benchmark calls the op on the same tensor objects every iteration; training does not (SPEC
section 8). The harness times both idioms on one shape
(:func:`kernel_ratchet.harness.training_sim.trace_idioms`, also run by the worker for a
``transfer`` request); this module judges the traces. The gap is the median paired difference
per step and the noise estimate is
``max(3 · 1.4826 · MAD(differences) / sqrt(repeats), min_rel_gap · benchmark time)``. The
verdict is OVERFIT when the training idiom is slower by more than the noise, when the outputs
of one more untimed step of either idiom disagree with the reference, or when a cache
in the kernel modules hits on a fresh tensor's key, or hits on the weight right after its update
(a key without ``_version``), during the untimed training trace.

An adapter takes part by implementing
:class:`~kernel_ratchet.harness.training_sim.TrainingCase`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.guard.transfer_result import MIN_REL_GAP, OVERFIT, TRANSFERS, DynamicResult
from kernel_ratchet.harness.adapter import Adapter, Shape
from kernel_ratchet.harness.cache_probe import CacheStats
from kernel_ratchet.harness.timing.engine import TimingEngine
from kernel_ratchet.harness.training_sim import IdiomTraces, Timer, make_timer, trace_idioms


def _robust_sigma(xs: Sequence[float]) -> float:
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    if mad == 0 and len(xs) > 1:
        return statistics.stdev(xs)
    return 1.4826 * mad


def _cache_problems(caches: Sequence[CacheStats]) -> list[str]:
    out = []
    for c in caches:
        if c.fresh_hits:
            out.append(f"{c.name} hit {c.fresh_hits}x on a fresh tensor's key in training")
        if c.stale_hits:
            out.append(
                f"{c.name} hit {c.stale_hits}x on the weight right after its update "
                "(key without _version)"
            )
    return out


def judge_idioms(traces: IdiomTraces, min_rel_gap: float = MIN_REL_GAP) -> DynamicResult:
    """The verdict on measured idiom traces (module docstring). ``min_rel_gap`` is the noise
    floor as a fraction of the benchmark time."""
    diffs = [t - b for t, b in zip(traces.train_ms, traces.bench_ms, strict=True)]
    bench_ms, train_ms, gap = map(statistics.median, (traces.bench_ms, traces.train_ms, diffs))
    noise = max(3 * _robust_sigma(diffs) / math.sqrt(traces.repeats), min_rel_gap * bench_ms)
    problems = _cache_problems(traces.train_caches)
    problems += [
        f"outputs of the {w.split(':', 1)[0]} idiom disagree with the reference "
        f"({w.split(':', 1)[1].strip()}): a result returned again for new inputs"
        for w in traces.wrong_outputs
    ]
    if gap > noise:
        problems.insert(
            0,
            f"training idiom slower by {gap:.4g} ms/step "
            f"({gap / bench_ms:+.1%}) > noise {noise:.3g} ms",
        )
    verdict = OVERFIT if problems else TRANSFERS
    reason = "; ".join(problems) or (
        f"gap {gap:+.4g} ms/step ({gap / bench_ms:+.1%}) within noise {noise:.3g} ms"
    )
    return DynamicResult(
        traces.label,
        traces.steps,
        traces.repeats,
        bench_ms,
        train_ms,
        gap,
        noise,
        verdict,
        reason,
        traces.train_caches,
        traces.bench_caches,
    )


def judge_worker_traces(payload: Mapping[str, Any], min_rel_gap: float) -> dict[str, Any]:
    """The summary of a worker's ``transfer`` answer (:meth:`IdiomTraces.to_payload`) judged
    with noise floor ``min_rel_gap``: :meth:`DynamicResult.to_payload`."""
    return judge_idioms(IdiomTraces.from_payload(payload), min_rel_gap).to_payload()


def simulate_training(
    adapter: Adapter,
    shape: Shape,
    *,
    device: str,
    steps: int = 8,
    seed: int = 0,
    timing: Timer | None = None,
    repeats: int = 5,
    trace_steps: int = 4,
    cache_modules: Sequence[ModuleType] = (),
    min_rel_gap: float = MIN_REL_GAP,
) -> DynamicResult:
    """Time the benchmark idiom against the training idiom on one shape and judge the traces.

    The measurement's arguments are :func:`~kernel_ratchet.harness.training_sim.trace_idioms`'s
    (``timing``: a callable timing one step's forward and backward in milliseconds, or None for
    a synchronized ``perf_counter``); ``min_rel_gap`` is :func:`judge_idioms`'s. Raises
    RatchetError when the adapter cannot take part; a candidate that crashes raises its own
    error (it has already failed its tests).
    """
    traces = trace_idioms(
        adapter,
        shape,
        device=device,
        steps=steps,
        seed=seed,
        timing=timing,
        repeats=repeats,
        trace_steps=trace_steps,
        cache_modules=cache_modules,
    )
    return judge_idioms(traces, min_rel_gap)


def weight_quant_ratio(
    quant: Callable[[torch.Tensor], Any],
    weight: torch.Tensor,
    step_ms: float,
    *,
    device: str,
    timing: Timer | TimingEngine | None = None,
    repeats: int = 5,
) -> float:
    """quant_time(weight) / step_time: the bound of a W1 (weight cache) gain, SPEC section 8.

    ``quant`` is the incumbent's weight quantization (what the cache saves), ``step_ms`` the
    measured forward+backward time of one training step of the op. Median of ``repeats``.
    """
    if step_ms <= 0:
        raise RatchetError("step_ms must be positive")
    timer = make_timer(timing, device)
    quant(weight)
    return statistics.median(timer(lambda: quant(weight)) for _ in range(repeats)) / step_ms
