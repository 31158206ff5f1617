"""Cheating (and failing) candidates for the red-team suite, built around the tiny example GEMM.

Imported inside worker processes as ``tests.harness.test_redteam_candidates:<Class>`` with the
repository root as ``source_root``; holds no tests itself. Each class is a small subclass of the
honest :class:`tiny_gemm.adapter.TinyGemm` that fakes a result or a time in one specific way.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernel_ratchet.harness.adapter import SNR_FP32, Shape

_EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm")
if _EXAMPLE not in sys.path:
    sys.path.insert(0, _EXAMPLE)

from tiny_gemm.adapter import Case, TinyGemm  # noqa: E402
from tiny_gemm.kernel import matmul_nt  # noqa: E402

__all__ = ["TinyGemm"]


class IdCache(TinyGemm):
    """Output cache keyed on ``id()`` of the inputs (returns the cached tensor)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, int], torch.Tensor] = {}

    def forward(self, case: Case) -> torch.Tensor:
        key = (id(case.a), id(case.b))
        if key not in self.cache:
            self.cache[key] = matmul_nt(case.a, case.b)
        return self.cache[key]


class DataPtrCache(TinyGemm):
    """Output cache keyed on ``data_ptr`` (returns a fresh copy, so poisoning alone misses it)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, int], torch.Tensor] = {}

    def forward(self, case: Case) -> torch.Tensor:
        key = (case.a.data_ptr(), case.b.data_ptr())
        if key not in self.cache:
            self.cache[key] = matmul_nt(case.a, case.b)
        return self.cache[key].clone()


class CachedTensor(TinyGemm):
    """Computes once per shape, then returns the same tensor object every call."""

    def __init__(self) -> None:
        self.out: torch.Tensor | None = None

    def forward(self, case: Case) -> torch.Tensor:
        if self.out is None or self.out.shape != (case.a.shape[0], case.b.shape[0]):
            self.out = matmul_nt(case.a, case.b)
        return self.out


class SkipRepeated(TinyGemm):
    """Skips the work when called again with the same input objects (returns a copy)."""

    def __init__(self) -> None:
        self.last: tuple[int, int, torch.Tensor] | None = None

    def forward(self, case: Case) -> torch.Tensor:
        if self.last is not None and self.last[:2] == (id(case.a), id(case.b)):
            return self.last[2].clone()
        out = matmul_nt(case.a, case.b)
        self.last = (id(case.a), id(case.b), out.clone())
        return out


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


class SeesUnchangedInputs(TinyGemm):
    """Honest, but raises where a timed sample starts (its last output NaN-poisoned) on the
    input values of the sample before: a cheat would skip the work there, knowing such a
    sample is not compared with the reference."""

    def __init__(self) -> None:
        self.last: tuple[int, torch.Tensor] | None = None

    def forward(self, case: Case) -> torch.Tensor:
        version = case.a._version + case.b._version
        poisoned = self.last is not None and bool(self.last[1].isnan().any())
        if poisoned and version == self.last[0]:
            raise RuntimeError("a timed sample started on unchanged inputs")
        out = matmul_nt(case.a, case.b)
        self.last = (version, out)
        return out


class _Lazy(torch.Tensor):
    """A tensor subclass standing for a result computed later."""


class LazySubclass(TinyGemm):
    """Returns a tensor subclass (a lazy result would defer the work past the timer)."""

    def forward(self, case: Case) -> torch.Tensor:
        return matmul_nt(case.a, case.b).as_subclass(_Lazy)


class NonTensor(TinyGemm):
    """Returns a Python list instead of a tensor."""

    def forward(self, case: Case) -> torch.Tensor:
        return matmul_nt(case.a, case.b).tolist()  # type: ignore[return-value]


class PartialWrite(TinyGemm):
    """Keeps an output buffer and, after the first call, rewrites only its first half rows."""

    def __init__(self) -> None:
        self.buf: torch.Tensor | None = None

    def forward(self, case: Case) -> torch.Tensor:
        M, N = case.a.shape[0], case.b.shape[0]
        if self.buf is None or self.buf.shape != (M, N):
            self.buf = matmul_nt(case.a, case.b)
        else:
            half = max(M // 2, 1)
            self.buf[:half] = matmul_nt(case.a[:half], case.b)
        return self.buf


class LowPrecision(TinyGemm):
    """Computes in fp16 where fp32 accuracy is required (SNR far below 80 dB)."""

    def forward(self, case: Case) -> torch.Tensor:
        return (case.a.half().float() @ case.b.half().float().T).half().float()


class BackgroundThread(TinyGemm):
    """Starts a background thread (work off the timed path) and leaves it running."""

    def __init__(self) -> None:
        self.started = False

    def forward(self, case: Case) -> torch.Tensor:
        if not self.started:
            self.started = True
            threading.Thread(target=time.sleep, args=(60,), name="prefetch", daemon=True).start()
        return matmul_nt(case.a, case.b)


class NativePool(TinyGemm):
    """Grows torch's native thread pool on its first call: OS threads the call leaves."""

    def forward(self, case: Case) -> torch.Tensor:
        grow_native_pool()
        return matmul_nt(case.a, case.b)


