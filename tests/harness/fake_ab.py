"""Fake workers for the tests of the paired interleaved A/B (no subprocesses), and ``ab``, which
runs an A/B on them.

The fake machine draws each timing call as ``base / speed · drift(t) · exp(N(0, noise))``:
``drift`` is a slow clock wander common to both sides (what pairing cancels), ``noise`` the
per-call spread. ``FakeSpec`` plants a speed factor, a crash or a failing check.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.scoring.paired_looks import PairedLooks

SHAPES = [Shape(f"s{n}", n, n, n) for n in (256, 512, 1024, 2048, 4096)]


@dataclass(frozen=True)
class FakeSpec:
    """A side of the fake A/B: speed factor (>1 faster), optionally per shape and phase."""

    name: str
    speed: float = 1.0
    speed_by: Mapping[tuple[str, str], float] = field(default_factory=dict)
    crash_at_call: int | None = None
    failing_check: str | None = None
    #: every timing request of this (shape label, phase) crashes (a defect of the adapter or
    #: the harness that both sides share)
    crashes_on: tuple[str, str] | None = None
    #: the side's first this many timing requests (over all its workers) run out of device
    #: memory while another side's worker holds cached memory, the first this many checks too
    ooms: int = 0
    check_ooms: int = 0


@dataclass(frozen=True)
class FakeResult:
    ok: bool
    category: str
    detail: str
    log: str
    payload: dict


class FakeMachine:
    """Shared noise source of both fake workers (one 'GPU')."""

    def __init__(
        self,
        seed: int = 0,
        noise: float = 0.02,
        drift: float = 0.05,
        noise_by_label: Mapping[str, float] | None = None,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.noise, self.drift = noise, drift
        self.noise_by_label = dict(noise_by_label or {})
        self.t = 0
        self.calls: list[tuple[str, str, int, str]] = []  # (side name, label, seed, phase)
        self.stopped: set[str] = set()  # the sides paused now
        self.stopped_then: list[set[str]] = []  # at each timing request
        self.started: list[str] = []  # the side of each worker started, in order
        self.released: list[str] = []  # the side of each worker asked to release its cache
        self.ooms: dict[tuple[str, str], int] = {}  # (side name, request) -> ooms so far

    def draw(self, spec: FakeSpec, shape: Shape, phase: str) -> float:
        self.t += 1
        base = shape.M * shape.N * shape.K * 1e-9 * (2.0 if phase == "bwd" else 1.0)
        speed = spec.speed_by.get((shape.label, phase), spec.speed)
        sigma = self.noise_by_label.get(shape.label, self.noise)
        wander = 1.0 + self.drift * math.sin(self.t / 11.0)
        return base / speed * wander * math.exp(self.rng.normal(0.0, sigma))

    def factory(self, spec: FakeSpec, log_path: Path) -> FakeWorker:
        return FakeWorker(self, spec, log_path)


class FakeWorker:
    """Implements the Worker contract (context manager, check, time, alive, close)."""

    def __init__(self, machine: FakeMachine, spec: FakeSpec, log_path: Path) -> None:
        self.machine, self.spec, self.log_path = machine, spec, Path(log_path)
        self.n_time = 0
        self.alive = True
        machine.started.append(spec.name)

    def _oom(self, request: str, planned: int) -> FakeResult | None:
        done = self.machine.ooms.get((self.spec.name, request), 0)
        if done >= planned:
            return None
        self.machine.ooms[(self.spec.name, request)] = done + 1
        return self._fail("oom", "the op ran out of device memory (CUDA out of memory)")

    def release(self) -> FakeResult:
        self.machine.released.append(self.spec.name)
        return FakeResult(True, "ok", "cached memory released", str(self.log_path), {})

    def __enter__(self) -> FakeWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.alive = False

    @contextlib.contextmanager
    def paused(self):
        self.machine.stopped.add(self.spec.name)
        try:
            yield
        finally:
            self.machine.stopped.discard(self.spec.name)

    def _fail(self, category: str, detail: str) -> FakeResult:
        self.alive = False
        return FakeResult(False, category, detail, str(self.log_path), {})

    def check(self, shape: Shape, seed: int) -> FakeResult:
        if shape.label == self.spec.failing_check:
            return self._fail("wrong", "out SNR 3.1 dB < 80 dB")
        if (oom := self._oom("check", self.spec.check_ooms)) is not None:
            return oom
        return FakeResult(True, "ok", "", str(self.log_path), {"snr": {"out": 120.0}})

    def time(self, shape: Shape, seed: int, phase: str, **kw: Any) -> FakeResult:
        self.n_time += 1
        self.machine.time_kwargs = kw
        self.machine.stopped_then.append(set(self.machine.stopped))
        if (oom := self._oom("time", self.spec.ooms)) is not None:
            return oom
        if self.n_time == self.spec.crash_at_call:
            return self._fail("crash", "illegal memory access")
        if (shape.label, phase) == self.spec.crashes_on:
            return self._fail("crash", "RuntimeError: modified by an inplace operation")
        self.machine.calls.append((self.spec.name, shape.label, seed, phase))
        ms = self.machine.draw(self.spec, shape, phase)
        payload = {
            "median_ms": ms,
            "stddev_ms": 0.0,
            "samples_ms": [ms],
            "engine": "fake",
            "clock_mhz": 1980.0,
        }
        return FakeResult(True, "ok", "", str(self.log_path), payload)


def ab(
    tmp_path: Path,
    cand: FakeSpec,
    *,
    machine: FakeMachine | None = None,
    shapes=SHAPES,
    phases=("fwd",),
    **kw,
):
    machine = machine or FakeMachine()
    kw.setdefault("rng_seed", 1)
    kw.setdefault("rule", PairedLooks())
    return run_paired(
        kw.pop("inc", FakeSpec("inc")),
        cand,
        shapes,
        phases=phases,
        seed=1234,
        log_dir=tmp_path,
        worker_factory=machine.factory,
        **kw,
    )
