"""Dynamic transfer check: the benchmark idiom timed against a simulated training loop.

A benchmark calls the op on the same tensor objects every iteration; training does not (SPEC
section 8). :func:`simulate_training` times both on one shape, trace against trace:

* **benchmark idiom**: ``steps`` calls on the one case from ``make_case`` — same tensors;
* **training idiom**: ``steps`` calls where every activation, grad_out, scale and routing field
  is a new tensor with new data, and the weight is the *same* tensor object, updated in place
  (``w.mul_(1 ± 1e-2)`` under ``no_grad``, so its ``_version`` moves) before each step.

Both traces do the same preparation work, so it cancels in the difference: the benchmark trace
builds the same fresh tensors (and throws them away) and updates a scratch copy of the weight.
Fresh tensors are kept alive as objects for the whole check (their storage is released after
their step), so an ``id()`` is never reused by a later step; a ``data_ptr()`` may be, exactly as
the caching allocator does in training. ``repeats`` trace pairs are measured, alternating which
idiom goes first; the gap is the median paired difference per step and the noise estimate is
``max(3 · 1.4826 · MAD(differences) / sqrt(repeats), min_rel_gap · benchmark time)``. The
verdict is OVERFIT when the training idiom is slower by more than the noise, or when a cache
in ``cache_modules`` hits on a fresh tensor's key, or hits on the weight right after its update
(a key without ``_version``), during an untimed ``trace_steps``-step training trace.

An adapter takes part by implementing :class:`TrainingCase`.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.guard.cache_probe import CacheProbe, CacheStats, count_cache_hits
from kernel_ratchet.harness.adapter import Adapter, Shape
from kernel_ratchet.harness.timing.engine import TimingEngine

TRAINING_ROLES = ("weight", "activation", "grad_out", "scale", "routing")
#: Roles that are a new tensor every training step.
FRESH = ("activation", "grad_out", "scale", "routing")
OVERFIT, TRANSFERS = "OVERFIT", "TRANSFERS"
#: Default noise floor of :func:`simulate_training`, as a fraction of the benchmark time.
MIN_REL_GAP = 0.03
Timer = Callable[[Callable[[], Any]], float]


@runtime_checkable
class TrainingCase(Protocol):
    """Optional adapter extension: which fields of a case play which part in a training step.

    ``training_roles(case)`` returns ``{field: role}`` with roles from :data:`TRAINING_ROLES`;
    fields not named are left alone (forward state, constants). A field is an attribute of the
    case, or a key when the case is a mapping. Every named field must hold a tensor. An op
    without a weight (a quantization kernel) names its input ``activation`` only. ``routing``
    fields (tokens per expert) get a new tensor with the same values, since the values are part
    of the shape.
    """

    def training_roles(self, case: Any) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class DynamicResult:
    """Both idioms' per-step times in ms (matched preparation included) and the verdict."""

    label: str
    steps: int
    repeats: int
    bench_ms: float
    train_ms: float
    gap_ms: float
    noise_ms: float
    verdict: str  # OVERFIT | TRANSFERS
    reason: str
    train_caches: tuple[CacheStats, ...] = ()
    bench_caches: tuple[CacheStats, ...] = ()

    @property
    def gap_rel(self) -> float:
        """Training-idiom slowdown relative to the benchmark idiom (0.1 = 10% slower)."""
        return self.gap_ms / self.bench_ms if self.bench_ms > 0 else 0.0

    def hit_rate_text(self) -> str:
        """One line per cache: training-idiom hits, with the benchmark idiom's for contrast."""
        if not self.train_caches:
            return "no cache found in the kernel module"
        bench = {c.name: c for c in self.bench_caches}
        parts = []
        for c in self.train_caches:
            b = bench.get(c.name)
            extra = f"; benchmark idiom {b.hits}/{b.lookups}" if b else ""
            parts.append(f"training {c.describe()}{extra}")
        return "; ".join(parts)


def _get(case: Any, name: str) -> Any:
    return case[name] if isinstance(case, Mapping) else getattr(case, name)


def _set(case: Any, name: str, value: Any) -> None:
    if isinstance(case, Mapping):
        case[name] = value  # type: ignore[index]
    else:
        setattr(case, name, value)


def _roles(adapter: Adapter, case: Any) -> dict[str, str]:
    if not isinstance(adapter, TrainingCase):
        raise RatchetError(
            f"{type(adapter).__name__} has no training_roles(case); implement it (see "
            "kernel_ratchet.guard.dynamic_transfer.TrainingCase) to run the dynamic transfer check"
        )
    roles = dict(adapter.training_roles(case))
    for name, role in roles.items():
        if role not in TRAINING_ROLES:
            raise RatchetError(f"training_roles: {name!r} has role {role!r}; use {TRAINING_ROLES}")
        if not isinstance(_get(case, name), torch.Tensor):
            raise RatchetError(f"training_roles: case field {name!r} is not a tensor")
    if not roles:
        raise RatchetError("training_roles names no field; name at least the op's inputs")
    return roles


def _default_timer(device: str) -> Timer:
    def timer(fn: Callable[[], Any]) -> float:
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    return timer


def _timer(timing: Timer | TimingEngine | None, device: str) -> Timer:
    if timing is None:
        return _default_timer(device)
    if isinstance(timing, TimingEngine):
        return lambda fn: timing.measure(fn).median_ms
    return timing