def grow_native_pool() -> None:
    """Start native (non-Python) threads, as a library's OpenMP pool does when it grows."""
    if not getattr(grow_native_pool, "done", False):
        grow_native_pool.done = True  # type: ignore[attr-defined]
        n = torch.get_num_threads()
        torch.set_num_threads(n + 2)
        torch.ones(1 << 20).add_(1.0)
        torch.set_num_threads(n)  # the threads stay, idle in the pool


class ModifiesInputs(TinyGemm):
    """Scales its input in place (e.g. to stash state in it)."""

    def forward(self, case: Case) -> torch.Tensor:
        out = matmul_nt(case.a, case.b)
        case.a.mul_(1.0 + 1e-3)
        return out


class NanOutput(TinyGemm):
    """Produces NaN in one element."""

    def forward(self, case: Case) -> torch.Tensor:
        out = matmul_nt(case.a, case.b)
        out[0, 0] = float("nan")
        return out


class Hangs(TinyGemm):
    """Sleeps far past any time limit."""

    def forward(self, case: Case) -> torch.Tensor:
        time.sleep(600)
        return matmul_nt(case.a, case.b)


class Aborts(TinyGemm):
    """Calls ``os.abort()`` (SIGABRT)."""

    def forward(self, case: Case) -> torch.Tensor:
        os.abort()


class Segfaults(TinyGemm):
    """Dereferences a null pointer (SIGSEGV)."""

    def forward(self, case: Case) -> torch.Tensor:
        import ctypes

        ctypes.string_at(0)
        return matmul_nt(case.a, case.b)


class RaisesOom(TinyGemm):
    """Raises the error an allocation past device memory raises."""

    def forward(self, case: Case) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")


class PrintsToStdout(TinyGemm):
    """Honest, but chatty on stdout (must not corrupt the protocol channel)."""

    def forward(self, case: Case) -> torch.Tensor:
        print("debug: forward called", flush=True)
        os.write(1, b"raw fd-1 write\n")
        return matmul_nt(case.a, case.b)


# -- GPU-only candidates (used by test_redteam_gpu.py) ------------------------------------------


class SideStream(TinyGemm):
    """Does the work on a side stream the calling stream never waits for."""

    def forward(self, case: Case) -> torch.Tensor:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # ~10 ms of "work" the caller's events would miss
            return matmul_nt(case.a, case.b)


class PatchEvent(TinyGemm):
    """Replaces ``torch.cuda.Event`` with a subclass that reports half the time."""

    def forward(self, case: Case) -> torch.Tensor:
        base = torch.cuda.Event
        if not getattr(base, "_halved", False):

            class Halved(base):  # type: ignore[misc, valid-type]
                _halved = True

                def elapsed_time(self, end: torch.cuda.Event) -> float:
                    return super().elapsed_time(end) / 2

            torch.cuda.Event = Halved  # type: ignore[misc]
        return matmul_nt(case.a, case.b)


def _oob_kernel():  # built lazily: the CPU suite never compiles it
    import triton
    import triton.language as tl

    @triton.jit
    def _store_far(ptr, off):
        tl.store(ptr + off, 1.0)

    return _store_far


