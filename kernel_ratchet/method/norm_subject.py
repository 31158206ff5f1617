"""A norm-like subject for the method checks: an RMS norm's forward and backward in bf16, a
short memory-bound op (tens of microseconds), and variants of it with a planted effect.

The forward is PyTorch's own (``torch.nn.functional.rms_norm``), the backward a few PyTorch
element-wise and reduction kernels from the saved reciprocal RMS (both in :mod:`.norm_kernel`,
the op's kernel file, apart from this adapter's reference): the checks are about the
measurement, not about a kernel of this package. A planted variant
normalises ``PAD`` x M rows while its bytes stay those of M, so it is slower by about that
factor (the op's time is proportional to its rows at these sizes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from kernel_ratchet.harness.adapter import Adapter, Shape
from kernel_ratchet.method import norm_kernel

#: Five shapes (rows x width) from the issue's smallest, 4096x2048, to a 64 MiB activation.
GPU_SHAPES = [(4096, 2048), (4096, 8192), (8192, 4096), (16384, 2048), (32768, 1024)]
#: Interpreter-sized shapes: a smoke test of the trials on the CPU, not a measurement.
CPU_SHAPES = [(64, 256), (96, 128)]
EPS = norm_kernel.EPS


def shapes(dims: list[tuple[int, int]]) -> list[Shape]:
    """``Shape`` objects labelled ``tok{M}_d{N}``."""
    return [Shape(f"tok{m}_d{n}", m, n) for m, n in dims]


@dataclass
class NormCase:
    """Inputs of one RMS norm: ``x`` (M x N), weight ``w`` (N), upstream gradient ``dy``, and
    ``rstd`` (M, fp32), the reciprocal RMS a forward saves for its backward."""

    x: torch.Tensor
    w: torch.Tensor
    dy: torch.Tensor
    rstd: torch.Tensor


class RmsNormBf16(Adapter):
    """RMS norm over the last dimension, bf16 in and out (fp32 on the CPU); the backward takes
    the saved ``rstd`` and gives dx and dw, computed in fp32."""

    schema: ClassVar[str] = "memory"
    has_backward: ClassVar[bool] = True
    PAD: ClassVar[float] = 1.0

    def dtype(self, device: str) -> torch.dtype:
        return torch.bfloat16 if device.startswith("cuda") else torch.float32

    def make_case(self, shape: Shape, seed: int, device: str) -> NormCase:
        g = torch.Generator(device=device).manual_seed(seed)
        rows = max(1, round(shape.M * self.PAD))
        dt = self.dtype(device)

        def randn(*size: int) -> torch.Tensor:
            return torch.randn(*size, generator=g, device=device)

        x = randn(rows, shape.N).to(dt)
        w = (1 + 0.1 * randn(shape.N)).to(dt)
        dy = randn(rows, shape.N).to(dt)
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS)
        return NormCase(x, w, dy, rstd)

    def forward(self, case: NormCase) -> torch.Tensor:
        return norm_kernel.forward(case.x, case.w)

    def backward(self, case: NormCase) -> tuple[torch.Tensor, torch.Tensor]:
        return norm_kernel.backward(case.x, case.w, case.dy, case.rstd)

    def returned_names(self, phase: str) -> tuple[str, ...] | None:
        return ("dx", "dw") if phase == "bwd" else ("y",)

    def outputs(self, case: NormCase) -> dict[str, torch.Tensor]:
        dx, dw = self.backward(case)
        return {"y": self.forward(case), "dx": dx, "dw": dw}

    def reference(self, case: NormCase) -> dict[str, torch.Tensor]:
        x = case.x.double().requires_grad_(True)
        w = case.w.double().requires_grad_(True)
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
        dx, dw = torch.autograd.grad(y, (x, w), case.dy.double())
        return {"y": y.detach().float(), "dx": dx.float(), "dw": dw.float()}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (0.0, 0.0)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        """Forward reads x and w and writes y; backward reads x, w, dy and rstd and writes dx
        and dw (2 bytes per element on the GPU, 4 for rstd)."""
        mn, m, n = shape.M * shape.N, shape.M, shape.N
        return (2.0 * (2 * mn + n), 2.0 * (3 * mn + 2 * n) + 4.0 * m)


class SlowerRmsNormBf16(RmsNormBf16):
    """The candidate of the planted-slowdown scenario: 3% more rows."""

    PAD = 1.03


class FasterBaselineRmsNormBf16(RmsNormBf16):
    """The *incumbent* of the planted-speedup scenario (the candidate is plain): 5% more rows."""

    PAD = 1.05


def sides() -> dict[str, tuple[str, str]]:
    """{scenario: (incumbent adapter, candidate adapter)} of the norm subject."""
    here = "kernel_ratchet.method.norm_subject"
    return {
        "A/A": (f"{here}:RmsNormBf16", f"{here}:RmsNormBf16"),
        "slower 3%": (f"{here}:RmsNormBf16", f"{here}:SlowerRmsNormBf16"),
        "faster 5%": (f"{here}:FasterBaselineRmsNormBf16", f"{here}:RmsNormBf16"),
    }
