"""An honest candidate whose launch autotunes: the tiny GEMM, its result passed through a copy
kernel under ``@triton.autotune``, for the worker test of autotuning picked again alone."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tests.harness.redteam_base import TinyGemm


@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"])
@triton.jit
def _copy(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)


class AutotunedCopy(TinyGemm):
    """out = a @ b.T, written through the autotuned copy."""

    def forward(self, case) -> torch.Tensor:
        out = super().forward(case)
        y = torch.empty_like(out)
        n = out.numel()
        _copy[lambda m: (triton.cdiv(n, m["B"]),)](out, y, n)
        return y