def _bad_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _non_pow2(ptr):
        tl.store(ptr + tl.arange(0, 3), 1.0)  # arange length must be a power of 2

    return _non_pow2


class IllegalMemory(TinyGemm):
    """Stores far outside any allocation."""

    def forward(self, case: Case) -> torch.Tensor:
        out = matmul_nt(case.a, case.b)
        _oob_kernel()[(1,)](out, 1 << 40)
        torch.cuda.synchronize()
        return out


class CompileError(TinyGemm):
    """Launches a Triton kernel that does not compile."""

    def forward(self, case: Case) -> torch.Tensor:
        out = matmul_nt(case.a, case.b)
        _bad_kernel()[(1,)](out)
        return out


class HugeAlloc(TinyGemm):
    """Allocates far more device memory than exists."""

    def forward(self, case: Case) -> torch.Tensor:
        torch.empty(1 << 46, dtype=torch.uint8, device=case.a.device)
        return matmul_nt(case.a, case.b)


class WrongSpotReference(TinyGemm):
    """Honest kernel, but a spot reference of other inputs' result: every spot check must fail
    (proves the timed calls are compared with ``spot_reference``, not ``reference``)."""

    def spot_reference(self, case: Case) -> dict[str, torch.Tensor]:
        return {name: torch.randn_like(t) for name, t in self.reference(case).items()}


class CheapSpotReference(TinyGemm):
    """Honest kernel and a spot reference 1e-5 off the full one (100 dB, above the 80 dB
    threshold of this fp32 op): passes. (fp16 rounding, 74 dB, would fail: a spot reference
    must be accurate to each output's threshold.)"""

    def spot_reference(self, case: Case) -> dict[str, torch.Tensor]:
        return {name: t * (1 + 1e-5) for name, t in self.reference(case).items()}


@dataclass
class GraphCase:
    a: torch.Tensor
    b: torch.Tensor
    rows: torch.Tensor  # routing an autograd graph saves, as a MoE layer saves its group sizes
    dout: torch.Tensor
    out: torch.Tensor | None = None


class _Routed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b, rows)
        return matmul_nt(a, b)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        a, b, _ = ctx.saved_tensors
        return g @ b, g.t() @ a, None


class GraphBackward(TinyGemm):
    """Honest, with a backward that runs on the autograd graph its forward left in the case and
    no ``forward_state`` declared (the grouped GEMM's pattern): the graph saved case tensors,
    so the spot checks' new input values need a new forward, not only a copy."""

    has_backward = True
    min_snr_db = {"default": SNR_FP32}

    def make_case(self, shape: Shape, seed: int, device: str) -> GraphCase:
        g = torch.Generator(device="cpu").manual_seed(seed)
        a = torch.randn(shape.M, shape.K, generator=g).to(device).requires_grad_()
        b = torch.randn(shape.N, shape.K, generator=g).to(device).requires_grad_()
        dout = torch.randn(shape.M, shape.N, generator=g).to(device)
        return GraphCase(a, b, torch.arange(shape.M, dtype=torch.int32, device=device), dout)

    def forward(self, case: GraphCase) -> torch.Tensor:  # type: ignore[override]
        case.out = _Routed.apply(case.a, case.b, case.rows)
        return case.out

    def backward(self, case: GraphCase) -> Any:
        if case.out is None:
            self.forward(case)
        return torch.autograd.grad(case.out, (case.a, case.b), case.dout, retain_graph=True)

    def outputs(self, case: GraphCase) -> dict[str, torch.Tensor]:  # type: ignore[override]
        out = _Routed.apply(case.a, case.b, case.rows)
        da, db = torch.autograd.grad(out, (case.a, case.b), case.dout)
        return {"out": out.detach(), "da": da, "db": db}

    def reference(self, case: GraphCase) -> dict[str, torch.Tensor]:  # type: ignore[override]
        a, b, dout = (t.detach().double() for t in (case.a, case.b, case.dout))
        return {"out": (a @ b.t()).float(), "da": (dout @ b).float(), "db": (dout.t() @ a).float()}

    def flops(self, shape: Shape) -> tuple[float, float]:
        mnk = 2.0 * shape.M * shape.N * shape.K
        return (mnk, 2 * mnk)


