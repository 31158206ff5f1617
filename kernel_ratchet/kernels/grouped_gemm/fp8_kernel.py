"""Grouped GEMM, FP8 blockwise: the Triton kernels (launchers and autograd: :mod:`.fp8`).

* :func:`_grouped_mm_fp8_kernel` / :func:`_mm_fp8_tile`: forward and dgrad, the persistent
  schedule of :mod:`.kernel` with each 128-deep partial product scaled by its two scales;
* :func:`_grouped_wgrad_fp8_kernel`: weight gradient over 128-token chunks aligned to the
  global 128-row scale blocks.

The 128x128-block quantization of the 3-D expert weight stack is
:mod:`kernel_ratchet.kernels.quant.weight`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernel_ratchet.kernels.grouped_gemm.kernel import _col_offsets, _group_of_tile
from kernel_ratchet.kernels.grouped_gemm.wgrad_kernel import _wgrad_tile_of


@triton.jit
def _mm_fp8_tile(
    a_src,
    sa_ptr,
    b_src,
    sb_ptr,
    c_ptr,
    row0,
    valid,
    pn,
    g,
    N,
    K,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_sbg,
    stride_sbn,
    stride_sbk,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    B_N_CONTIG: tl.constexpr,
    USE_TMA: tl.constexpr = False,
):
    """One output tile. ``a_src``/``b_src`` are pointers, or with USE_TMA (a K-major B)
    descriptors over A [T, K] and B viewed [G * N, K]: rows past the group and columns past N
    read other rows and are never stored, K tails are zeros; the scales load by pointer."""
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    row_ok = rm < valid
    rows = tl.where(row_ok, rm, 0)
    cols, cols_ld = _col_offsets(pn, N, BLOCK_N, EVEN_N, B_N_CONTIG)
    col_ok = cols < N
    cols_s = tl.where(col_ok, cols, 0)  # scale index (never a contiguous load axis)
    if not USE_TMA:
        a_ptrs = a_src + row0.to(tl.int64) * stride_am + rows[:, None] * stride_am
        a_ptrs += rk[None, :] * stride_ak
    sa_ptrs = sa_ptr + (row0 + rows).to(tl.int64) * stride_sam
    if not USE_TMA:
        b_ptrs = b_src + g.to(tl.int64) * stride_bg + cols_ld[None, :] * stride_bn
        b_ptrs += rk[:, None] * stride_bk
    sb_ptrs = sb_ptr + g.to(tl.int64) * stride_sbg + (cols_s // 128) * stride_sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if USE_TMA:
            a = a_src.load([row0, k * BLOCK_K])
            b = b_src.load([g * N + pn * BLOCK_N, k * BLOCK_K]).T
        elif EVEN_K:
            a = tl.load(a_ptrs)
            if B_N_CONTIG and not EVEN_N:
                b = tl.load(b_ptrs, mask=col_ok[None, :], other=0.0)
            else:
                b = tl.load(b_ptrs)
        else:
            k_ok = rk < K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
            if B_N_CONTIG and not EVEN_N:
                b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            else:
                b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
        sa = tl.load(sa_ptrs + k * stride_sak)
        sb = tl.load(sb_ptrs + k * stride_sbk)
        acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
        if not USE_TMA:
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + row0.to(tl.int64) * stride_cm + rm[:, None] * stride_cm
    c_ptrs += cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _grouped_mm_fp8_kernel(
    a_ptr,
    sa_ptr,
    b_ptr,
    sb_ptr,
    c_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_sbg,
    stride_sbn,
    stride_sbk,
    stride_cm,
    stride_cn,
    NUM_PROGS: tl.constexpr,
    G_POW2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    B_N_CONTIG: tl.constexpr,
    SPLIT_TAIL: tl.constexpr,
    T=0,
    USE_TMA: tl.constexpr = False,
):
    """C[rows of g, n] = sum_kb (A_kb . B_kb) * sa[row, kb] * sb[g, n // 128, kb].

    BLOCK_K == 128: one k step is one scale block of both operands. Tile schedule and
    SPLIT_TAIL as in kernel._grouped_mm_kernel. USE_TMA (K-major B, no SPLIT_TAIL): the tiles
    load through TMA descriptors (see :func:`_mm_fp8_tile`), ``T`` rows of A.
    """
    tl.static_assert(not (USE_TMA and SPLIT_TAIL), "TMA loads run without the split tail")
    pid = tl.program_id(0)
    a_src = a_ptr
    b_src = b_ptr
    if USE_TMA:
        a_src = tl.make_tensor_descriptor(
            a_ptr, shape=[T, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K]
        )
        b_src = tl.make_tensor_descriptor(
            b_ptr, shape=[G * N, K], strides=[stride_bn, 1], block_shape=[BLOCK_N, BLOCK_K]
        )
    offs_g = tl.arange(0, G_POW2)
    lens = tl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(tl.int32)
    n_tiles = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(lens, BLOCK_M) * n_tiles
    tile_end = tl.cumsum(tiles, 0)
    row_end = tl.cumsum(lens, 0)
    total = tl.sum(tiles)
    for tile_id in range(pid, total, NUM_PROGS):
        row0, valid, pn, g = _group_of_tile(
            tile_id, tile_end, tiles, row_end, lens, offs_g, n_tiles, BLOCK_M, GROUP_M
        )
        if SPLIT_TAIL:
            if valid <= BLOCK_M // 2:
                _mm_fp8_tile(
                    a_ptr,
                    sa_ptr,
                    b_ptr,
                    sb_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_sam,
                    stride_sak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
                    stride_sbg,
                    stride_sbn,
                    stride_sbk,
                    stride_cm,
                    stride_cn,
                    BLOCK_M // 2,
                    BLOCK_N,
                    BLOCK_K,
                    EVEN_K,
                    EVEN_N,
                    B_N_CONTIG,
                )
            else:
                _mm_fp8_tile(
                    a_ptr,
                    sa_ptr,
                    b_ptr,
                    sb_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_sam,
                    stride_sak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
                    stride_sbg,
                    stride_sbn,
                    stride_sbk,
                    stride_cm,
                    stride_cn,
                    BLOCK_M,
                    BLOCK_N,
                    BLOCK_K,
                    EVEN_K,
                    EVEN_N,
                    B_N_CONTIG,
                )
        else:
            _mm_fp8_tile(
                a_src,
                sa_ptr,
                b_src,
                sb_ptr,
                c_ptr,
                row0,
                valid,
                pn,
                g,
                N,
                K,
                stride_am,
                stride_ak,
                stride_sam,
                stride_sak,
                stride_bg,
                stride_bn,
                stride_bk,
                stride_sbg,
                stride_sbn,
                stride_sbk,
                stride_cm,
                stride_cn,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                EVEN_K,
                EVEN_N,
                B_N_CONTIG,
                USE_TMA,
            )


@triton.jit
def _grouped_wgrad_fp8_kernel(
    dyt_ptr,
    sdy_ptr,
    xt_ptr,
    sx_ptr,
    dw_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_dyt,
    stride_xt,
    stride_sdyn,
    stride_sdyb,
    stride_sxk,
    stride_sxb,
    stride_wg,
    stride_wn,
    stride_wk,
    G_POW2: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_TMA: tl.constexpr = False,
    GROUP_CHUNKS: tl.constexpr = False,
):
    """dW[g, n, k] = sum over 128-token chunks c of group g of (dYᵀ_c . Xᵀ_cᵀ) * sdy * sx.

    dYᵀ [N, T] and Xᵀ [K, T] are column-wise quantizations whose row strides are padded to a
    multiple of 128 with zeroed padding; their scales sdy[n, t // 128], sx[k, t // 128] cover
    global 128-token blocks, so chunks are aligned to multiples of 128. Chunks are loaded
    whole (no mask: 16-byte loads) and the tokens outside the group are zeroed in dYᵀ only
    (a block may hold two groups' tokens; Xᵀ is finite everywhere, so 0 * x = 0).
    USE_TMA: the chunks load through descriptors over dYᵀ and Xᵀ as [rows, padded row
    stride] (16-byte aligned bases), rows past N or K read as zeros; the same token mask.
    GROUP_CHUNKS: the operands come from ``quant_fp8_dual_1x128_grouped``: group g owns chunks
    [c_g, c_g + ceil(len_g / 128)), zero-padded, so the chunks need no token mask.
    """
    CHUNK: tl.constexpr = 128
    g, pn, pk, lens, row_end, sel = _wgrad_tile_of(
        tl.program_id(0), lens_ptr, G, N, K, G_POW2, BLOCK_N, BLOCK_K
    )
    start = tl.sum(tl.where(sel, row_end - lens, 0))
    end = tl.sum(tl.where(sel, row_end, 0))
    if GROUP_CHUNKS:
        chunks = (lens + CHUNK - 1) // CHUNK
        first = tl.sum(tl.where(sel, tl.cumsum(chunks, 0) - chunks, 0))
        n_chunks = tl.sum(tl.where(sel, chunks, 0))
    else:
        first = start // CHUNK
        n_chunks = tl.where(end > start, (end - 1) // CHUNK - first + 1, 0)
    cols_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cols_k = pk * BLOCK_K + tl.arange(0, BLOCK_K)
    n_c = tl.where(cols_n < N, cols_n, 0)  # strided axes: clamping keeps the loads vectorized
    k_c = tl.where(cols_k < K, cols_k, 0)
    rt = tl.arange(0, CHUNK)
    dy_base = dyt_ptr + n_c[:, None].to(tl.int64) * stride_dyt + rt[None, :]
    x_base = xt_ptr + k_c[None, :].to(tl.int64) * stride_xt + rt[:, None]
    if USE_TMA:
        dy_desc = tl.make_tensor_descriptor(
            dyt_ptr, shape=[N, stride_dyt], strides=[stride_dyt, 1], block_shape=[BLOCK_N, CHUNK]
        )
        x_desc = tl.make_tensor_descriptor(
            xt_ptr, shape=[K, stride_xt], strides=[stride_xt, 1], block_shape=[BLOCK_K, CHUNK]
        )
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for c in range(0, n_chunks):
        blk = first + c
        t = blk * CHUNK + rt
        ok = (t >= start) & (t < end)
        if USE_TMA:
            dy = dy_desc.load([pn * BLOCK_N, blk * CHUNK])
            if not GROUP_CHUNKS:
                dy = tl.where(ok[None, :], dy, tl.zeros_like(dy))
            x = x_desc.load([pk * BLOCK_K, blk * CHUNK]).T
        else:
            dy = tl.load(dy_base + blk * CHUNK)
            if not GROUP_CHUNKS:
                dy = tl.where(ok[None, :], dy, tl.zeros_like(dy))
            x = tl.load(x_base + blk * CHUNK)
        sdy = tl.load(sdy_ptr + n_c * stride_sdyn + blk * stride_sdyb)
        sx = tl.load(sx_ptr + k_c * stride_sxk + blk * stride_sxb)
        acc += tl.dot(dy, x) * sdy[:, None] * sx[None, :]
    w_ptrs = dw_ptr + g.to(tl.int64) * stride_wg + cols_n[:, None] * stride_wn
    w_ptrs += cols_k[None, :] * stride_wk
    mask = (cols_n[:, None] < N) & (cols_k[None, :] < K)
    tl.store(w_ptrs, acc.to(dw_ptr.dtype.element_ty), mask=mask)
