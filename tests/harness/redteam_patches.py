"""Red-team candidates that replace what the harness runs or reads: its clock, timing engine,
poison, comparison, thresholds, or a library function it calls (``json.dumps``,
``statistics.median``, ``builtins.min``). Imported through
:mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


class PatchTimer(TinyGemm):
    """Replaces ``time.perf_counter`` with a clock running at a tenth of the speed."""

    def forward(self, case: Case) -> torch.Tensor:
        real = time.perf_counter
        if not getattr(real, "_slowed", False):
            t0 = real()

            def slow() -> float:
                return t0 + (real() - t0) / 10.0

            slow._slowed = True  # type: ignore[attr-defined]
            time.perf_counter = slow
        return matmul_nt(case.a, case.b)


class PatchEngine(TinyGemm):
    """Patches the harness's timing engine instead of the clock."""

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness.timing import engine

        engine.summarize = lambda samples, name: engine.Timing(1e-6, 0.0, (1e-6,), name)
        return matmul_nt(case.a, case.b)


class PatchCudaEngine(TinyGemm):
    """Patches a helper of the CUDA timing engine (its own module)."""

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness.timing import cuda_support

        cuda_support.per_call_ms = lambda event_ms, iters, flush_ms_each=0.0: 1e-6
        return matmul_nt(case.a, case.b)


class PatchPoison(TinyGemm):
    """Disables the NaN poison of its outputs where the harness calls it: through the
    anti-cheat module, which takes it from the module that defines it."""

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import anticheat

        anticheat.poison = lambda ts: None
        return matmul_nt(case.a, case.b)


class PatchMatmul(TinyGemm):
    """Makes the reference agree with a wrong output: ``Tensor.__matmul__`` (which the
    reference uses) returns zeros, as the kernel does."""

    def forward(self, case: Case) -> torch.Tensor:
        torch.Tensor.__matmul__ = lambda a, b: torch.zeros(a.shape[0], b.shape[-1])
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class PatchMedian(TinyGemm):
    """Shrinks the reported time: the engine's ``statistics.median`` returns a quarter."""

    def forward(self, case: Case) -> torch.Tensor:
        import statistics

        real = statistics.median
        statistics.median = lambda data: real(data) / 4
        return matmul_nt(case.a, case.b)


class PatchJson(TinyGemm):
    """Forges the worker's answer: ``json.dumps`` rewrites a failed verdict as a pass."""

    def forward(self, case: Case) -> torch.Tensor:
        import json

        real = json.dumps

        def forged(obj, *a, **k):
            if isinstance(obj, dict) and "category" in obj:
                obj = {**obj, "ok": True, "category": "ok", "detail": "all outputs pass"}
            return real(obj, *a, **k)

        json.dumps = forged
        return matmul_nt(case.a, case.b)


class SwapCode(TinyGemm):
    """Keeps the harness's comparison object but swaps what it runs: ``snr_db`` reads every
    output as a perfect match, and the kernel returns zeros."""

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import correctness

        correctness.snr_db.__code__ = _perfect_match.__code__
        return torch.zeros(case.a.shape[0], case.b.shape[0])


def _perfect_match(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float("inf")


class PatchRandn(TinyGemm):
    """Makes every fresh input the same (``torch.randn`` ignores its generator), so a result
    cached once is always right."""

    def forward(self, case: Case) -> torch.Tensor:
        real = torch.randn

        def same(*size, generator=None, **kw):
            return real(*size, generator=torch.Generator().manual_seed(0), **kw)

        torch.randn = same
        return matmul_nt(case.a, case.b)


class BlindsTheSentinel(TinyGemm):
    """Has the Sentinel take every replaced function for torch's own rewrap, then patches
    the comparison as ``SwapCode`` does."""

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import correctness, surface

        surface.library_rewrap = lambda now, original: True

        correctness.snr_db = _perfect_match
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class CatchesTheRefusal(TinyGemm):
    """``SwapCode``, with the write's refusal caught: the kernel goes on returning zeros."""

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import correctness

        with contextlib.suppress(Exception):  # the cheat hopes nobody remembers
            correctness.snr_db.__code__ = _perfect_match.__code__
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class FakeChecker(TinyGemm):
    """Puts a module of its own where the harness imports its anti-cheat module from."""

    def forward(self, case: Case) -> torch.Tensor:
        import types

        import kernel_ratchet.harness as pkg

        fake = types.ModuleType("kernel_ratchet.harness.correctness")
        fake.check_outputs = lambda got, ref, thr: None  # type: ignore[attr-defined]
        sys.modules["kernel_ratchet.harness.correctness"] = fake
        pkg.correctness = fake  # type: ignore[attr-defined]
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class LowersTheBar(TinyGemm):
    """An adapter that relies on the default threshold; the kernel lowers that default to
    minus infinity and returns zeros."""

    min_snr_db: dict[str, float] = {}  # noqa: RUF012 -- the default threshold is read

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import adapter

        adapter.SNR_BF16 = float("-inf")
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class PatchReplace(TinyGemm):
    """Rewrites the timing the harness builds with ``dataclasses.replace`` (a standard
    library function the harness calls through a module it holds), then returns zeros."""

    def forward(self, case: Case) -> torch.Tensor:
        import dataclasses

        real = dataclasses.replace

        def faster(obj: Any, **changes: Any) -> Any:
            if hasattr(obj, "median_ms"):
                changes["median_ms"] = 1e-9
            return real(obj, **changes)

        dataclasses.replace = faster
        return matmul_nt(case.a, case.b)


class PatchMin(TinyGemm):
    """Makes the builtin ``min`` return 0: the spot checks a measurement draws (``min(asked,
    samples)``) become none, and the kernel returns zeros while timed."""

    def forward(self, case: Case) -> torch.Tensor:
        import builtins

        real = getattr(builtins, "_real_min", builtins.min)
        builtins._real_min = real  # type: ignore[attr-defined]
        builtins.min = lambda *a, **k: 0 if len(a) == 2 and a[0] in (1, 3) else real(*a, **k)
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class MutatesTheThresholds(TinyGemm):
    """Lowers the adapter's own threshold table in place (the dict stays the same object),
    then returns zeros."""

    def forward(self, case: Case) -> torch.Tensor:
        TinyGemm.min_snr_db["out"] = float("-inf")  # type: ignore[index]
        return torch.zeros(case.a.shape[0], case.b.shape[0])


class ShadowThreshold(TinyGemm):
    """Hides the adapter's ``threshold`` with an attribute of its own instance, then returns
    zeros."""

    def forward(self, case: Case) -> torch.Tensor:
        self.threshold = lambda name: float("-inf")  # type: ignore[method-assign]
        return torch.zeros(case.a.shape[0], case.b.shape[0])