class _Simulation:
    """The two cases, the fresh-tensor sources and the two traces of one shape."""

    def __init__(self, adapter: Adapter, shape: Shape, device: str, steps: int, seed: int):
        self.adapter, self.steps = adapter, steps
        self.bench = adapter.make_case(shape, seed, device)
        self.train = adapter.make_case(shape, seed, device)  # its own weight object
        roles = _roles(adapter, self.bench)
        self.weights = [n for n, r in roles.items() if r == "weight"]
        self.fresh = [(n, r) for n, r in roles.items() if r in FRESH]
        self.sources = []
        for i in range(steps):
            case = adapter.make_case(shape, seed + 1 + i, device)
            self.sources.append({n: _get(case, n) for n, _ in self.fresh})
        self.scratch = [_get(self.bench, n).detach().clone() for n in self.weights]
        self.graveyard: list[torch.Tensor] = []  # fresh tensors outlive the check as objects
        self.calls = 0

    def train_weights(self) -> list[torch.Tensor]:
        return [_get(self.train, n) for n in self.weights]

    def _fresh(self, src: torch.Tensor, role: str) -> torch.Tensor:
        self.calls += 1
        with torch.no_grad():
            if role == "routing" or not src.is_floating_point():
                t = src.clone()
            else:
                t = src.add(1e-3 * (self.calls % 97 + 1))
        return t.requires_grad_(src.requires_grad) if t.is_floating_point() else t

    def _retire(self, tensors: Sequence[torch.Tensor]) -> None:
        for t in tensors:
            self.graveyard.append(t)
            with contextlib.suppress(RuntimeError):  # else kept whole: still a distinct object
                t.data = torch.empty(0, dtype=t.dtype, device=t.device)

    def _update(self, tensors: Sequence[torch.Tensor], i: int) -> None:
        with torch.no_grad():
            for w in tensors:
                if w.is_floating_point():
                    w.mul_(1.01 if i % 2 == 0 else 1 / 1.01)

    def run(self, case: Any) -> None:
        self.adapter.forward(case)
        if self.adapter.has_backward:
            self.adapter.backward(case)

    def trace(self, idiom: str, probe: CacheProbe | None = None, steps: int | None = None) -> None:
        """One trace of ``idiom`` ("bench" or "train"), ``steps`` long (default: all)."""
        for i in range(steps or self.steps):
            src = self.sources[i % len(self.sources)]
            fresh = {n: self._fresh(src[n], r) for n, r in self.fresh}
            if idiom == "train":
                for n, t in fresh.items():
                    _set(self.train, n, t)
                self._update(self.train_weights(), i)
            else:
                self._update(self.scratch, i)
            if probe is not None:
                probe.track_fresh(*fresh.values())
                probe.begin_step()
            self.run(self.train if idiom == "train" else self.bench)
            self._retire(list(fresh.values()))


def _robust_sigma(xs: Sequence[float]) -> float:
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    if mad == 0 and len(xs) > 1:
        return statistics.stdev(xs)
    return 1.4826 * mad


def _cache_traces(
    sim: _Simulation, modules: Sequence[ModuleType], steps: int
) -> tuple[tuple[CacheStats, ...], tuple[CacheStats, ...]]:
    out = []
    for idiom in ("train", "bench"):
        with count_cache_hits(*modules) as probe:
            case = sim.train if idiom == "train" else sim.bench
            probe.track_weights(*(_get(case, n) for n in sim.weights))
            sim.trace(idiom, probe, steps)
        out.append(tuple(probe.stats.values()))
    return out[0], out[1]


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


def simulate_training(
    adapter: Adapter,
    shape: Shape,
    *,
    device: str,
    steps: int = 8,
    seed: int = 0,
    timing: Timer | TimingEngine | None = None,
    repeats: int = 5,
    trace_steps: int = 4,
    cache_modules: Sequence[ModuleType] = (),
    min_rel_gap: float = MIN_REL_GAP,
) -> DynamicResult:
    """Time the benchmark idiom against the training idiom on one shape (module docstring).

    ``adapter`` must implement :class:`TrainingCase`. ``timing`` times one call of a no-argument
    function: a callable returning milliseconds, a :class:`TimingEngine` (its median), or None
    for a synchronized ``perf_counter``. ``cache_modules`` are the kernel modules whose caches
    are counted (:func:`.cache_probe.count_cache_hits`) over ``trace_steps`` untimed steps of
    each idiom. Raises RatchetError when the adapter cannot take part; a candidate that crashes
    raises its own error (it has already failed its tests).
    """
    if steps < 2 or repeats < 2:
        raise RatchetError("simulate_training needs steps >= 2 and repeats >= 2")
    sim = _Simulation(adapter, shape, device, steps, seed)
    timer = _timer(timing, device)
    sim.trace("bench")  # warm-up: compilation, autotuning, allocator
    sim.trace("train")
    bench, train = [], []
    for r in range(repeats):
        for idiom in ("bench", "train") if r % 2 == 0 else ("train", "bench"):
            ms = timer(lambda idiom=idiom: sim.trace(idiom)) / steps
            (bench if idiom == "bench" else train).append(ms)
    diffs = [t - b for t, b in zip(train, bench, strict=True)]
    bench_ms, train_ms, gap = map(statistics.median, (bench, train, diffs))
    noise = max(3 * _robust_sigma(diffs) / math.sqrt(repeats), min_rel_gap * bench_ms)
    train_c, bench_c = _cache_traces(sim, cache_modules, trace_steps) if cache_modules else ((), ())
    problems = _cache_problems(train_c)
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
        shape.label,
        steps,
        repeats,
        bench_ms,
        train_ms,
        gap,
        noise,
        verdict,
        reason,
        train_c,
        bench_c,
    )


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
    timer = _timer(timing, device)
    quant(weight)
    return statistics.median(timer(lambda: quant(weight)) for _ in range(repeats)) / step_ms
