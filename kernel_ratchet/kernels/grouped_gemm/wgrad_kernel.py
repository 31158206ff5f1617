"""The bf16/fp16 grouped weight gradient's Triton kernel (launcher: :mod:`.launch`).

``dW[g, n, k] = sum over rows r of group g of dY[r, n] * X[r, k]``, 0 for an empty group; dY
[T, N] and X [T, K] sorted by group, ``group_lens`` read on the device only. One output tile
per (group, n tile, k tile); the grid is one program per tile, or with ``PERSISTENT``
``NUM_PROGS`` programs walking the tiles in that order.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernel_ratchet.kernels.gemm.kernel_tile import _store_tile


@triton.jit
def _wgrad_tile_of(tile_id, lens_ptr, G, N, K, G_POW2: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):  # fmt: skip
    """Where weight-gradient tile ``tile_id`` lies: its group ``g``, n and k tiles, the group
    lengths (``G_POW2`` lanes), their running ends and the lanes of ``g``."""
    n_tiles = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    g = tile_id // (n_tiles * k_tiles)
    local = tile_id % (n_tiles * k_tiles)
    pn = local // k_tiles
    pk = local % k_tiles
    offs_g = tl.arange(0, G_POW2)
    lens = tl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(tl.int32)
    row_end = tl.cumsum(lens, 0)
    return g, pn, pk, lens, row_end, offs_g == g


@triton.jit
def _wgrad_tile(
    tile_id,
    dy_ptr,
    x_ptr,
    dw_ptr,
    dw_dst,
    lens_ptr,
    N,
    K,
    G,
    stride_dym,
    stride_dyn,
    stride_xm,
    stride_xk,
    stride_wg,
    stride_wn,
    stride_wk,
    G_POW2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_TMA: tl.constexpr,
    TMA_STORE: tl.constexpr,
):
    """One [BLOCK_N, BLOCK_K] tile of dW: the reduction over its group's rows, then the store
    (through ``dw_dst`` by TMA when ``TMA_STORE``: the launcher's choice where N is a tile
    multiple, so a tile never reaches into the next group's rows of the [G * N, K] view)."""
    g, pn, pk, lens, row_end, sel = _wgrad_tile_of(
        tile_id, lens_ptr, G, N, K, G_POW2, BLOCK_N, BLOCK_K
    )
    g_row0 = tl.sum(tl.where(sel, row_end - lens, 0))
    g_len = tl.sum(tl.where(sel, lens, 0))
    rm = tl.arange(0, BLOCK_M)
    cols_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cols_k = pk * BLOCK_K + tl.arange(0, BLOCK_K)
    # N and K are the contiguous axes of dY and X: masked, never clamped.
    n_ok = cols_n < N
    k_ok = cols_k < K
    dy_ptrs = dy_ptr + g_row0.to(tl.int64) * stride_dym + rm[None, :] * stride_dym
    dy_ptrs += cols_n[:, None] * stride_dyn
    x_ptrs = x_ptr + g_row0.to(tl.int64) * stride_xm + rm[:, None] * stride_xm
    x_ptrs += cols_k[None, :] * stride_xk
    if USE_TMA:
        rows = tl.maximum(g_len, 1)  # an empty group runs no step; a descriptor needs a row
        dy_desc = tl.make_tensor_descriptor(
            dy_ptr + g_row0.to(tl.int64) * stride_dym,
            shape=[rows, N],
            strides=[stride_dym, 1],
            block_shape=[BLOCK_M, BLOCK_N],
        )
        x_desc = tl.make_tensor_descriptor(
            x_ptr + g_row0.to(tl.int64) * stride_xm,
            shape=[rows, K],
            strides=[stride_xm, 1],
            block_shape=[BLOCK_M, BLOCK_K],
        )
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for m in range(0, tl.cdiv(g_len, BLOCK_M)):
        if USE_TMA:
            dy = dy_desc.load([m * BLOCK_M, pn * BLOCK_N]).T
            x = x_desc.load([m * BLOCK_M, pk * BLOCK_K])
        else:
            ok = rm < g_len - m * BLOCK_M
            dy = tl.load(dy_ptrs, mask=ok[None, :] & n_ok[:, None], other=0.0)
            x = tl.load(x_ptrs, mask=ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(dy, x, acc)
        if not USE_TMA:
            dy_ptrs += BLOCK_M * stride_dym
            x_ptrs += BLOCK_M * stride_xm
    if TMA_STORE > 0:
        _store_tile(acc, dw_ptr, dw_dst, g * N + pn * BLOCK_N, pk * BLOCK_K, 0, 0, 0, 0, 0, 0,
                    BLOCK_N, BLOCK_K, 1, TMA_STORE)  # fmt: skip
    else:
        w_ptrs = dw_ptr + g.to(tl.int64) * stride_wg + cols_n[:, None] * stride_wn
        w_ptrs += cols_k[None, :] * stride_wk
        tl.store(w_ptrs, acc.to(dw_ptr.dtype.element_ty), mask=n_ok[:, None] & k_ok[None, :])


@triton.jit
def _grouped_wgrad_kernel(
    dy_ptr,
    x_ptr,
    dw_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_dym,
    stride_dyn,
    stride_xm,
    stride_xk,
    stride_wg,
    stride_wn,
    stride_wk,
    G_POW2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_TMA: tl.constexpr = False,
    PERSISTENT: tl.constexpr = False,
    NUM_PROGS: tl.constexpr = 1,
    FLATTEN: tl.constexpr = False,
    TMA_STORE: tl.constexpr = 0,
):
    """dW[g, n, k] = sum over rows r of group g of dY[r, n] * X[r, k]; 0 for an empty group.

    One program per (g, n tile, k tile), or with PERSISTENT ``NUM_PROGS`` programs over them
    (FLATTEN: the tile loop and the row loop as one software pipeline, so a tile's store
    overlaps the next tile's loads). USE_TMA: the tiles load through TMA descriptors over the
    group's own rows (base at its first row, its length as the row count), so rows past the
    group and columns past N or K come back as zeros without a mask; dY and X contiguous along
    their last axis with 16-byte aligned rows. TMA_STORE 1 or 2: the tile goes out by TMA
    (whole, or two halves of BLOCK_K) through a descriptor over dW viewed [G * N, K].
    """
    dw_dst = dw_ptr
    if TMA_STORE > 0:
        dw_dst = tl.make_tensor_descriptor(
            dw_ptr, shape=[G * N, K], strides=[stride_wn, 1],
            block_shape=[BLOCK_N, BLOCK_K // TMA_STORE],
        )  # fmt: skip
    if PERSISTENT:
        total = G * tl.cdiv(N, BLOCK_N) * tl.cdiv(K, BLOCK_K)
        for tile_id in tl.range(tl.program_id(0), total, NUM_PROGS, flatten=FLATTEN):
            _wgrad_tile(tile_id, dy_ptr, x_ptr, dw_ptr, dw_dst, lens_ptr, N, K, G, stride_dym,
                        stride_dyn, stride_xm, stride_xk, stride_wg, stride_wn, stride_wk,
                        G_POW2, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, TMA_STORE)  # fmt: skip
    else:
        _wgrad_tile(tl.program_id(0), dy_ptr, x_ptr, dw_ptr, dw_dst, lens_ptr, N, K, G,
                    stride_dym, stride_dyn, stride_xm, stride_xk, stride_wg, stride_wn, stride_wk,
                    G_POW2, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, TMA_STORE)  # fmt: skip
