"""The benchmark idiom and the training idiom of one op on one shape, timed trace against trace.

A benchmark calls the op on the same tensor objects every iteration; training does not (SPEC
section 8). :func:`trace_idioms` measures both; the guard judges the difference
(:mod:`kernel_ratchet.guard.dynamic_transfer`). The worker runs it for a ``transfer`` request.

* **benchmark idiom**: ``steps`` calls on the one case from ``make_case`` — same tensors;
* **training idiom**: ``steps`` calls where every activation, grad_out, scale and routing field
  is a new tensor with new data, and the weight is the *same* tensor object, updated in place
  (``w.mul_(1 ± 1e-2)`` under ``no_grad``, so its ``_version`` moves) before each step.

Both traces do the same preparation work: the benchmark trace builds the same fresh tensors (and
throws them away) and updates a scratch copy of the weight. Only each step's forward and
backward calls are timed, so the preparation's time and its noise stay out of the comparison.
Fresh tensors are kept alive as objects for the whole measurement (their storage is released
after their step), so an ``id()`` is never reused by a later step; a ``data_ptr()`` may be,
exactly as the caching allocator does in training. ``repeats`` trace pairs are timed,
alternating which idiom goes first. With ``cache_modules``, an untimed ``trace_steps``-step
trace of each idiom counts the hits of the caches in those modules
(:func:`~kernel_ratchet.harness.cache_probe.count_cache_hits`).

An adapter takes part by implementing :class:`TrainingCase`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness import inplace
from kernel_ratchet.harness.adapter import Adapter, Shape
from kernel_ratchet.harness.cache_probe import CacheProbe, CacheStats, count_cache_hits
from kernel_ratchet.harness.timing.engine import TimingEngine

TRAINING_ROLES = ("weight", "activation", "grad_out", "scale", "routing")
#: Roles that are a new tensor every training step.
FRESH = ("activation", "grad_out", "scale", "routing")
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
            "kernel_ratchet.harness.training_sim.TrainingCase) to run the dynamic transfer check"
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


def _synced_timer(device: str) -> Timer:
    def timer(fn: Callable[[], Any]) -> float:
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    return timer


def make_timer(timing: Timer | TimingEngine | None, device: str) -> Timer:
    """``timing`` as a function timing one call in ms: a :class:`Timer` as is, an engine's
    median, or (None) a synchronized ``perf_counter``."""
    if timing is None:
        return _synced_timer(device)
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

    def check_outputs(self, idiom: str) -> str:
        """One more step of ``idiom``, untimed, its outputs compared with the reference: the
        reason they disagree, or "" (a result returned again for new inputs, e.g. one kept
        until the worker's NaN poison, which the traces never apply)."""
        from kernel_ratchet.harness.correctness import check_outputs

        case = self.train if idiom == "train" else self.bench
        src = self.sources[self.calls % len(self.sources)]
        fresh = {n: self._fresh(src[n], r) for n, r in self.fresh}
        if idiom == "train":
            for n, t in fresh.items():
                _set(case, n, t)
        self.run(case)
        kept = inplace.prepared(self.adapter, case)
        got = self.adapter.outputs(case)
        ref = inplace.reference(self.adapter, case, kept)
        res = check_outputs(got, ref, {n: self.adapter.threshold(n) for n in ref})
        self._retire(list(fresh.values()))
        return "" if res.passed else res.reason

    def trace(
        self,
        idiom: str,
        probe: CacheProbe | None = None,
        steps: int | None = None,
        timer: Timer | None = None,
    ) -> float:
        """One trace of ``idiom`` ("bench" or "train"), ``steps`` long (default: all). Returns
        the ms ``timer`` read over the steps' forward and backward calls alone (0 without a
        timer): the preparation of a step (fresh tensors, the weight update) is the harness's
        work, the same in both idioms, and timed with the op it would hide a sub-millisecond
        op's difference in its own noise."""
        ms = 0.0
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
            case = self.train if idiom == "train" else self.bench
            if timer is None:
                self.run(case)
            else:
                ms += timer(lambda case=case: self.run(case))
            self._retire(list(fresh.values()))
        return ms


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


def _stats_dict(c: CacheStats) -> dict[str, Any]:
    return {f.name: getattr(c, f.name) for f in dataclasses.fields(c) if not f.name.startswith("_")}


@dataclass(frozen=True)
class IdiomTraces:
    """What :func:`trace_idioms` measured on one shape.

    ``bench_ms`` and ``train_ms`` hold one per-step time (ms, the op's calls alone) per
    repeat; the i-th values of both come from the same trace pair. ``train_caches`` and
    ``bench_caches`` are the cache counts of the untimed traces (empty without cache modules).
    """

    label: str
    steps: int
    repeats: int
    bench_ms: tuple[float, ...]
    train_ms: tuple[float, ...]
    train_caches: tuple[CacheStats, ...] = ()
    bench_caches: tuple[CacheStats, ...] = ()
    wrong_outputs: tuple[str, ...] = ()  # "idiom: reason" for each idiom whose outputs disagree

    def to_payload(self) -> dict[str, Any]:
        """JSON-ready dict (the worker's answer to a ``transfer`` request)."""
        return {
            "label": self.label,
            "steps": self.steps,
            "repeats": self.repeats,
            "bench_ms": list(self.bench_ms),
            "train_ms": list(self.train_ms),
            "train_caches": [_stats_dict(c) for c in self.train_caches],
            "bench_caches": [_stats_dict(c) for c in self.bench_caches],
            "wrong_outputs": list(self.wrong_outputs),
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> IdiomTraces:
        """Inverse of :meth:`to_payload`."""
        return cls(
            str(payload["label"]),
            int(payload["steps"]),
            int(payload["repeats"]),
            tuple(float(x) for x in payload["bench_ms"]),
            tuple(float(x) for x in payload["train_ms"]),
            tuple(CacheStats(**c) for c in payload.get("train_caches", ())),
            tuple(CacheStats(**c) for c in payload.get("bench_caches", ())),
            tuple(str(w) for w in payload.get("wrong_outputs", ())),
        )


def trace_idioms(
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
) -> IdiomTraces:
    """Time the benchmark idiom against the training idiom on one shape (module docstring).

    ``adapter`` must implement :class:`TrainingCase`. ``timing`` times one step's forward and
    backward (a no-argument function) once: a callable returning milliseconds, or None for a
    synchronized ``perf_counter``. Raises RatchetError when the adapter cannot take part, when
    ``steps`` or ``repeats`` is below 2, or for a :class:`TimingEngine` (it would repeat a
    step's calls on the same tensors, which is the benchmark idiom); a candidate that crashes
    raises its own error.
    """
    if steps < 2 or repeats < 2:
        raise RatchetError("the idiom traces need steps >= 2 and repeats >= 2")
    if isinstance(timing, TimingEngine):
        raise RatchetError(
            "the idiom traces time each step's calls once; a timing engine repeats them on the "
            "same tensors: pass a timer (a callable returning ms) or None"
        )
    sim = _Simulation(adapter, shape, device, steps, seed)
    timer = make_timer(timing, device)
    sim.trace("bench")  # warm-up: compilation, autotuning, allocator
    sim.trace("train")
    bench, train = [], []
    for r in range(repeats):
        for idiom in ("bench", "train") if r % 2 == 0 else ("train", "bench"):
            ms = sim.trace(idiom, timer=timer) / steps
            (bench if idiom == "bench" else train).append(ms)
    train_c, bench_c = _cache_traces(sim, cache_modules, trace_steps) if cache_modules else ((), ())
    wrong = tuple(f"{i}: {w}" for i in ("train", "bench") if (w := sim.check_outputs(i)))
    return IdiomTraces(
        shape.label, steps, repeats, tuple(bench), tuple(train), train_c, bench_c, wrong
    )
