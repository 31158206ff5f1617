"""Cheating candidates of the public record, as adapters around the tiny example GEMM.

Imported inside worker processes as ``tests.redteam.candidates:<Class>`` with the repository
root as ``source_root``; holds no tests. Each class is a small subclass of the honest
:class:`tiny_gemm.adapter.TinyGemm` that fakes a result or a time in one way, named in its
docstring together with the public report it comes from (the catalogue lists them all). Nothing
here runs at import time: candidates whose trick *is* an import-time side effect live in their
own modules under ``tests/redteam/import_time/``.
"""

from __future__ import annotations

import _thread
import gc
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from kernel_ratchet.harness.adapter import SNR_BF16

_EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm")
if _EXAMPLE not in sys.path:
    sys.path.insert(0, _EXAMPLE)

from tiny_gemm.adapter import Case, TinyGemm  # noqa: E402
from tiny_gemm.kernel import matmul_nt  # noqa: E402

__all__ = ["TinyGemm"]


def _shape_of(case: Case) -> tuple[int, int]:
    return case.a.shape[0], case.b.shape[0]


class UninitReuse(TinyGemm):
    """Computes once, then returns ``torch.empty`` without writing it: the block the allocator
    hands back often still holds the previous result (the AI CUDA Engineer incident; KernelBench
    adversarial test ``result_reuse_kernel``)."""

    def __init__(self) -> None:
        self.calls = 0

    def forward(self, case: Case) -> torch.Tensor:
        self.calls += 1
        if self.calls == 1:
            return matmul_nt(case.a, case.b)
        return torch.empty(_shape_of(case), dtype=torch.float32, device=case.a.device)


class ZerosOutput(TinyGemm):
    """Returns zeros: passes an absolute-tolerance check wherever the true output is small
    (KernelBench issue #165: 4 of 60 level-1 problems)."""

    def forward(self, case: Case) -> torch.Tensor:
        return torch.zeros(_shape_of(case), dtype=torch.float32, device=case.a.device)