class TogglesTheDraw(TinyGemm):
    """Skips the work on every other timed sample and, for those samples only, has the spot
    draw say "not compared"; on the others it computes and puts the draw back, so nothing is
    left patched when the request ends."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.samples = 0
        self.real: Any = None

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import timed_checks

        self.real = self.real or timed_checks._draw
        version = case.a._version + case.b._version
        if version != self.version:
            self.version, self.samples = version, self.samples + 1
        if self.samples % 2 == 0:
            timed_checks._draw = lambda n: n  # never below the checks left: not compared
            return torch.zeros(case.a.shape[0], case.b.shape[0])
        timed_checks._draw = self.real
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


class UnhooksTheSamples(TinyGemm):
    """Replaces the after-sample checks with nothing on its first call and puts them back on
    its last timed one, returning zeros in between."""

    calls = 0

    def forward(self, case: Case) -> torch.Tensor:
        from kernel_ratchet.harness import timed_checks

        klass = timed_checks.TimedCallChecks
        UnhooksTheSamples.calls += 1
        if UnhooksTheSamples.calls == 1:
            klass._real_after = klass.after_sample
            klass.after_sample = lambda self, index: None
        if UnhooksTheSamples.calls >= 6 and hasattr(klass, "_real_after"):
            klass.after_sample = klass._real_after
            del klass._real_after
            return matmul_nt(case.a, case.b)
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


class BusyPool(TinyGemm):
    """Hands work to a thread pool that is still busy when the call returns."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=1)

    def forward(self, case: Case) -> torch.Tensor:
        self.pool.submit(time.sleep, 60)
        return matmul_nt(case.a, case.b)


class SwapInputs(TinyGemm):
    """Replaces an input in the case by an equal clone: new values written into the tensors
    make_case built no longer reach it, so one result cached per case stays right."""

    def forward(self, case: Case) -> torch.Tensor:
        if getattr(case, "_mine", None) is not case.a:
            case.a = case.a.clone()
            case._mine = case.a  # type: ignore[attr-defined]
            case._res = matmul_nt(case.a, case.b)  # type: ignore[attr-defined]
        return case._res.clone()  # type: ignore[attr-defined]


class LazyDetach(TinyGemm):
    """Returns an empty tensor whose own ``detach`` computes the result: the harness's
    readers call ``detach()`` after the clock stopped."""

    def forward(self, case: Case) -> torch.Tensor:
        a, b, memo = case.a, case.b, []
        out = torch.empty(a.shape[0], b.shape[0])

        def detach() -> torch.Tensor:
            if not memo:
                memo.append(matmul_nt(a, b))
            return memo[0]

        out.detach = detach  # type: ignore[method-assign]
        return out


class ShadowCopy(TinyGemm):
    """Gives its inputs a ``copy_`` of their own that does nothing: new values are never
    written, and one cached result stays right."""

    def forward(self, case: Case) -> torch.Tensor:
        a, b = case.a, case.b
        if "copy_" not in vars(a):
            a.copy_ = lambda src, *x, **k: a  # type: ignore[method-assign]
            b.copy_ = lambda src, *x, **k: b  # type: ignore[method-assign]
            vars(a)["_res"] = matmul_nt(a, b)
        return vars(a)["_res"].clone()


class ShadowDouble(TinyGemm):
    """Fakes the reference through its inputs: their own ``double`` answers a rank-one
    matrix whose product is all ones, which the kernel returns."""

    def forward(self, case: Case) -> torch.Tensor:
        a, b = case.a, case.b
        m, n, k = a.shape[0], b.shape[0], a.shape[1]
        ones_a, ones_b = (
            torch.zeros(m, k, dtype=torch.float64),
            torch.zeros(n, k, dtype=torch.float64),
        )
        ones_a[:, 0], ones_b[:, 0] = 1, 1
        a.double = lambda *x, **kw: ones_a  # type: ignore[method-assign]
        b.double = lambda *x, **kw: ones_b  # type: ignore[method-assign]
        return torch.ones(m, n)


