"""Grouped GEMM for MoE, bf16/fp16: the forward/dgrad Triton kernel (the weight gradient's:
:mod:`.wgrad_kernel`; launchers, autograd: :mod:`.launch`).

Layout contract (tokens sorted by expert):

* ``x``: [T, K], rows of group g are ``x[off_g : off_g + len_g]`` with
  ``off_g = sum(group_lens[:g])``;
* ``w``: [G, N, K] (one nn.Linear weight per expert);
* ``group_lens``: [G] int32/int64 **device** tensor, sum == T; any entry may be 0 and none has
  to be a multiple of a tile.

Forward ``out_g = x_g @ w_g^T`` ([T, N]); backward ``dx_g = dout_g @ w_g`` (same grouped kernel
with the weight read transposed) and ``dw_g = dout_g^T @ x_g`` (0 for an empty group).

No host synchronization: the launchers never read device data. Group offsets and the
(group, tile) schedule are computed inside the kernels from ``group_lens`` (a cumsum over the G
counts held in registers), and the forward/dgrad kernel is persistent: a grid of one program per
SM walks the flattened tile list, so the grid size does not depend on the token counts.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernel_ratchet.kernels.gemm.kernel_tile import _output, _store_tile


@triton.jit
def _group_of_tile(tile_id, tile_end, tiles, row_end, lens, offs_g, n_tiles, BLOCK_M, GROUP_M):
    """Map a flat tile index to (row0 of the tile, valid rows, n tile, group)."""
    g = tl.sum((tile_end <= tile_id).to(tl.int32))
    sel = offs_g == g
    g_tile0 = tl.sum(tl.where(sel, tile_end - tiles, 0))
    g_row0 = tl.sum(tl.where(sel, row_end - lens, 0))
    g_len = tl.sum(tl.where(sel, lens, 0))
    g_mt = tl.cdiv(g_len, BLOCK_M)
    local = tile_id - g_tile0
    # Swizzle inside the group: GROUP_M row tiles share the weight's column tiles in L2.
    width = GROUP_M * n_tiles
    first_m = (local // width) * GROUP_M
    gsz = tl.minimum(g_mt - first_m, GROUP_M)
    pm = first_m + (local % width) % gsz
    pn = (local % width) // gsz
    row0 = g_row0 + pm * BLOCK_M
    valid = g_len - pm * BLOCK_M
    return row0, valid, pn, g


@triton.jit
def _col_offsets(pn, N, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, B_N_CONTIG: tl.constexpr):
    """Column indices of a tile (unclamped, for the store mask) and the ones to load with.

    Out-of-range columns are clamped to column 0 when the column axis of B is strided (the
    load stays vectorized along K), but left as they are when it is B's contiguous axis: a
    ``where`` there would hide the contiguity from Triton and turn 16-byte loads into scalar
    ones (measured on the H200: the dgrad ran at ~40 TFLOPS that way); the load is masked then.
    """
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    if EVEN_N or B_N_CONTIG:  # noqa: SIM108 (a constexpr branch, not a value select)
        cols_ld = cols
    else:
        cols_ld = tl.where(cols < N, cols, 0)
    return cols, cols_ld


@triton.jit
def _mm_tile(
    a_src,
    b_src,
    c_ptr,
    row0,
    valid,
    pn,
    g,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    B_N_CONTIG: tl.constexpr,
    USE_TMA: tl.constexpr = False,
    c_dst=None,
    TMA_STORE: tl.constexpr = 0,
):
    """One output tile: rows [row0, row0 + min(valid, BLOCK_M)) x columns of tile pn.

    ``a_src``/``b_src`` are pointers, or with USE_TMA descriptors over A [T, K] and B viewed
    [G * N, K] (K-major) or [G * K, N] (N contiguous; the launcher takes this path only when K
    is a multiple of BLOCK_K, so a k step never reads the next group's rows). Either way rows
    past the group and columns past N read other rows (or zeros past the tensor) and are never
    stored, and K tails are zeros. ``TMA_STORE`` 1 or 2: a tile whose rows all belong to its
    group goes out through shared memory by TMA stores into ``c_dst`` (the whole tile or two
    halves of BLOCK_N; the hardware drops columns past N); a group's partial last tile, whose
    rows past the group are the next group's, keeps the masked pointer store."""
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    row_ok = rm < valid
    # Clamp instead of masking: rows past the group (or T) re-read row0, and their results
    # are never stored, so the inner loop needs no row mask.
    rows = tl.where(row_ok, rm, 0)
    cols, cols_ld = _col_offsets(pn, N, BLOCK_N, EVEN_N, B_N_CONTIG)
    col_ok = cols < N
    if not USE_TMA:
        a_ptrs = a_src + row0.to(tl.int64) * stride_am + rows[:, None] * stride_am
        a_ptrs += rk[None, :] * stride_ak
        b_ptrs = b_src + g.to(tl.int64) * stride_bg + cols_ld[None, :] * stride_bn
        b_ptrs += rk[:, None] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if USE_TMA:
            a = a_src.load([row0, k * BLOCK_K])
            if B_N_CONTIG:
                b = b_src.load([g * K + k * BLOCK_K, pn * BLOCK_N])
            else:
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
        acc = tl.dot(a, b, acc)
        if not USE_TMA:
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    if TMA_STORE > 0 and valid >= BLOCK_M:
        _store_tile(acc, c_ptr, c_dst, row0, pn * BLOCK_N, 0, 0, 0, 0, 0, 0, BLOCK_M, BLOCK_N, 1,
                    TMA_STORE)  # fmt: skip
    else:
        c_ptrs = c_ptr + row0.to(tl.int64) * stride_cm + rm[:, None] * stride_cm
        c_ptrs += cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _grouped_mm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_am,
    stride_ak,
    stride_bg,
    stride_bn,
    stride_bk,
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
    FLATTEN: tl.constexpr = False,
    TMA_STORE: tl.constexpr = 0,
):
    """C[rows of g, n] = sum_k A[rows of g, k] * B[g, n, k] (B element (g, n, k) by strides).

    SPLIT_TAIL: a tile with at most BLOCK_M / 2 valid rows (the last tile of a group whose
    count is not a tile multiple) runs a half-height tile, so ragged groups waste at most
    BLOCK_M / 2 rows of MMA work instead of BLOCK_M - 1.
    USE_TMA (no SPLIT_TAIL): the tiles load through TMA descriptors (see :func:`_mm_tile`);
    A and B contiguous along their last axis with 16-byte aligned rows, ``T`` rows of A.
    FLATTEN (no SPLIT_TAIL): one software pipeline over every (tile, k-block) of a program, so
    the next tile's first loads are in flight during this tile's epilogue. TMA_STORE (with
    USE_TMA; C's rows 16-byte aligned): full tiles are stored by TMA (see :func:`_mm_tile`).
    """
    tl.static_assert(not (USE_TMA and SPLIT_TAIL), "TMA loads run without the split tail")
    pid = tl.program_id(0)
    a_src = a_ptr
    b_src = b_ptr
    if USE_TMA:
        a_src = tl.make_tensor_descriptor(
            a_ptr, shape=[T, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K]
        )
        if B_N_CONTIG:
            b_src = tl.make_tensor_descriptor(
                b_ptr, shape=[G * K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N]
            )
        else:
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
    c_dst = _output(c_ptr, T, N, stride_cm, BLOCK_M, BLOCK_N, TMA_STORE)
    for tile_id in tl.range(pid, total, NUM_PROGS, flatten=FLATTEN):
        row0, valid, pn, g = _group_of_tile(
            tile_id, tile_end, tiles, row_end, lens, offs_g, n_tiles, BLOCK_M, GROUP_M
        )
        if SPLIT_TAIL:
            if valid <= BLOCK_M // 2:
                _mm_tile(
                    a_ptr,
                    b_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
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
                _mm_tile(
                    a_ptr,
                    b_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
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
            _mm_tile(
                a_src,
                b_src,
                c_ptr,
                row0,
                valid,
                pn,
                g,
                N,
                K,
                stride_am,
                stride_ak,
                stride_bg,
                stride_bn,
                stride_bk,
                stride_cm,
                stride_cn,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                EVEN_K,
                EVEN_N,
                B_N_CONTIG,
                USE_TMA,
                c_dst,
                TMA_STORE,
            )