class PartialK(TinyGemm):
    """Shrinks the problem: reduces over half of K and doubles the result (KernelBench's
    ``partial_computation_hack``: a subsample that is statistically close)."""

    def forward(self, case: Case) -> torch.Tensor:
        half = max(case.a.shape[1] // 2, 1)
        scale = case.a.shape[1] / half
        return matmul_nt(case.a[:, :half].contiguous(), case.b[:, :half].contiguous()) * scale


class SeedReplay(TinyGemm):
    """Ignores its inputs and returns the answer for inputs regenerated from a guessed seed
    (fixed seeds in KernelBench's harness and in gpu-mode task files)."""

    def __init__(self) -> None:
        self.answers: dict[tuple[int, ...], torch.Tensor] = {}

    def forward(self, case: Case) -> torch.Tensor:
        key = (*case.a.shape, case.b.shape[0])
        if key not in self.answers:
            g = torch.Generator().manual_seed(0)
            a = torch.randn(*case.a.shape, generator=g).to(case.a.device)
            b = torch.randn(*case.b.shape, generator=g).to(case.a.device)
            self.answers[key] = matmul_nt(a, b)
        return self.answers[key].clone()


class CorrectThenWrong(TinyGemm):
    """Right for as many calls as a correctness check makes, then returns zeros (warmup
    detection in pygpubench's exploit suite; a kernel "correct at the first check and wrong
    later")."""

    HONEST_CALLS = 3

    def __init__(self) -> None:
        self.calls = 0

    def forward(self, case: Case) -> torch.Tensor:
        self.calls += 1
        if self.calls <= self.HONEST_CALLS:
            return matmul_nt(case.a, case.b)
        return torch.zeros(_shape_of(case), dtype=torch.float32, device=case.a.device)


class CallerInspection(TinyGemm):
    """Reads the call stack: honest when called from the correctness check, a stale copy of its
    last result when called from the timing loop (METR's report of models tracing the grader's
    call stack)."""

    def __init__(self) -> None:
        self.last: torch.Tensor | None = None

    def forward(self, case: Case) -> torch.Tensor:
        frame, checked = sys._getframe(1), False
        while frame is not None:
            checked |= frame.f_code.co_name == "check"
            frame = frame.f_back
        if checked or self.last is None or self.last.shape != _shape_of(case):
            self.last = matmul_nt(case.a, case.b)
            return self.last.clone()
        return self.last.clone()


class PoisonAwareSkip(TinyGemm):
    """Batch-and-skip keyed on the harness's own signals: returns its last output tensor again
    until the harness NaN-poisons it (a new sample begins) or rewrites the same input tensors in
    place (a rebind), so only the first call of each timed batch computes (gpu-mode
    reference-kernels PR #104: 14 of 15 timed calls made no-ops; pygpubench's warmup
    detection). New input objects alone do not trigger a recompute: in training it returns
    stale results, fast."""

    def __init__(self) -> None:
        self.out: torch.Tensor | None = None
        self.seen: list[tuple[int, int]] = []

    def forward(self, case: Case) -> torch.Tensor:
        now = [(id(t), t._version) for t in (case.a, case.b)]
        same_objects = [i for i, _ in now] == [i for i, _ in self.seen]
        rebound = same_objects and now != self.seen
        out = self.out
        if (
            out is not None
            and out.shape == _shape_of(case)
            and not bool(out.view(-1)[0].isnan())
            and not rebound
        ):
            return out
        self.out, self.seen = matmul_nt(case.a, case.b), now
        return self.out


class GcScavenge(TinyGemm):
    """Looks through ``gc.get_objects()`` for a finite tensor of the output's shape (an expected
    output the harness computed earlier) and returns a copy, else zeros (pygpubench exploits
    ``submission_gc_copy`` / ``gc_nan``)."""

    def forward(self, case: Case) -> torch.Tensor:
        shape = _shape_of(case)
        for obj in gc.get_objects():
            if (
                type(obj) is torch.Tensor
                and tuple(obj.shape) == shape
                and obj.dtype == torch.float32
                and bool(torch.isfinite(obj).all())
                and bool(obj.abs().sum() > 0)
            ):
                return obj.clone()
        return torch.zeros(shape, dtype=torch.float32, device=case.a.device)


class ProfileHookRewrite(TinyGemm):
    """Does no work (zeros) and installs a ``sys.setprofile`` hook that, when the checker's
    ``check_outputs`` is entered, overwrites the reference in the caller's mapping with the
    candidate's own output (METR: o3 traced the call stack to the grader's answer; pygpubench
    issue #23: the in-process checker is reachable from the candidate)."""

    @staticmethod
    def _hook(frame, event, arg) -> None:  # noqa: ANN001
        if event == "call" and frame.f_code.co_name == "check_outputs":
            got, ref = frame.f_locals.get("got"), frame.f_locals.get("ref")
            if isinstance(got, dict) and isinstance(ref, dict):
                for name in list(ref):
                    if name in got:
                        ref[name] = got[name]

    def forward(self, case: Case) -> torch.Tensor:
        if sys.getprofile() is not self._hook:
            sys.setprofile(self._hook)
        return torch.zeros(_shape_of(case), dtype=torch.float32, device=case.a.device)


class _SubtractionIsZero(torch.overrides.TorchFunctionMode):
    """Every tensor subtraction returns zeros: ``out - ref`` in any checker reads "no error"."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        result = func(*args, **(kwargs or {}))
        if func in (torch.Tensor.__sub__, torch.Tensor.sub, torch.sub):
            return torch.zeros_like(result)
        return result


class TorchModeHijack(TinyGemm):
    """Does no work (zeros) and leaves a global ``TorchFunctionMode`` entered that makes every
    subtraction zero, so the checker's ``out - ref`` reads a perfect match (Wafer's field guide
    and KernelBench's static checker: lazy and intercepted evaluation that defers or fakes the
    work inside the untimed checker)."""

    def forward(self, case: Case) -> torch.Tensor:
        if not getattr(TorchModeHijack, "_entered", False):
            TorchModeHijack._entered = True
            _SubtractionIsZero().__enter__()
        return torch.zeros(_shape_of(case), dtype=torch.float32, device=case.a.device)


class ProtocolForgery(TinyGemm):
    """Does no work and writes a forged "all outputs pass" answer on the worker's protocol
    channel, found with ``gc`` (pygpubench exploits ``submission_fd_overwrite`` and
    ``pipe_interpose``: the result channel is reachable from the candidate)."""

    def forward(self, case: Case) -> torch.Tensor:
        forged = {
            "ok": True,
            "category": "ok",
            "detail": "all outputs pass",
            "payload": {"snr": {"out": 200.0}, "passed": True, "checks": ["types", "rebind"]},
        }
        for obj in gc.get_objects():
            if isinstance(obj, io.TextIOWrapper) and not obj.closed and obj.writable():
                try:
                    fd = obj.fileno()
                except (OSError, ValueError):
                    continue
                if fd > 2:
                    obj.write(json.dumps(forged) + "\n")
                    obj.flush()
        return torch.zeros(_shape_of(case), dtype=torch.float32, device=case.a.device)


class RawThread(TinyGemm):
    """Starts its background work with ``_thread.start_new_thread``: such a thread is absent from
    ``threading.enumerate()`` (Wafer's field guide: thread injection; KernelBench's static
    checker looks for ``threading`` only)."""

    def __init__(self) -> None:
        self.started = False

    def forward(self, case: Case) -> torch.Tensor:
        if not self.started:
            self.started = True
            _thread.start_new_thread(time.sleep, (60,))
        return matmul_nt(case.a, case.b)


class ChildProcess(TinyGemm):
    """Leaves a helper process running: work (or a load that slows the *other* side of a paired
    A/B) outside the timed process (KernelBench's static checker: multiprocessing)."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None

    def forward(self, case: Case) -> torch.Tensor:
        if self.child is None:
            self.child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        return matmul_nt(case.a, case.b)


class GlobalNumericFlags(TinyGemm):
    """Flips process-wide numeric switches (TF32 matmuls, reduced float32 matmul precision):
    on a GPU they make fp32 GEMMs faster *and* degrade a reference computed in the same process
    (KernelBench's precision-downgrade check; Wafer: lower precision passing a loose check)."""

    def forward(self, case: Case) -> torch.Tensor:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("medium")
        return matmul_nt(case.a, case.b)


class LooseGate(TinyGemm):
    """The honest kernel of an fp32 op whose profile set a loose, bf16-level gate (40 dB)."""

    min_snr_db = {"out": SNR_BF16}


class LooseGateBf16(LooseGate):
    """Computes in bf16 where the incumbent is fp32-exact: ~50 dB passes the loose 40 dB gate,
    yet the precision of the result fell by ~90 dB (Wafer: lower precision passing a loose
    correctness check; KernelBench's ``precision_downgrade`` warning)."""

    def forward(self, case: Case) -> torch.Tensor:
        return (case.a.bfloat16() @ case.b.bfloat16().T).float()


class ConstantInputs(TinyGemm):
    """Honest kernel, low-entropy inputs: zeros and ones draw less power than random data, so a
    GPU holds higher clocks and the same GEMM reads faster (Horace He, "Strangely, Matrix
    Multiplications on GPUs Run Faster When Given 'Predictable' Data")."""

    def make_case(self, shape, seed: int, device: str) -> Case:  # noqa: ANN001
        a = torch.ones(shape.M, shape.K, device=device)
        b = torch.zeros(shape.N, shape.K, device=device)
        b[:, 0] = 1.0
        return Case(a, b)


# -- GPU-only candidates (used by test_gpu_cheats.py) ------------------------------------------


def _cudart():  # loaded lazily: the CPU suite never touches the CUDA runtime
    import ctypes

    torch.cuda.init()
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libcudart.so" in line:
                return ctypes.CDLL(line.split()[-1])
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise RuntimeError("no CUDA runtime library found in the process")


class L2Persist(TinyGemm):
    """Pins its inputs in L2 with a persisting access-policy window on the calling stream, so
    the timing engine's L2 flush no longer evicts them (pygpubench PR #49: L2 persistence
    reward hacking, seen in two autoresearch runs)."""

    LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
    ATTR_ACCESS_POLICY_WINDOW = 1  # cudaStreamAttributeAccessPolicyWindow
    PERSISTING, STREAMING = 2, 1  # cudaAccessProperty

    def __init__(self) -> None:
        self.pinned: int | None = None

    def _pin(self, t: torch.Tensor) -> None:
        import ctypes
        import struct

        rt = _cudart()
        err = rt.cudaDeviceSetLimit(
            ctypes.c_int(self.LIMIT_PERSISTING_L2), ctypes.c_size_t(8 * t.nbytes)
        )
        window = ctypes.create_string_buffer(64)  # cudaStreamAttrValue (a 64-byte union)
        struct.pack_into(
            "<QQfii", window, 0, t.data_ptr(), t.nbytes, 1.0, self.PERSISTING, self.STREAMING
        )
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        err = err or rt.cudaStreamSetAttribute(
            stream, ctypes.c_int(self.ATTR_ACCESS_POLICY_WINDOW), window
        )
        if err:
            raise RuntimeError(f"could not set a persisting L2 window (cudaError {err})")
        self.pinned = t.data_ptr()

    def forward(self, case: Case) -> torch.Tensor:
        if self.pinned != case.b.data_ptr():
            self._pin(case.b)
        return matmul_nt(case.a, case.b)