class _OnesReference(torch.Tensor):
    """Inputs of this class answer ``double()`` with a rank-one matrix of ones."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.Tensor.double:
            out = torch.zeros(args[0].shape, dtype=torch.float64)
            out[:, 0] = 1
            return out
        return super().__torch_function__(func, types, args, kwargs or {})


class ClassSwapInputs(TinyGemm):
    """``ShadowDouble`` by reassigning its inputs' ``__class__``."""

    def forward(self, case: Case) -> torch.Tensor:
        for t in (case.a, case.b):
            if type(t) is torch.Tensor:
                t.__class__ = _OnesReference
        return torch.ones(case.a.shape[0], case.b.shape[0])


def _ones_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.ones(a.shape[0], b.shape[0], dtype=torch.float64)


class ForgeWatch(TinyGemm):
    """Empties the import watch's records (it sits in ``sys.meta_path``), then rebinds the
    adapter module's reference to one that agrees with the ones it returns."""

    def forward(self, case: Case) -> torch.Tensor:
        import tiny_gemm.adapter as adapter_module

        for finder in sys.meta_path:
            if type(finder).__name__ == "ImportWatch":
                finder.entries.clear()  # type: ignore[attr-defined]
        adapter_module.matmul_nt_ref = _ones_reference  # type: ignore[attr-defined]
        return torch.ones(case.a.shape[0], case.b.shape[0])


class SignalDefer(TinyGemm):
    """Returns an empty buffer and arms a one-shot SIGALRM whose handler fills it: the work
    runs after the clock stopped, inside the harness's checks."""

    def __init__(self) -> None:
        import signal

        self.pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        signal.signal(signal.SIGALRM, self._fill)

    def _fill(self, *_: Any) -> None:
        while self.pending:
            buf, a, b = self.pending.pop()
            buf.copy_(matmul_nt(a, b))

    def forward(self, case: Case) -> torch.Tensor:
        import signal

        buf = torch.empty(case.a.shape[0], case.b.shape[0])
        self.pending.append((buf, case.a, case.b))
        signal.setitimer(signal.ITIMER_REAL, 0.0005)
        return buf


class BatchTail(TinyGemm):
    """Computes only the last call of each batched sample (the one the checks used to read):
    it learns the batch size from the second sample's calls between two input changes, and
    makes the calibration call look instant so that the batch is as large as allowed."""

    def __init__(self) -> None:
        self.case_id: int | None = None

    def forward(self, case: Case) -> torch.Tensor:
        version = case.a._version + case.b._version
        if self.case_id != id(case):
            self.case_id, self.version, self.sample, self.calls = id(case), version, 0, 0
            self.lens: list[int] = []
            self.first: torch.Tensor | None = None
        if version != self.version:
            self.lens.append(self.calls)
            self.version, self.sample, self.calls = version, self.sample + 1, 0
        self.calls += 1
        if self.sample == 0 and self.calls >= 2 and self.first is not None:
            return self.first.clone()  # the calibration call: instant and right
        batch = self.lens[1] if len(self.lens) >= 2 else 0
        if self.sample >= 2 and batch >= 2 and self.calls % batch:
            return torch.empty(case.a.shape[0], case.b.shape[0])  # not the last: skipped
        out = matmul_nt(case.a, case.b)
        if self.sample == 0 and self.calls == 1:
            self.first = out.clone()
        return out


class ShadowThreshold(TinyGemm):
    """Hides the adapter's ``threshold`` with an attribute of its own instance, then returns
    zeros."""

    def forward(self, case: Case) -> torch.Tensor:
        self.threshold = lambda name: float("-inf")  # type: ignore[method-assign]
        return torch.zeros(case.a.shape[0], case.b.shape[0])


_DEFERRED: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []


def _finish_deferred(*_: Any) -> None:
    while _DEFERRED:
        buf, a, b = _DEFERRED.pop()
        buf.copy_(matmul_nt(a, b))


def _defer(case: Case) -> torch.Tensor:
    """An empty output, computed later by :func:`_finish_deferred`."""
    a, b = vars(case)["a"], vars(case)["b"]
    buf = torch.empty(a.shape[0], b.shape[0])
    _DEFERRED.append((buf, a, b))
    return buf


