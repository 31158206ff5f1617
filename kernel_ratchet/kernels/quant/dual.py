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
``2*R*C`` written (two fp8 copies) + the fp32 scales. Where ``xᵀ``'s rows are whole 32-bit
words apart (R, or ``pad_t_to``, a multiple of 4), each thread loads four consecutive rows and
packs a column's four fp8 into one word before the transpose, which then moves words, not
bytes; elsewhere the tile is transposed byte by byte. Before that packing, on an H200 (torch
2.11, triton 3.6), it moved 0.55-0.64 of a bf16 copy's bytes per second (docs/benchmarks.md),
latency-bound (ncu: DRAM at 42% of peak, 7.4 cycles per issued instruction), the column-wise
half (cross-warp maxima, transposed store) the slower; campaign rounds on an H100 then
accepted the packing at 1.0258x and 4 warps instead of 8 at 1.0357x more on the op's six
shapes (campaigns/quant_fp8_dual/packed-transpose). Persistent programs that load their next
tile before quantizing this one (219 registers: one program per SM with a tile always in
flight) moved 0.60-0.83x its bytes per second on the H200.
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

# 128 x 128 tile = one scaling group along each axis (fixed by the recipe). With the
# column-wise copy moved as 32-bit words, 4 warps per tile beat 8 (a campaign round, H100:
# 1.0357x on the op's six shapes; campaigns/quant_fp8_dual/packed-transpose).
DUAL_NUM_WARPS = 4


@triton.jit
def _tile_rows(BLOCK: tl.constexpr, PACK: tl.constexpr):
    """The rows of a tile's block in the order :func:`_quant_tile` takes them: as they are,
    or with ``PACK`` row 4i + k at position k * BLOCK // 4 + i (each thread's rows of the
    load's layout, a quarter of the block apart, are then four consecutive rows)."""
    t = tl.arange(0, BLOCK)
    if PACK:
        t = (t % (BLOCK // 4)) * 4 + t // (BLOCK // 4)
    return t


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
    PACK: tl.constexpr = False,
    W_ROWS=0,
):
    """Both quantizations of one loaded tile, rows ``offs_r`` (``mask_r``) of column block
    ``pid_c``, written with their scales: row-wise groups (1 x 128) to ``q``, column-wise
    groups (128 x 1) transposed to ``qt``'s columns of block ``pid_t``, their scales to
    ``st``'s column ``pid_t``. ``MASK_T_ROWS``: the transposed store skips the masked rows
    (else it writes them, as zeros). ``PACK``: ``qt``'s rows are ``W_ROWS`` 32-bit words
    long; the transposed tile is stored as words, masked rows written as zeros up to the end
    of the row."""
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
    yt8 = _to_fp8(yt, qt_ptr.dtype.element_ty, MANT, PRE_ROUND)
    if PACK:
        # The tile's rows come in _tile_rows order: row 4i + k of the tile's block sits at
        # position k * BLOCK // 4 + i, so the four fp8 of a column that make one 32-bit word
        # of xᵀ are packed within a thread before the transpose, which then moves words.
        # (Summing the four shifted bytes over a reshaped axis instead gave wrong bytes on
        # sm_90, right ones in the interpreter; splitting the axis keeps them right on both.)
        u = yt8.to(tl.uint8, bitcast=True).to(tl.uint32)
        u = tl.permute(tl.reshape(u, [4, BLOCK // 4, BLOCK]), (1, 2, 0))
        even, odd = tl.split(tl.reshape(u, [BLOCK // 4, BLOCK, 2, 2]))  # k = 2j + l: l, then j
        u0, u2 = tl.split(even)
        u1, u3 = tl.split(odd)
        w = u0 | (u1 << 8) | (u2 << 16) | (u3 << 24)
        wt = tl.trans(w)  # [BLOCK c, BLOCK // 4 words]
        words = pid_t * (BLOCK // 4) + tl.arange(0, BLOCK // 4)
        qt32 = qt_ptr.to(tl.pointer_type(tl.uint32), bitcast=True)
        qt_ptrs = qt32 + offs_c[:, None].to(tl.int64) * (stride_qt // 4) + words[None, :]
        tl.store(qt_ptrs, wt, mask=mask_c[:, None] & (words < W_ROWS)[None, :])
    else:
        yt = tl.trans(yt8)
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
    PACK: tl.constexpr = False,
):
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    offs_r = pid_r * BLOCK + _tile_rows(BLOCK, PACK)
    offs_c = pid_c * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_r < R)[:, None] & (offs_c < C)[None, :]
    x_ptrs = x_ptr + offs_r[:, None].to(tl.int64) * stride_r + offs_c[None, :] * stride_c
    x_in = tl.load(x_ptrs, mask=mask, other=0.0)
    # row block pid_r is also the column block of qt and st the tile lands in
    _quant_tile(
        x_in, offs_r, offs_r < R, pid_c, pid_r, q_ptr, qt_ptr, s_ptr, st_ptr, C,
        stride_qt, stride_sr, stride_sg, stride_stc, stride_stg, fp8_max, eps, BLOCK, MANT,
        PRE_ROUND, True, PACK, (stride_qt // 4),
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
    # xᵀ's rows whole 32-bit words apart: its tiles are stored as words (``_quant_tile``)
    meta["PACK"] = qt_buf.stride(0) % 4 == 0
    if R and C:
        _dual_quant_kernel[(ng_r, ng_c)](*args, fp8_max, AMAX_EPS, **meta)
    return Fp8Quantized(q, s), Fp8Quantized(qt, st)


__all__ = ["FP8_MAX", "quant_fp8_dual_1x128"]
