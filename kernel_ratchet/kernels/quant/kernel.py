"""Triton kernels of the FP8 quantizations (their entry points are in :mod:`.launch`).

* :func:`_amax_kernel`: tile-wise absolute maximum folded into one value per row, per column or
  for the whole tensor by atomic max (first pass of tensorwise and rowwise scaling);
* :func:`_apply_scale_kernel`: the scaling pass with a precomputed amax, writing ``q`` and/or
  ``qᵀ``;
* :func:`_group_quant_kernel`: groups that fit in one tile (1x128, 128x1, 128x128): amax, scale
  and cast in one pass;
* :func:`_to_fp8`: the round-to-nearest-even cast the kernels share (also used by the dual and
  the grouped-GEMM weight quantization).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _to_fp8(y, out_ty: tl.constexpr, MANT: tl.constexpr, PRE_ROUND: tl.constexpr):
    """Cast clamped fp32 ``y`` to fp8 with round-to-nearest-even.

    The GPU cast (cvt.rn.satfinite) already rounds to nearest even. The Triton 3.6 interpreter
    truncates instead and drops the mantissa carry (447 -> 448 ok, but 31.6 -> 16, not 32), so
    with ``PRE_ROUND`` (set in interpreter mode only) the value is first rounded to MANT
    mantissa bits on its fp32 bit pattern, which makes the cast exact in the normal range.
    """
    if PRE_ROUND:
        SHIFT: tl.constexpr = 23 - MANT
        bits = y.to(tl.int32, bitcast=True)
        bias = (1 << (SHIFT - 1)) - 1 + ((bits >> SHIFT) & 1)
        bits = (bits + bias) & ~((1 << SHIFT) - 1)
        y = bits.to(tl.float32, bitcast=True)
    return y.to(out_ty)


@triton.jit
def _amax_kernel(
    x_ptr,
    amax_ptr,
    R,
    C,
    stride_r,
    stride_c,
    AXIS: tl.constexpr,  # 0: one amax per row, 1: one per column, 2: one for the whole tensor
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Tile-wise |x| maximum folded into ``amax_ptr`` (zero-initialised fp32) by atomic max."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    # 64-bit offsets: a DeepSeek-V3 expert-weight stack has ~7.5e9 elements; int32 offsets
    # overflow there into an illegal address
    offs_r = pid_r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = pid_c.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (offs_r[:, None] < R) & (offs_c[None, :] < C)
    x = tl.load(
        x_ptr + offs_r[:, None] * stride_r + offs_c[None, :] * stride_c, mask=mask, other=0.0
    )
    ax = tl.abs(x.to(tl.float32))
    if AXIS == 0:
        tl.atomic_max(amax_ptr + offs_r, tl.max(ax, axis=1), mask=offs_r < R)
    elif AXIS == 1:
        tl.atomic_max(amax_ptr + offs_c, tl.max(ax, axis=0), mask=offs_c < C)
    else:
        tl.atomic_max(amax_ptr, tl.max(tl.max(ax, axis=1), axis=0))


@triton.jit
def _apply_scale_kernel(
    x_ptr,
    amax_ptr,
    q_ptr,
    qt_ptr,
    scale_ptr,
    R,
    C,
    stride_r,
    stride_c,
    stride_q,
    stride_qt,
    fp8_max,
    eps,
    AXIS: tl.constexpr,  # as in _amax_kernel
    WRITE_Q: tl.constexpr,
    WRITE_QT: tl.constexpr,
    MANT: tl.constexpr,
    PRE_ROUND: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """q = x / scale with a precomputed amax; writes q [R, C] and/or qᵀ [C, R] (row strides
    ``stride_q`` and ``stride_qt``, unit column stride)."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    # 64-bit offsets: a DeepSeek-V3 expert-weight stack has ~7.5e9 elements; int32 offsets
    # overflow there into an illegal address
    offs_r = pid_r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = pid_c.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_r = offs_r < R
    mask_c = offs_c < C
    mask = mask_r[:, None] & mask_c[None, :]
    x = tl.load(
        x_ptr + offs_r[:, None] * stride_r + offs_c[None, :] * stride_c, mask=mask, other=0.0
    )
    x = x.to(tl.float32)
    if AXIS == 0:
        amax = tl.maximum(tl.load(amax_ptr + offs_r, mask=mask_r, other=1.0), eps)
        scale = amax / fp8_max
        y = x * (fp8_max / amax)[:, None]
        if pid_c == 0:
            tl.store(scale_ptr + offs_r, scale, mask=mask_r)
    elif AXIS == 1:
        amax = tl.maximum(tl.load(amax_ptr + offs_c, mask=mask_c, other=1.0), eps)
        scale = amax / fp8_max
        y = x * (fp8_max / amax)[None, :]
        if pid_r == 0:
            tl.store(scale_ptr + offs_c, scale, mask=mask_c)
    else:
        amax = tl.maximum(tl.load(amax_ptr), eps)
        y = x * (fp8_max / amax)
        if (pid_r == 0) & (pid_c == 0):
            tl.store(scale_ptr, amax / fp8_max)
    y = tl.clamp(y, -fp8_max, fp8_max)
    if WRITE_Q:
        tl.store(
            q_ptr + offs_r[:, None] * stride_q + offs_c[None, :],
            _to_fp8(y, q_ptr.dtype.element_ty, MANT, PRE_ROUND),
            mask=mask,
        )
    if WRITE_QT:
        tl.store(
            qt_ptr + offs_c[None, :] * stride_qt + offs_r[:, None],
            _to_fp8(y, qt_ptr.dtype.element_ty, MANT, PRE_ROUND),
            mask=mask,
        )


