"""Harness adapters of the grouped GEMMs (schema "gemm", forward + backward).

``M`` of a shape is the routed rows ``sum(group_lens)``, so the GEMM columns mean what they
mean for a dense GEMM: forward FLOPs ``2*M*N*K``, backward ``4*M*N*K`` (dgrad + wgrad).
``outputs`` names: ``out`` (forward), ``da`` (dx), ``db`` (dw), checked against the fp32
reference of :mod:`.reference`.

Operands are bf16 on a GPU. On the CPU (Triton interpreter) they are fp16, because the
interpreter's ``tl.dot`` on bf16 inputs returns wrong values (fp16/fp32/fp8 are right).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from kernel_ratchet.harness.adapter import SNR_BF16, SNR_E4M3, Adapter, Shape
from kernel_ratchet.kernels.grouped_gemm.fp8 import grouped_gemm_fp8_blockwise
from kernel_ratchet.kernels.grouped_gemm.kernel import grouped_gemm
from kernel_ratchet.kernels.grouped_gemm.reference import grouped_gemm_ref
from kernel_ratchet.kernels.grouped_gemm.shapes import lens_of


@dataclass
class GroupedCase:
    """Inputs of one shape; ``out`` is set by ``forward`` for ``backward``."""

    x: torch.Tensor
    w: torch.Tensor
    group_lens: torch.Tensor
    dout: torch.Tensor
    out: torch.Tensor | None = None


def operand_dtype(device: str) -> torch.dtype:
    """bf16 on a GPU; fp16 in the interpreter (its bf16 tl.dot is wrong)."""
    return torch.bfloat16 if str(device).startswith("cuda") else torch.float16


def make_grouped_case(shape: Shape, seed: int, device: str) -> GroupedCase:
    """Random x [M, K], w [G, N, K] (scaled 1/sqrt(K)), dout [M, N]; lens from the shape."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = operand_dtype(device)
    lens = torch.tensor(lens_of(shape), dtype=torch.int32)
    M, N, K, G = shape.M, shape.N, shape.K, shape.B

    on_gpu = str(device).startswith("cuda")
    if on_gpu:  # draw on the GPU: the weights of a real MoE layer are gigabytes
        gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*size: int, scale: float = 1.0) -> torch.Tensor:
        t = torch.randn(size, generator=gen, device=device if on_gpu else "cpu")
        return (t * scale).to(dtype)

    x = randn(M, K).requires_grad_()
    w = randn(G, N, K, scale=1.0 / math.sqrt(max(K, 1))).requires_grad_()
    dout = randn(M, N)
    return GroupedCase(x, w, lens.to(device), dout)


class _GroupedAdapter(Adapter):
    schema: ClassVar[str] = "gemm"
    has_backward: ClassVar[bool] = True

    @staticmethod
    def op(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def make_case(self, shape: Shape, seed: int, device: str) -> GroupedCase:
        return make_grouped_case(shape, seed, device)

    def forward(self, case: GroupedCase) -> torch.Tensor:
        case.out = self.op(case.x, case.w, case.group_lens)
        return case.out

    def backward(self, case: GroupedCase) -> Any:
        if case.out is None:
            self.forward(case)
        return torch.autograd.grad(case.out, (case.x, case.w), case.dout, retain_graph=True)

    def outputs(self, case: GroupedCase) -> dict[str, torch.Tensor]:
        out = self.op(case.x, case.w, case.group_lens)
        dx, dw = torch.autograd.grad(out, (case.x, case.w), case.dout)
        return {"out": out.detach(), "da": dx, "db": dw}

    def reference(self, case: GroupedCase) -> dict[str, torch.Tensor]:
        ref = grouped_gemm_ref(case.x, case.w, case.group_lens, case.dout)
        return {"out": ref["out"], "da": ref["dx"], "db": ref["dw"]}

    def flops(self, shape: Shape) -> tuple[float, float]:
        mnk = float(shape.M) * shape.N * shape.K
        return (2.0 * mnk, 4.0 * mnk)


class GroupedGemmBf16Adapter(_GroupedAdapter):
    """bf16 grouped GEMM (x_g @ w_gᵀ), forward + dgrad + wgrad; bf16 thresholds (40 dB)."""

    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_BF16}
    op = staticmethod(grouped_gemm)


class GroupedGemmFp8BlockwiseAdapter(_GroupedAdapter):
    """FP8 blockwise grouped GEMM, quantization included in the timed calls; E4M3 (25 dB)."""

    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_E4M3}
    op = staticmethod(grouped_gemm_fp8_blockwise)