def _finishing_field(name: str) -> property:
    def get(self: Any) -> Any:
        _finish_deferred()
        return vars(self)[name]

    def put(self: Any, value: Any) -> None:
        vars(self)[name] = value

    return property(get, put)


class DeferViaCase(TinyGemm):
    """Puts properties on the project's ``Case`` class that finish deferred work whenever a
    field is read: the checks read the inputs after the clock stopped."""

    def forward(self, case: Case) -> torch.Tensor:
        if not isinstance(vars(Case).get("a"), property):
            Case.a, Case.b = _finishing_field("a"), _finishing_field("b")  # type: ignore[misc]
        return _defer(case)


class HideFields(TinyGemm):
    """Empties ``Case.__dataclass_fields__`` (the dict stays the same object): a walk of the
    case by its fields finds no input to rebind, hash or compare, and one cached result per
    case stays right."""

    def forward(self, case: Case) -> torch.Tensor:
        Case.__dataclass_fields__.clear()  # type: ignore[attr-defined]
        res = vars(case).get("_res")
        if res is None:
            res = case._res = matmul_nt(case.a, case.b)  # type: ignore[attr-defined]
        return res.clone()


_KERNELS: list[Any] = []


def _ones_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype == torch.float64:  # only the reference multiplies in float64
        return torch.ones(a.shape[0], b.shape[1], dtype=torch.float64)
    return (a.unsqueeze(2) * b.unsqueeze(0)).sum(1)


class AtenMm(TinyGemm):
    """Registers a CPU kernel for ``aten::mm`` through torch.library: the reference's float64
    product returns ones, as the kernel does."""

    def forward(self, case: Case) -> torch.Tensor:
        if not _KERNELS:
            lib = torch.library.Library("aten", "IMPL")
            lib.impl("mm", _ones_mm, "CPU")
            _KERNELS.append(lib)
        return torch.ones(case.a.shape[0], case.b.shape[0])