@triton.jit
def _group_quant_kernel(
    x_ptr,
    q_ptr,
    qt_ptr,
    scale_ptr,
    R,
    C,
    stride_r,
    stride_c,
    stride_q,
    stride_qt,
    stride_sr,
    stride_sc,
    fp8_max,
    eps,
    GROUP_R: tl.constexpr,
    GROUP_C: tl.constexpr,  # (1, 128), (128, 1) or (128, 128)
    WRITE_Q: tl.constexpr,
    WRITE_QT: tl.constexpr,
    MANT: tl.constexpr,
    PRE_ROUND: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Groups that fit in one tile: amax, scale and cast in a single pass over x.

    Tile edges: along an axis with a group of 128 the tile edge is exactly 128 (one group);
    along an axis with a group of 1 it is free. The scale of group (i, j) goes to
    ``scale_ptr + i*stride_sr + j*stride_sc`` with i = row // GROUP_R, j = col // GROUP_C.
    """
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    # 64-bit offsets: a DeepSeek-V3 expert-weight stack has ~7.5e9 elements; int32 offsets
    # overflow there into an illegal address
    offs_r = pid_r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = pid_c.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_r = offs_r < R
    mask_c = offs_c < C
    mask = mask_r[:, None] & mask_c[None, :]
    x = tl.load(
        x_ptr + offs_r[:, None] * stride_r + offs_c[None, :] * stride_c, mask=mask, other=0.0
    )
    x = x.to(tl.float32)
    ax = tl.abs(x)
    if GROUP_R == 1:  # 1 x 128 groups: one scale per row of the tile
        amax = tl.maximum(tl.max(ax, axis=1), eps)
        y = x * (fp8_max / amax)[:, None]
        tl.store(scale_ptr + offs_r * stride_sr + pid_c * stride_sc, amax / fp8_max, mask=mask_r)
    elif GROUP_C == 1:  # 128 x 1 groups: one scale per column of the tile
        amax = tl.maximum(tl.max(ax, axis=0), eps)
        y = x * (fp8_max / amax)[None, :]
        tl.store(scale_ptr + pid_r * stride_sr + offs_c * stride_sc, amax / fp8_max, mask=mask_c)
    else:  # 128 x 128: one scale for the tile
        amax = tl.maximum(tl.max(tl.max(ax, axis=1), axis=0), eps)
        y = x * (fp8_max / amax)
        tl.store(scale_ptr + pid_r * stride_sr + pid_c * stride_sc, amax / fp8_max)
    y = tl.clamp(y, -fp8_max, fp8_max)
    if WRITE_Q:
        tl.store(
            q_ptr + offs_r[:, None] * stride_q + offs_c[None, :],
            _to_fp8(y, q_ptr.dtype.element_ty, MANT, PRE_ROUND),
            mask=mask,
        )
    if WRITE_QT:
        tl.store(
            qt_ptr + offs_c[None, :] * stride_qt + offs_r[:, None],
            _to_fp8(y, qt_ptr.dtype.element_ty, MANT, PRE_ROUND),
            mask=mask,
        )
