"""The FP8 grouped forward/dgrad tile with TMA loads (:func:`.fp8_kernel._grouped_mm_fp8_kernel`
runs it when ``USE_TMA``): the same scaled product as :func:`.fp8_kernel._mm_fp8_tile`, its A
and B tiles read through device-side tensor descriptors."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _mm_fp8_tile_tma(
    a_desc,
    sa_ptr,
    b_desc,
    sb_ptr,
    c_ptr,
    row0,
    valid,
    pn,
    g,
    N,
    K,
    stride_sam,
    stride_sak,
    stride_sbg,
    stride_sbn,
    stride_sbk,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """:func:`_mm_fp8_tile` with TMA loads of a K-major B: ``a_desc`` over A [T, K],
    ``b_desc`` over B viewed [G * N, K]. Rows past the group and columns past N read other
    rows (their scales clamped to valid ones) and are never stored; K tails are zero-filled."""
    rm = tl.arange(0, BLOCK_M)
    row_ok = rm < valid
    rows = tl.where(row_ok, rm, 0)
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    cols_s = tl.where(col_ok, cols, 0)
    sa_ptrs = sa_ptr + (row0 + rows).to(tl.int64) * stride_sam
    sb_ptrs = sb_ptr + g.to(tl.int64) * stride_sbg + (cols_s // 128) * stride_sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([row0, k * BLOCK_K])
        b = b_desc.load([g * N + pn * BLOCK_N, k * BLOCK_K]).T
        sa = tl.load(sa_ptrs + k * stride_sak)
        sb = tl.load(sb_ptrs + k * stride_sbk)
        acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
    c_ptrs = c_ptr + row0.to(tl.int64) * stride_cm + rm[:, None] * stride_cm
    c_ptrs += cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