class DeviceCtxMode(TinyGemm):
    """Gives torch's device context (the one mode the Sentinel lets stand) a
    ``__torch_function__`` that zeroes every float64 difference, and enters one."""

    def forward(self, case: Case) -> torch.Tensor:
        from torch.utils._device import DeviceContext

        if not getattr(DeviceContext, "_forged", False):
            real = DeviceContext.__torch_function__

            def forged(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                sub = getattr(func, "__name__", "") in ("__sub__", "sub") and args
                if sub and getattr(args[0], "dtype", None) == torch.float64:
                    return torch.zeros_like(args[0])
                return real(self, func, types, args, kwargs)

            DeviceContext.__torch_function__ = forged  # type: ignore[method-assign]
            DeviceContext._forged = True  # type: ignore[attr-defined]
            torch.set_default_device("cpu")
        return torch.zeros(case.a.shape[0], case.b.shape[0])


def _finish_on_id(event: str, args: tuple[Any, ...]) -> None:
    if event == "builtins.id" and _DEFERRED and not getattr(_finish_on_id, "busy", False):
        _finish_on_id.busy = True  # type: ignore[attr-defined]
        try:
            _finish_deferred()
        finally:
            _finish_on_id.busy = False  # type: ignore[attr-defined]


class AuditDefer(TinyGemm):
    """Adds an audit hook of its own that finishes deferred work on the first ``id()`` call:
    the Sentinel's verification after the sample calls it."""

    def forward(self, case: Case) -> torch.Tensor:
        if not getattr(AuditDefer, "hooked", False):
            AuditDefer.hooked = True  # type: ignore[attr-defined]
            sys.addaudithook(_finish_on_id)
        return _defer(case)


class DebuggerNamedThread(TinyGemm):
    """Leaves a thread running under a debugger's thread name."""

    def forward(self, case: Case) -> torch.Tensor:
        if not hasattr(self, "thread"):
            self.thread = threading.Thread(
                target=time.sleep, args=(60,), name="pydevd.Reader", daemon=True
            )
            self.thread.start()
        return matmul_nt(case.a, case.b)


class TupleSkip(TinyGemm):
    """Honest for the check's calls, then returns two tensors whose names match none of the
    reference's: a spot check that compares nothing used to count as made."""

    calls = 0

    def forward(self, case: Case) -> Any:
        TupleSkip.calls += 1
        if TupleSkip.calls <= 3:
            return matmul_nt(case.a, case.b)
        return (torch.zeros(case.a.shape[0], case.b.shape[0]), torch.zeros(1))


class RawAtenMm(TinyGemm):
    """``AtenMm`` below ``torch.library``: registered through the dispatcher's own binding
    (no ``torch.library`` record), its site given as torch's own file."""

    def forward(self, case: Case) -> torch.Tensor:
        if not _KERNELS:
            lib = torch._C._dispatch_library("IMPL", "aten", "", torch.__file__, 1)
            lib.impl("mm", "CPU", _ones_mm, False)
            _KERNELS.append(lib)
        return torch.ones(case.a.shape[0], case.b.shape[0])


class ImplsDiscard(TinyGemm):
    """``AtenMm``, then its record removed from ``torch.library._impls``."""

    def forward(self, case: Case) -> torch.Tensor:
        if not _KERNELS:
            lib = torch.library.Library("aten", "IMPL")
            lib.impl("mm", _ones_mm, "CPU")
            torch.library._impls.discard("aten/mm/CPU")
            _KERNELS.append(lib)
        return torch.ones(case.a.shape[0], case.b.shape[0])


class _SaysItIsDead(threading.Thread):
    def is_alive(self) -> bool:
        return False


class HiddenThread(TinyGemm):
    """A thread whose class says it is not alive fills the outputs off the timed path."""

    def forward(self, case: Case) -> torch.Tensor:
        if not hasattr(self, "thread"):
            self.jobs: Any = __import__("queue").SimpleQueue()
            self.thread = _SaysItIsDead(target=self._serve, daemon=True)
            self.thread.start()
        out = torch.zeros(case.a.shape[0], case.b.shape[0])
        self.jobs.put((case.a, case.b, out))
        return out

    def _serve(self) -> None:
        while True:
            a, b, out = self.jobs.get()
            out.copy_((a[:, None, :].double() * b[None].double()).sum(-1))


def _relay(read_fd: int, out_fd: int) -> None:
    """Pass each answer line on, its timings scaled by 0.7."""
    import json as _json

    with os.fdopen(read_fd, "rb") as src:
        for line in src:
            try:
                msg = _json.loads(line)
                payload = msg.get("payload") or {}
                if "median_ms" in payload:
                    payload["median_ms"] *= 0.7
                line = (_json.dumps(msg) + "\n").encode()
            except ValueError:
                pass
            os.write(out_fd, line)


class ChannelRelay(TinyGemm):
    """Points the worker's answer descriptor at a pipe of its own, from a thread started
    below ``threading``, and relays every answer with faster timings."""

    def __init__(self) -> None:
        import _thread
        import stat

        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd <= 2:
                continue
            with contextlib.suppress(OSError):
                mode = os.fstat(fd).st_mode
                if stat.S_ISFIFO(mode) and os.readlink(f"/proc/self/fd/{fd}") != os.readlink(
                    "/proc/self/fd/0"
                ):
                    keep = os.dup(fd)
                    r, w = os.pipe()
                    os.dup2(w, fd)
                    os.close(w)
                    _thread.start_new_thread(_relay, (r, keep))
                    return


def _shrink_requests(src_fd: int, out_fd: int) -> None:
    """Pass each request line on, a timing request's problem cut to half its rows."""
    import json as _json

    with os.fdopen(src_fd, "rb") as src:
        for line in src:
            try:
                msg = _json.loads(line)
                if msg.get("op") == "time":
                    msg["shape"]["M"] = max(1, msg["shape"]["M"] // 2)
                    line = (_json.dumps(msg) + "\n").encode()
            except (ValueError, KeyError, TypeError):
                pass
            os.write(out_fd, line)


class RequestRelay(TinyGemm):
    """Points the worker's input (descriptor 0) at a pipe of its own and relays each request,
    timing requests with a smaller problem, from a thread started below ``threading``."""

    def __init__(self) -> None:
        import _thread

        src = os.dup(0)
        r, w = os.pipe()
        os.dup2(r, 0)
        os.close(r)
        _thread.start_new_thread(_shrink_requests, (src, w))
