"""Dense GEMM kernel (Triton, Hopper wgmma through ``tl.dot``) for bf16/fp16 and FP8 operands.

One kernel computes ``C[M, N] = sum_k A[M, k] B[N, k]`` (FP8: with scales) where each operand
is stored either K-major (``A: [M, K]``, ``B: [N, K]``, row-major) or not (``A: [K, M]``,
``B: [K, N]``). That covers a Linear layer's three GEMMs without copies for 16-bit operands:

* forward  ``out = a @ bᵀ``   A = a [M, K] K-major,          B = b [N, K] K-major;
* backward ``da = dout @ b``  A = dout [M, N] K-major,       B = b [N, K] read as [K', N'];
* backward ``db = doutᵀ @ a`` A = dout [M, N] read as [K', M'], B = a [M, K] read as [K', N'].

FP8 tensor cores want both operands K-major, so the FP8 recipes in :mod:`.fp8` hand this kernel
K-major data produced by the quantization kernels (transposed copies where needed).

Scaling (``SCALE_MODE``): 0 none; 1 tensorwise (two scalars, epilogue); 2 rowwise (a vector
over M and one over N, epilogue); 3 blockwise (per 128-wide k-group: A scales ``[M, K/128]``,
B scales ``[N/G, K/128]`` with G = 128 for 128x128 weight blocks or 1 for 1x128 groups of
B's rows), applied to each k-block's partial product in fp32, so ``BLOCK_K`` must be 128.

Split-K (``SPLIT_K`` > 1: one program per output tile and K slice) adds the slices' partial
tiles with fp32 atomics into a zeroed fp32 output that the launcher casts, or, with
``SPLIT_FINISH`` (no scales), into fp32 slots that start and end zero: each tile's last slice
to arrive stores the tile in the output's dtype (:func:`.kernel_tile._finish_split`), one
launch in all. ``sa_ptr`` and ``sb_ptr``, which carry no scales then, are the slots and the
tiles' arrival counts.

The launcher (:mod:`.launch`) takes the launch configuration from :mod:`.configs` (named shape
buckets, no autotuning) and passes it as the kernel's constexpr arguments.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernel_ratchet.kernels.gemm.kernel_tile import (
    _finish_split,
    _load_ab,
    _output,
    _sources,
    _store_tile,
    _tile_coords,
)

#: ``SCALE_MODE`` values of :func:`_gemm_kernel`.
SCALE_NONE, SCALE_TENSOR, SCALE_ROW, SCALE_BLOCK = 0, 1, 2, 3


@triton.jit
def _gemm_tile(
    tile_id,
    a_src,
    b_src,
    c_ptr,
    c_dst,
    sa_ptr,
    sb_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    stride_sam,
    stride_sak,
    stride_sbn,
    stride_sbk,
    SCALE_MODE: tl.constexpr,
    SB_GROUP_N: tl.constexpr,
    A_KMAJOR: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    USE_TMA: tl.constexpr,
    K_UNROLL: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    A_ALIGN: tl.constexpr,
    B_ALIGN: tl.constexpr,
    TMA_STORE: tl.constexpr,
    SPLIT_FINISH: tl.constexpr,
):
    """One output tile (and one K slice when SPLIT_K > 1)."""
    if not USE_TMA:
        # Row strides the launcher found divisible by A_ALIGN / B_ALIGN (elements) but Triton
        # only knows as "not divisible by 16": rebuilt as a product so the loads vectorize.
        if A_ALIGN > 1:
            if A_KMAJOR:
                stride_am = stride_am // A_ALIGN * A_ALIGN
            else:
                stride_ak = stride_ak // A_ALIGN * A_ALIGN
        if B_ALIGN > 1:
            if B_KMAJOR:
                stride_bn = stride_bn // B_ALIGN * B_ALIGN
            else:
                stride_bk = stride_bk // B_ALIGN * B_ALIGN
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_mn = num_pid_m * num_pid_n
    pid_k = tile_id // num_mn
    pid_m, pid_n = _tile_coords(tile_id % num_mn, num_pid_m, num_pid_n, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    # Out-of-range rows/columns read row 0 instead of masking every load; the store masks them.
    offs_am = tl.where(offs_m < M, offs_m, 0)
    offs_bn = tl.where(offs_n < N, offs_n, 0)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    kt0 = pid_k * per_split
    kt1 = tl.minimum(kt0 + per_split, k_tiles)
    offs_k = tl.arange(0, BLOCK_K)
    if not USE_TMA:
        a_ptrs = (
            a_src + offs_am[:, None] * stride_am + (kt0 * BLOCK_K + offs_k)[None, :] * stride_ak
        )
        b_ptrs = (
            b_src + (kt0 * BLOCK_K + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn
        )
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if SCALE_MODE == 3 and K_UNROLL == 2:
        # Two k-groups per iteration: both wgmmas are issued before the scaled accumulation
        # waits on them, instead of one wait per 128-wide group. A second group past the
        # slice end gets zero scales (its data is zeros past K, or the next slice's).
        for kt in range(kt0, kt1, 2):
            a0, b0 = _load_ab(
                a_src,
                b_src,
                kt,
                off_m,
                off_n,
                offs_am,
                offs_bn,
                offs_k,
                K,
                stride_am,
                stride_ak,
                stride_bn,
                stride_bk,
                A_KMAJOR,
                B_KMAJOR,
                BLOCK_K,
                USE_TMA,
            )
            a1, b1 = _load_ab(
                a_src,
                b_src,
                kt + 1,
                off_m,
                off_n,
                offs_am,
                offs_bn,
                offs_k,
                K,
                stride_am,
                stride_ak,
                stride_bn,
                stride_bk,
                A_KMAJOR,
                B_KMAJOR,
                BLOCK_K,
                USE_TMA,
            )
            p0 = tl.dot(a0, b0)
            p1 = tl.dot(a1, b1)
            has1 = kt + 1 < kt1
            sa0 = tl.load(sa_ptr + offs_am * stride_sam + kt * stride_sak)
            sb0 = tl.load(sb_ptr + (offs_bn // SB_GROUP_N) * stride_sbn + kt * stride_sbk)
            sa1 = tl.load(
                sa_ptr + offs_am * stride_sam + (kt + 1) * stride_sak, mask=has1, other=0.0
            )
            sb1 = tl.load(
                sb_ptr + (offs_bn // SB_GROUP_N) * stride_sbn + (kt + 1) * stride_sbk,
                mask=has1,
                other=0.0,
            )
            acc += p0 * (sa0[:, None] * sb0[None, :]) + p1 * (sa1[:, None] * sb1[None, :])
        kt1 = kt0  # the generic loop below is skipped
    # warp_specialize=False builds the same loop as a plain range (no loop attribute)
    for kt in tl.range(kt0, kt1, warp_specialize=WARP_SPECIALIZE):
        if USE_TMA:
            if A_KMAJOR:
                a = a_src.load([off_m, kt * BLOCK_K])
            else:
                a = a_src.load([kt * BLOCK_K, off_m]).T
            if B_KMAJOR:
                b = b_src.load([off_n, kt * BLOCK_K]).T
            else:
                b = b_src.load([kt * BLOCK_K, off_n])
        else:
            k_ok = kt * BLOCK_K + offs_k < K
            a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        if SCALE_MODE == 3:
            sa = tl.load(sa_ptr + offs_am * stride_sam + kt * stride_sak)
            sb = tl.load(sb_ptr + (offs_bn // SB_GROUP_N) * stride_sbn + kt * stride_sbk)
            acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
        else:
            acc = tl.dot(a, b, acc)
    if SCALE_MODE == 1:
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    elif SCALE_MODE == 2:
        sa = tl.load(sa_ptr + offs_am * stride_sam)
        sb = tl.load(sb_ptr + offs_bn * stride_sbn)
        acc = acc * (sa[:, None] * sb[None, :])
    if SPLIT_FINISH:  # no scales: sa_ptr, sb_ptr are the fp32 slots and the tiles' counts
        _finish_split(
            acc, sa_ptr, sb_ptr, tile_id % num_mn, c_ptr, offs_m, offs_n, M, N, stride_cm,
            stride_cn, BLOCK_M, BLOCK_N, SPLIT_K,
        )  # fmt: skip
    else:
        _store_tile(
            acc, c_ptr, c_dst, off_m, off_n, offs_m, offs_n, M, N, stride_cm, stride_cn,
            BLOCK_M, BLOCK_N, SPLIT_K, TMA_STORE,
        )  # fmt: skip


@triton.jit
def _gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    sa_ptr,
    sb_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    stride_sam,
    stride_sak,
    stride_sbn,
    stride_sbk,
    SCALE_MODE: tl.constexpr,
    SB_GROUP_N: tl.constexpr,
    A_KMAJOR: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    USE_TMA: tl.constexpr,
    PERSISTENT: tl.constexpr,
    NUM_SMS: tl.constexpr,
    K_UNROLL: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    A_ALIGN: tl.constexpr,
    B_ALIGN: tl.constexpr,
    FLATTEN: tl.constexpr = False,
    TMA_STORE: tl.constexpr = 0,
    SPLIT_FINISH: tl.constexpr = False,
):
    """Grid: one program per (tile, K slice), or NUM_SMS programs looping when PERSISTENT."""
    a_src, b_src = _sources(
        a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
        A_KMAJOR, B_KMAJOR, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA,
    )  # fmt: skip
    c_dst = _output(c_ptr, M, N, stride_cm, BLOCK_M, BLOCK_N, TMA_STORE)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) * SPLIT_K
    if PERSISTENT:
        # FLATTEN: one software pipeline over every (tile, k-block) of this program, so the
        # next tile's first loads are in flight during this tile's epilogue.
        for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=FLATTEN):
            _gemm_tile(
                tile_id,
                a_src,
                b_src,
                c_ptr,
                c_dst,
                sa_ptr,
                sb_ptr,
                M,
                N,
                K,
                stride_am,
                stride_ak,
                stride_bn,
                stride_bk,
                stride_cm,
                stride_cn,
                stride_sam,
                stride_sak,
                stride_sbn,
                stride_sbk,
                SCALE_MODE,
                SB_GROUP_N,
                A_KMAJOR,
                B_KMAJOR,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                GROUP_M,
                SPLIT_K,
                USE_TMA,
                K_UNROLL,
                WARP_SPECIALIZE,
                A_ALIGN,
                B_ALIGN,
                TMA_STORE,
                SPLIT_FINISH,
            )
    else:
        _gemm_tile(
            tl.program_id(0),
            a_src,
            b_src,
            c_ptr,
            c_dst,
            sa_ptr,
            sb_ptr,
            M,
            N,
            K,
            stride_am,
            stride_ak,
            stride_bn,
            stride_bk,
            stride_cm,
            stride_cn,
            stride_sam,
            stride_sak,
            stride_sbn,
            stride_sbk,
            SCALE_MODE,
            SB_GROUP_N,
            A_KMAJOR,
            B_KMAJOR,
            BLOCK_M,
            BLOCK_N,
            BLOCK_K,
            GROUP_M,
            SPLIT_K,
            USE_TMA,
            K_UNROLL,
            WARP_SPECIALIZE,
            A_ALIGN,
            B_ALIGN,
            TMA_STORE,
            SPLIT_FINISH,
        )
