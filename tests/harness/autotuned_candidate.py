"""An honest op whose kernel is under ``@triton.autotune`` (out = 2 * x), for the worker test
of autotuning picked again alone."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernel_ratchet.harness.adapter import SNR_FP32, Adapter, Shape


@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"])
@triton.jit
def _double(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


@dataclass
class Case:
    x: torch.Tensor


class Doubled(Adapter):
    """out = 2 * x over M x N float32, forward only."""

    schema = "memory"
    has_backward = False
    min_snr_db = {"out": SNR_FP32}

    def make_case(self, shape: Shape, seed: int, device: str) -> Case:
        g = torch.Generator(device="cpu").manual_seed(seed)
        return Case(torch.randn(shape.M, shape.N, generator=g).to(device))

    def forward(self, case: Case) -> torch.Tensor:
        y = torch.empty_like(case.x)
        n = case.x.numel()
        _double[lambda m: (triton.cdiv(n, m["B"]),)](case.x, y, n)
        return y

    def outputs(self, case: Case) -> dict[str, torch.Tensor]:
        return {"out": self.forward(case)}

    def reference(self, case: Case) -> dict[str, torch.Tensor]:
        return {"out": case.x * 2}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (float(shape.M * shape.N), 0.0)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        return (8.0 * shape.M * shape.N, 0.0)
