"""Red-team candidates only the GPU red team runs (``test_redteam_gpu.py``): work on a side
stream, a faked CUDA event, an illegal access, a kernel that does not compile, an
allocation past device memory. Imported through :mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


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
