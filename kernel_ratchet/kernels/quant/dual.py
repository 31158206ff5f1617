"""Dual FP8 quantization: row-wise and column-wise 1x128 groups from one read of the input.

``quant_fp8_dual_1x128(x)`` returns exactly what these two calls of
:mod:`kernel_ratchet.kernels.quant.launch` return, but reads ``x`` once instead of twice::

    quant_fp8_blockwise_1x128(x)                   # rows:    groups of 1 x 128 along a row
    quant_fp8_blockwise_1x128(x, transpose=True)   # columns: groups of 128 rows of a column,
                                                   #          written as xᵀ [C, R] contiguous

(same formula and rounding, same scale layouts: ``scale [R, ceil(C/128)]`` with strides
``(1, R)`` and ``scale_t [C, ceil(R/128)]`` with strides ``(1, C)``). A training step needs
both: the forward GEMM contracts over columns, the weight-gradient GEMM over rows (tokens), and
FP8 tensor cores want both operands contiguous along the contracted dimension.

One program owns a 128 x 128 tile: it computes the 128 row maxima and the 128 column maxima of
the tile in registers and writes both quantizations. Bytes moved: ``2*R*C`` read (bf16) +
``2*R*C`` written (two fp8 copies) + the fp32 scales. On an H200 (torch 2.11, triton 3.6) it
moves 0.55-0.64 of a bf16 copy's bytes per second (docs/benchmarks.md), latency-bound (ncu:
DRAM at 42% of peak, 7.4 cycles per issued instruction), the column-wise half (cross-warp
maxima, transposed store) the slower. For sm_90 with 8 warps it compiles to 128 registers per
thread (two programs per SM). Persistent programs that load their next tile before
quantizing this one (219 registers: one program per SM with a tile always in flight) moved
0.60-0.83x its bytes per second on the H200.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernel_ratchet.kernels.quant.kernel import _to_fp8
from kernel_ratchet.kernels.quant.launch import (
    AMAX_EPS,
    FP8_MAX,
    GROUP,
    Fp8Quantized,
    _cast_args,
    _check,
)

# 128 x 128 tile = one scaling group along each axis (fixed by the recipe). 8 warps keep the
# tile's fp32 copy at 64 registers per thread.
DUAL_NUM_WARPS = 8


@triton.jit
def _quant_tile(
    x_in,
    offs_r,
    mask_r,
    pid_c,
    pid_t,
    q_ptr,
    qt_ptr,
    s_ptr,
    st_ptr,
    C,
    stride_qt,
    stride_sr,
    stride_sg,
    stride_stc,
    stride_stg,
    fp8_max,
    eps,
    BLOCK: tl.constexpr,
    MANT: tl.constexpr,
    PRE_ROUND: tl.constexpr,
    MASK_T_ROWS: tl.constexpr,
):
    """Both quantizations of one loaded tile, rows ``offs_r`` (``mask_r``) of column block
    ``pid_c``, written with their scales: row-wise groups (1 x 128) to ``q``, column-wise
    groups (128 x 1) transposed to ``qt``'s columns of block ``pid_t``, their scales to
    ``st``'s column ``pid_t``. ``MASK_T_ROWS``: the transposed store skips the masked rows
    (else it writes them, as zeros)."""
    offs_c = pid_c * BLOCK + tl.arange(0, BLOCK)
    mask_c = offs_c < C
    mask = mask_r[:, None] & mask_c[None, :]
    # Maxima in the input dtype (exact) keep no fp32 copy of the tile alive: fewer registers,
    # more resident programs, more bytes in flight.
    ax = tl.abs(x_in)
    x = x_in.to(tl.float32)
    # No clamp: |x| <= amax, so |x * (fp8_max / amax)| <= fp8_max * (1 + 2^-22) after the two
    # fp32 roundings, which the round-to-nearest cast takes to fp8_max itself.
    # Row-wise: one group per row of the tile (1 x 128).
    amax_r = tl.maximum(tl.max(ax, axis=1).to(tl.float32), eps)
    y = x * (fp8_max / amax_r)[:, None]
    q_ptrs = q_ptr + offs_r[:, None].to(tl.int64) * C + offs_c[None, :]
    tl.store(q_ptrs, _to_fp8(y, q_ptr.dtype.element_ty, MANT, PRE_ROUND), mask=mask)
    tl.store(s_ptr + offs_r * stride_sr + pid_c * stride_sg, amax_r / fp8_max, mask=mask_r)
    # Column-wise: one group per column of the tile (128 x 1), written transposed.
    amax_c = tl.maximum(tl.max(ax, axis=0).to(tl.float32), eps)
    yt = x * (fp8_max / amax_c)[None, :]
    # Cast before transposing: the layout change then moves 1-byte values, not fp32.
    yt = tl.trans(_to_fp8(yt, qt_ptr.dtype.element_ty, MANT, PRE_ROUND))
    cols_t = pid_t * BLOCK + tl.arange(0, BLOCK)
    qt_ptrs = qt_ptr + offs_c[:, None].to(tl.int64) * stride_qt + cols_t[None, :]
    if MASK_T_ROWS:
        tl.store(qt_ptrs, yt, mask=tl.trans(mask))
    else:
        tl.store(qt_ptrs, yt, mask=mask_c[:, None])
    tl.store(st_ptr + offs_c * stride_stc + pid_t * stride_stg, amax_c / fp8_max, mask=mask_c)


@triton.jit
def _dual_quant_kernel(
    x_ptr,
    q_ptr,
    qt_ptr,
    s_ptr,
    st_ptr,
    R,
    C,
    stride_r,
    stride_c,
    stride_qt,
    stride_sr,
    stride_sg,
    stride_stc,
    stride_stg,
    fp8_max,
    eps,
    BLOCK: tl.constexpr,
    MANT: tl.constexpr,
    PRE_ROUND: tl.constexpr,
):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_r = pid_r * BLOCK + tl.arange(0, BLOCK)
    offs_c = pid_c * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_r < R)[:, None] & (offs_c < C)[None, :]
    x_ptrs = x_ptr + offs_r[:, None].to(tl.int64) * stride_r + offs_c[None, :] * stride_c
    x_in = tl.load(x_ptrs, mask=mask, other=0.0)
    # row block pid_r is also the column block of qt and st the tile lands in
    _quant_tile(
        x_in, offs_r, offs_r < R, pid_c, pid_r, q_ptr, qt_ptr, s_ptr, st_ptr, C,
        stride_qt, stride_sr, stride_sg, stride_stc, stride_stg, fp8_max, eps, BLOCK, MANT,
        PRE_ROUND, True,
    )  # fmt: skip


def quant_fp8_dual_1x128(
    x: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    pad_t_to: int = 1,
    num_warps: int = DUAL_NUM_WARPS,
) -> tuple[Fp8Quantized, Fp8Quantized]:
    """Quantize a 2-D ``x`` [R, C] (bf16/fp16/fp32) both ways in one pass.

    Returns ``(rows, cols)``: ``rows.data [R, C]``, ``rows.scale [R, ceil(C/128)]`` (strides
    ``(1, R)``); ``cols.data [C, R]`` (xᵀ), ``cols.scale [C, ceil(R/128)]`` (strides
    ``(1, C)``). Dequantization scales: ``x ≈ data.float() * scale`` per group.
    ``pad_t_to`` > 1 rounds the row stride of ``cols.data`` up to a multiple of it and zeroes
    the padding (``cols.data`` is then a view): a consumer may read whole 128-element chunks
    past R without a mask. ``num_warps`` is a tuning knob (same results). One program per
    128 x 128 tile. Raises ValueError for a non-2-D or non-float input.
    """
    fp8_max = _check(x, dtype)
    R, C = x.shape
    R_pad = -(-R // pad_t_to) * pad_t_to if pad_t_to > 1 else R
    q = torch.empty((R, C), dtype=dtype, device=x.device)
    qt_buf = torch.empty((C, R_pad), dtype=dtype, device=x.device)
    if R_pad > R:
        qt_buf[:, R:].zero_()
    qt = qt_buf[:, :R]
    ng_r, ng_c = triton.cdiv(R, GROUP), triton.cdiv(C, GROUP)
    s = torch.empty((ng_c, R), dtype=torch.float32, device=x.device).t()  # [R, ng_c]
    st = torch.empty((ng_r, C), dtype=torch.float32, device=x.device).t()  # [C, ng_r]
    args = (x, q, qt_buf, s, st, R, C, *x.stride(), qt_buf.stride(0), *s.stride(), *st.stride())
    meta = {"BLOCK": GROUP, "num_warps": num_warps, **_cast_args(dtype)}
    if R and C:
        _dual_quant_kernel[(ng_r, ng_c)](*args, fp8_max, AMAX_EPS, **meta)
    return Fp8Quantized(q, s), Fp8Quantized(qt, st)


__all__ = ["FP8_MAX", "quant_fp8_dual_1x128"]
