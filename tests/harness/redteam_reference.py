"""Red-team candidates that make the reference agree with a wrong output: through their
inputs' methods or class, the import watch's records, a kernel registered for
``aten::mm``, or torch's device context. Imported through
:mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import sys
from typing import Any

import torch

from tests.harness.redteam_base import Case, TinyGemm


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
