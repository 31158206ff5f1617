"""Vendor baselines of the Linear GEMM ops, for the benchmark's comparison columns.

* bf16: cuBLAS through ``torch.matmul`` (forward ``a @ bᵀ``, backward ``dout @ b``, ``doutᵀ @ a``).
* FP8 tensorwise / rowwise: ``torch._scaled_mm`` (cuBLASLt) fed by **our** quantization kernels
  with the same recipe as :mod:`.fp8`, so the ratio ours/vendor isolates the GEMM kernels.
* FP8 blockwise: ``torch.nn.functional.scaled_mm`` (cuBLASLt) with ``BlockWise1x128`` /
  ``BlockWise128x128``, the scales laid out as cuBLAS reads them (:func:`outer_major`,
  :func:`cublas_blocks`), where this torch build supports it on the device (one probe call per
  case; a raising probe means "no vendor"). Fed by our quantization kernels as :mod:`.fp8`
  calls them, the same passes in the same phase: ``a`` and ``dout`` quantized both ways in one
  read where :func:`.fp8.dual_ok`, ``aᵀ`` then made in the forward.

Each factory returns ``(forward, backward)`` closures over one case, or None when there is no
vendor kernel for the recipe on this build.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from kernel_ratchet.kernels.gemm.adapter import GemmCase
from kernel_ratchet.kernels.gemm.fp8 import dual_ok
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.launch import (
    quant_fp8_block_128x128,
    quant_fp8_blockwise_1x128,
    quant_fp8_rowwise,
    quant_fp8_tensorwise,
)

E4M3 = torch.float8_e4m3fn
Fn = Callable[[], object]


def bf16_vendor(case: GemmCase) -> tuple[Fn, Fn]:
    """cuBLAS forward and backward of ``a @ bᵀ``."""
    a, b, dout = case.a, case.b, case.dout
    return (lambda: a @ b.t()), (lambda: (dout @ b, dout.t() @ a))


def _smm(x: torch.Tensor, yt: torch.Tensor, sx: torch.Tensor, sy: torch.Tensor) -> torch.Tensor:
    """``x [M, K] @ yt [N, K]ᵀ`` through cuBLASLt; both row-major K-major FP8."""
    return torch._scaled_mm(x, yt.t(), scale_a=sx, scale_b=sy, out_dtype=torch.bfloat16)


def tensorwise_vendor(case: GemmCase, grad_dtype: torch.dtype) -> tuple[Fn, Fn]:
    a, b, dout = case.a, case.b, case.dout
    state: dict[str, object] = {}

    def fwd() -> torch.Tensor:
        qa = quant_fp8_tensorwise(a, E4M3, with_transpose=True)
        qb = quant_fp8_tensorwise(b, E4M3, with_transpose=True)
        state.update(qa=qa, qb=qb)
        return _smm(qa.data, qb.data, qa.scale, qb.scale)

    def bwd() -> tuple[torch.Tensor, torch.Tensor]:
        if not state:
            fwd()
        qa, qb = state["qa"], state["qb"]
        qd = quant_fp8_tensorwise(dout, grad_dtype, with_transpose=True)
        da = _smm(qd.data, qb.data_t, qd.scale, qb.scale)  # type: ignore[union-attr]
        db = _smm(qd.data_t, qa.data_t, qd.scale, qa.scale)  # type: ignore[union-attr]
        return da, db

    return fwd, bwd


def rowwise_vendor(case: GemmCase, grad_dtype: torch.dtype) -> tuple[Fn, Fn]:
    a, b, dout = case.a, case.b, case.dout

    def rows(x: torch.Tensor, dtype: torch.dtype, transpose: bool = False):
        q = quant_fp8_rowwise(x, dtype, transpose=transpose)
        return q.data, q.scale

    def fwd() -> torch.Tensor:
        (qa, sa), (qb, sb) = rows(a, E4M3), rows(b, E4M3)
        return _smm(qa, qb, sa[:, None], sb[None, :])

    def bwd() -> tuple[torch.Tensor, torch.Tensor]:
        (qd, sd), (qbt, sbt) = rows(dout, grad_dtype), rows(b, E4M3, True)
        da = _smm(qd, qbt, sd[:, None], sbt[None, :])
        (qdt, sdt), (qat, sat) = rows(dout, grad_dtype, True), rows(a, E4M3, True)
        db = _smm(qdt, qat, sdt[:, None], sat[None, :])
        return da, db

    return fwd, bwd


def outer_major(s: torch.Tensor) -> torch.Tensor:
    """1x128 scales ``[outer, L]`` (L = contraction groups) stored outer-dim-major, strides
    ``(1, outer)``: the layout cuBLAS reads for ``BlockWise1x128`` (ours already is)."""
    return s if s.stride(0) == 1 else s.t().contiguous().t()


def cublas_blocks(s: torch.Tensor) -> torch.Tensor:
    """128x128 block scales ``[outer blocks, L]`` as cuBLAS reads them for ``BlockWise128x128``:
    L padded with zeros to a multiple of 4, stored L-major, viewed as ``[L4, outer blocks]``
    (strides ``(1, L4)``)."""
    L = s.shape[1]
    return F.pad(s.contiguous(), (0, -L % 4)).t()


def _block_smm(x, sx, yt, syt, y_blocks: bool) -> torch.Tensor:
    """``x [M, K] (1x128) @ yt [N, K]ᵀ`` via F.scaled_mm; ``syt``: the scales of ``yt``
    oriented ``[N or N/128, K/128]`` (128x128 blocks when ``y_blocks``, else 1x128 rows)."""
    return F.scaled_mm(
        x,
        yt.t(),
        scale_a=outer_major(sx),
        scale_recipe_a=F.ScalingType.BlockWise1x128,
        scale_b=cublas_blocks(syt) if y_blocks else outer_major(syt),
        scale_recipe_b=F.ScalingType.BlockWise128x128 if y_blocks else F.ScalingType.BlockWise1x128,
        output_dtype=torch.bfloat16,
    )


def blockwise_vendor(case: GemmCase, grad_dtype: torch.dtype) -> tuple[Fn, Fn] | None:
    """None when this torch/cuBLAS cannot run DeepSeek-style blockwise scaling."""
    a, b, dout = case.a, case.b, case.dout
    state: dict[str, object] = {}

    def fwd() -> torch.Tensor:
        if dual_ok(a):
            qa, state["qat"] = quant_fp8_dual_1x128(a, E4M3)
        else:
            qa, state["qat"] = quant_fp8_blockwise_1x128(a, E4M3), None
        qb = quant_fp8_block_128x128(b, E4M3, with_transpose=True)
        state["qb"] = qb
        return _block_smm(qa.data, qa.scale, qb.data, qb.scale, True)

    def bwd() -> tuple[torch.Tensor, torch.Tensor]:
        if not state:
            fwd()
        qb, qat = state["qb"], state["qat"]
        if dual_ok(dout):
            qd, qdt = quant_fp8_dual_1x128(dout, grad_dtype)
        else:
            qd, qdt = quant_fp8_blockwise_1x128(dout, grad_dtype), None
        da = _block_smm(qd.data, qd.scale, qb.data_t, qb.scale_t, True)  # type: ignore[union-attr]
        if qdt is None:
            qdt = quant_fp8_blockwise_1x128(dout, grad_dtype, transpose=True)
        if qat is None:
            qat = quant_fp8_blockwise_1x128(a, E4M3, transpose=True)
        db = _block_smm(qdt.data, qdt.scale, qat.data, qat.scale, False)  # type: ignore[union-attr]
        return da, db

    try:
        fwd()
        bwd()
    except (RuntimeError, ValueError, NotImplementedError, TypeError, AttributeError):
        return None
    return fwd, bwd
