"""Harness adapters of the grouped GEMMs (schema "gemm", forward + backward).

``M`` of a shape is the routed rows ``sum(group_lens)``, so the GEMM columns mean what they
mean for a dense GEMM: forward FLOPs ``2*M*N*K``, backward ``4*M*N*K`` (dgrad + wgrad).
``outputs`` names: ``out`` (forward), ``da`` (dx), ``db`` (dw), checked against the fp32
reference of :mod:`.reference`.

Operands are bf16 on a GPU. On the CPU (Triton interpreter) they are fp16, because the
interpreter's ``tl.dot`` on bf16 inputs returns wrong values (fp16/fp32/fp8 are right).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from kernel_ratchet.harness.adapter import SNR_BF16, SNR_E4M3, Adapter, Shape
from kernel_ratchet.kernels.grouped_gemm.fp8 import grouped_gemm_fp8_blockwise
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_gemm
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
        t = torch.randn(size, generator=gen, device=device if on_gpu else "cpu", dtype=dtype)
        return t.mul_(scale) if scale != 1.0 else t

    x = randn(M, K).requires_grad_()
    w = randn(G, N, K, scale=1.0 / math.sqrt(max(K, 1))).requires_grad_()
    dout = randn(M, N)
    return GroupedCase(x, w, lens.to(device), dout)


#: Above this many weight elements, ``db`` is checked on a few groups only (see below).
FULL_DW_CHECK_LIMIT = 1 << 27


def checked_groups(case: GroupedCase) -> list[int] | None:
    """Groups whose weight gradient is compared; None = all.

    A real MoE layer's fp32 reference weight gradient is tens of GB, so above
    FULL_DW_CHECK_LIMIT elements ``db`` covers, in this order and while the compared part stays
    under FULL_DW_CHECK_LIMIT // 8 elements (at least one group): the largest group, the first
    empty one, the smallest non-empty one, the first and the last group, i.e. the edges of the
    device-side schedule. ``out`` and ``da`` are always compared in full.
    """
    G, N, K = case.w.shape
    if case.w.numel() <= FULL_DW_CHECK_LIMIT:
        return None
    lens = [int(v) for v in case.group_lens.cpu().tolist()]
    nonempty = [g for g, n in enumerate(lens) if n]
    order = [max(range(G), key=lens.__getitem__)]
    order += [g for g, n in enumerate(lens) if n == 0][:1]
    order += [min(nonempty, key=lens.__getitem__)] if nonempty else []
    order += [0, G - 1]
    picks: list[int] = []
    for g in order:
        if g not in picks and (not picks or (len(picks) + 1) * N * K <= FULL_DW_CHECK_LIMIT // 8):
            picks.append(g)
    return sorted(picks)


def _reference(case: GroupedCase, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The per-group products in ``dtype``, under the adapters' output names; ``db`` on the
    groups :func:`checked_groups` picks."""
    ref = grouped_gemm_ref(
        case.x, case.w, case.group_lens, case.dout, dtype=dtype, dw_groups=checked_groups(case)
    )
    return {"out": ref["out"], "da": ref["dx"], "db": ref["dw"]}


class _GroupedAdapter(Adapter):
    schema: ClassVar[str] = "gemm"
    has_backward: ClassVar[bool] = True

    @staticmethod
    def op(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def make_case(self, shape: Shape, seed: int, device: str) -> GroupedCase:
        return make_grouped_case(shape, seed, device)

    def training_roles(self, case: GroupedCase) -> dict[str, str]:
        """Roles in a training step, for the transfer guard's fresh-tensor simulation."""
        return {"x": "activation", "w": "weight", "dout": "grad_out", "group_lens": "routing"}

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
        return {"out": out.detach(), "da": dx, "db": self.checked_part("db", dw, case)}

    def checked_part(self, name: str, value: Any, case: GroupedCase) -> Any:
        """``db`` on the groups :func:`checked_groups` picks (the whole weight gradient of a
        small layer); the timed backward returns all of it, and its checks compare this part."""
        groups = checked_groups(case) if name == "db" else None
        return value if groups is None else value[groups]

    def reference(self, case: GroupedCase) -> dict[str, torch.Tensor]:
        return _reference(case, torch.float32)

    def spot_reference(self, case: GroupedCase) -> dict[str, torch.Tensor]:
        """On a GPU, the same per-group products in the operands' own precision (cuBLAS,
        fp32 accumulation, bf16 results): ~50 dB from the fp32 reference, far above every
        threshold, for a fraction of its time (the fp32 reference of a 235B-class MoE layer
        is several TFLOP without tensor cores, computed once per timed request). On the CPU,
        the reference itself."""
        on_gpu = case.x.device.type == "cuda"
        return _reference(case, case.x.dtype if on_gpu else torch.float32)

    def flops(self, shape: Shape) -> tuple[float, float]:
        mnk = float(shape.M) * shape.N * shape.K
        return (2.0 * mnk, 4.0 * mnk)


class GroupedGemmBf16Adapter(_GroupedAdapter):
    """bf16 grouped GEMM (x_g @ w_gᵀ), forward + dgrad + wgrad; bf16 thresholds (40 dB)."""

    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_BF16}
    op = staticmethod(grouped_gemm)


class GroupedGemmFp8BlockwiseAdapter(_GroupedAdapter):
    """FP8 blockwise grouped GEMM, quantization included in the timed calls; E4M3 (25 dB).
    The FP8 path itself, whatever the dispatch table says (its kernels are what a campaign on
    it changes)."""

    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_E4M3}
    op = staticmethod(functools.partial(grouped_gemm_fp8_blockwise, dispatch=False))


class GroupedGemmFp8BlockwiseDispatched(_GroupedAdapter):
    """The FP8 blockwise grouped GEMM as a caller gets it: where the measured dispatch table
    (:mod:`.dispatch`) found our FP8 step slower, the bf16 grouped GEMM runs instead (more
    precise than FP8, so within the FP8 threshold)."""

    min_snr_db: ClassVar[dict[str, float]] = {"default": SNR_E4M3}
    op = staticmethod(grouped_gemm_fp8_blockwise)
