"""Warp-specialized grouped FP8 blockwise GEMM for Hopper (Gluon): the forward and the dgrad.

``C[rows of g] = (A[rows of g] * sa) @ (B[g] * sb[g])ᵀ`` for every group ``g`` of the tokens
sorted by expert, with 1x128 scales for A and one scale per 128x128 block of B. The structure is
the dense kernel's (:mod:`kernel_ratchet.kernels.gemm.fp8_block_ws`): one producer warp issues
TMA loads into a ring of ``STAGES`` shared-memory stages; two consumer warpgroups, each owning
64 rows of a 128-row tile, run their scaled wgmma chains in separate partitions, so one's scale
multiply overlaps the other's MMAs. The grid is persistent over the flattened (group, row tile,
column tile) list that every partition derives from ``group_lens`` on the device (no host read),
row tiles swizzled in ``GROUP_M`` bands inside a group.

A row tile may run past its group's last row: its A rows then come from the next group (or are
zeros past ``T``), and those output rows are never stored. A column tile past ``N`` reads the
next group's weight rows the same way. Each consumer stores its 64 rows through masked pointer
stores, or with ``TMA_STORE`` through shared memory by TMA, with a descriptor it builds on the
device over its group's output rows, so that the TMA unit clips the rows past the group (as
:mod:`.mm_ws` does); the store then runs while the consumer starts the next tile.

Operands: ``A [T, K]`` and ``B`` viewed ``[G * N, K]``, both FP8 and K-major with 16-byte
aligned rows; scales ``sa [T, ceil(K/128)]`` and ``sb [G, ceil(N/128), ceil(K/128)]``, any
strides. The host side is :mod:`.fp8_ws_launch`.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma_wait,
)

from kernel_ratchet.kernels.gemm.fp8_block_ws import _issue
from kernel_ratchet.kernels.gemm.wgrad_ws import _add

#: Rows of the output tile each consumer warpgroup owns (the wgmma M of one warpgroup).
ROWS = 64
#: The k-group of blockwise scaling, and the K of one stage.
KGROUP = 128
HALF_M = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(KGROUP)


@gluon.jit
def _schedule(lens_ptr, G, N, G_POW2: gl.constexpr, BLOCK_N: gl.constexpr, NW: gl.constexpr):
    """Per group: rows, tiles, and the running ends of both (one vector each over G_POW2)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    offs_g = gl.arange(0, G_POW2, layout=layout)
    lens = gl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(gl.int32)
    n_tiles = gl.cdiv(N, BLOCK_N)
    tiles = (lens + 2 * HALF_M - 1) // (2 * HALF_M) * n_tiles
    tile_end = gl.associative_scan(tiles, 0, _add)
    row_end = gl.associative_scan(lens, 0, _add)
    return offs_g, lens, tiles, tile_end, row_end


@gluon.jit
def _tile_of(
    tile_id, offs_g, lens, tiles, tile_end, row_end, N, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr
):
    """A flat tile index -> (first row, rows of its group left from there, column tile, group)."""
    n_tiles = gl.cdiv(N, BLOCK_N)
    g = gl.sum((tile_end <= tile_id).to(gl.int32), 0)
    sel = offs_g == g
    g_tile0 = gl.sum(gl.where(sel, tile_end - tiles, 0), 0)
    g_row0 = gl.sum(gl.where(sel, row_end - lens, 0), 0)
    g_len = gl.sum(gl.where(sel, lens, 0), 0)
    g_mt = (g_len + 2 * HALF_M - 1) // (2 * HALF_M)
    local = tile_id - g_tile0
    width = GROUP_M * n_tiles
    first_m = (local // width) * GROUP_M
    gsz = gl.minimum(g_mt - first_m, GROUP_M)
    pm = first_m + (local % width) % gsz
    pn = (local % width) // gsz
    return g_row0 + pm * 2 * HALF_M, g_len - pm * 2 * HALF_M, pn, g


@gluon.jit
def _out_desc(c_ptr, row0, rows, N, stride_cm, BLOCK_N: gl.constexpr, C_LAYOUT: gl.constexpr):
    """A store descriptor over ``rows`` output rows from ``row0`` (at least one)."""
    return tma.make_tensor_descriptor(
        c_ptr + row0.to(gl.int64) * stride_cm,
        shape=[gl.maximum(rows, 1), N],
        strides=[stride_cm, 1],
        block_shape=[HALF_M, BLOCK_N],
        layout=C_LAYOUT,
    )


@gluon.jit
def _group_out(c_desc, cur, g, offs_g, lens, row_end, c_ptr, N, stride_cm, BLOCK_N: gl.constexpr,
               C_LAYOUT: gl.constexpr):  # fmt: skip
    """The store descriptor of group ``g`` (``c_desc`` kept when ``cur`` is ``g`` already,
    else rebuilt: call it once the previous store has completed), ``g`` and its first row."""
    sel = offs_g == g
    g_row0 = gl.sum(gl.where(sel, row_end - lens, 0), 0)
    if g != cur:
        g_len = gl.sum(gl.where(sel, lens, 0), 0)
        c_desc = _out_desc(c_ptr, g_row0, g_len, N, stride_cm, BLOCK_N, C_LAYOUT)
    return c_desc, g, g_row0


@gluon.jit
def _producer(
    a_desc,
    b_desc,
    a_bufs,
    b_bufs,
    ready,
    empty,
    lens_ptr,
    G,
    N,
    K,
    G_POW2: gl.constexpr,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
):
    """TMA loads of every (tile, k-group) this CTA owns, in the consumers' order."""
    offs_g, lens, tiles, tile_end, row_end = _schedule(lens_ptr, G, N, G_POW2, BLOCK_N, 1)
    total = gl.sum(tiles, 0)
    k_steps = (gl.cdiv(K, BLOCK_K) + 1) // 2 * 2  # the consumers' even step count
    nbytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    it = 0
    for tile in range(gl.program_id(0), total, NUM_SMS):
        row0, valid, pn, g = _tile_of(
            tile, offs_g, lens, tiles, tile_end, row_end, N, BLOCK_N, GROUP_M
        )
        off_b = g * N + pn * BLOCK_N
        for kt in range(k_steps):
            s = it % STAGES
            # free once both consumer warpgroups released it; a fresh mbarrier counts as
            # having completed the phase before phase 0
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            k = kt * BLOCK_K
            tma.async_copy_global_to_shared(a_desc, [row0, k], bar, a_bufs.index(2 * s))
            tma.async_copy_global_to_shared(
                a_desc, [row0 + HALF_M, k], bar, a_bufs.index(2 * s + 1)
            )
            tma.async_copy_global_to_shared(b_desc, [off_b, k], bar, b_bufs.index(s))
            it += 1


@gluon.jit
def _retire(acc, p, scale, empty, it, PENDING: gl.constexpr, STAGES: gl.constexpr):
    """Wait for ring step ``it``'s wgmma (``PENDING`` younger ones may stay in flight),
    release its stage and add its scaled product to ``acc``."""
    done = warpgroup_mma_wait(num_outstanding=PENDING, deps=(p,))
    mbarrier.arrive(empty.index(it % STAGES), count=1)
    return acc + done * gl.expand_dims(scale, 1)


@gluon.jit
def _scale(sa_rows, m_ok, sb_tile, kt, k_tiles, stride_sak, stride_sbk):
    """k-group ``kt``'s combined scale per row (A's row scale times the tile's B block scale);
    zeros for the padding group past the last one."""
    real = kt < k_tiles
    sa = gl.load(sa_rows + kt * stride_sak, mask=m_ok & real, other=0.0)
    sb = gl.load(sb_tile + kt * stride_sbk, mask=real, other=0.0)
    return sa * sb


@gluon.jit
def _consumer(
    a_bufs,
    b_bufs,
    ready,
    empty,
    c_ptr,
    sa_ptr,
    sb_ptr,
    lens_ptr,
    G,
    N,
    K,
    stride_cm,
    stride_sam,
    stride_sak,
    stride_sbg,
    stride_sbn,
    stride_sbk,
    WG: gl.constexpr,
    G_POW2: gl.constexpr,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
    MODE: gl.constexpr,
    c_smem=None,
    C_LAYOUT: gl.constexpr = None,
    TMA_STORE: gl.constexpr = False,
):
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile: scaled wgmma chain, then a masked store
    (``TMA_STORE``: a TMA store through ``c_smem[WG]``)."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 32]
    )
    rows_l: gl.constexpr = gl.SliceLayout(1, layout)
    cols_l: gl.constexpr = gl.SliceLayout(0, layout)
    offs_g, lens, tiles, tile_end, row_end = _schedule(lens_ptr, G, N, G_POW2, BLOCK_N, 4)
    total = gl.sum(tiles, 0)
    k_tiles = gl.cdiv(K, BLOCK_K)
    k_steps = (k_tiles + 1) // 2 * 2
    zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
    local_m = WG * HALF_M + gl.arange(0, HALF_M, layout=rows_l)
    if TMA_STORE:
        c_buf = c_smem.index(WG)
        cur = gl.program_id(0) * 0 - 1  # no group yet (tensors: the loop reassigns them)
        c_desc = _out_desc(c_ptr, cur + 1, cur + 2, N, stride_cm, BLOCK_N, C_LAYOUT)
    it = 0
    for tile in range(gl.program_id(0), total, NUM_SMS):
        row0, valid, pn, g = _tile_of(
            tile, offs_g, lens, tiles, tile_end, row_end, N, BLOCK_N, GROUP_M
        )
        m_ok = local_m < valid
        rows = (row0 + local_m).to(gl.int64)
        sa_rows = sa_ptr + rows * stride_sam
        off_n = pn * BLOCK_N
        # BLOCK_N divides 128: one B scale per tile and k-group
        sb_tile = sb_ptr + g.to(gl.int64) * stride_sbg + (off_n // BLOCK_K) * stride_sbn
        acc = zero
        if MODE == 1:
            # pairs of k-groups: both wgmmas issued before the first is waited for, so its
            # scaling runs under the second's (see the dense kernel)
            for kt in range(0, k_steps, 2):
                s0 = _scale(sa_rows, m_ok, sb_tile, kt, k_tiles, stride_sak, stride_sbk)
                s1 = _scale(sa_rows, m_ok, sb_tile, kt + 1, k_tiles, stride_sak, stride_sbk)
                p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES)
                p1 = _issue(a_bufs, b_bufs, ready, it + kt + 1, zero, WG, STAGES)
                acc = _retire(acc, p0, s0, empty, it + kt, 1, STAGES)
                acc = _retire(acc, p1, s1, empty, it + kt + 1, 0, STAGES)
        else:
            for kt in range(0, k_steps):
                s0 = _scale(sa_rows, m_ok, sb_tile, kt, k_tiles, stride_sak, stride_sbk)
                p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES)
                acc = _retire(acc, p0, s0, empty, it + kt, 0, STAGES)
        it += k_steps
        if TMA_STORE:
            # the previous tile's store has read c_buf (and its descriptor) once this returns
            tma.store_wait(pendings=0)
            c_desc, cur, g_row0 = _group_out(
                c_desc, cur, g, offs_g, lens, row_end, c_ptr, N, stride_cm, BLOCK_N, C_LAYOUT
            )
            c_buf.store(acc.to(c_ptr.dtype.element_ty))
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [row0 - g_row0 + WG * HALF_M, off_n], c_buf)
        else:
            # rows past the group and columns past N belong to no output of this tile
            offs_n = off_n + gl.arange(0, BLOCK_N, layout=cols_l)
            c_ptrs = c_ptr + gl.expand_dims(rows * stride_cm, 1) + gl.expand_dims(offs_n, 0)
            mask = gl.expand_dims(m_ok, 1) & gl.expand_dims(offs_n < N, 0)
            gl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
    if TMA_STORE:
        tma.store_wait(pendings=0)


@gluon.jit
def _grouped_fp8_ws_kernel(
    a_desc, b_desc, c_ptr, sa_ptr, sb_ptr, lens_ptr, G, N, K, stride_cm, stride_sam, stride_sak,
    stride_sbg, stride_sbn, stride_sbk, G_POW2: gl.constexpr, BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, MODE: gl.constexpr, C_LAYOUT: gl.constexpr,
    TMA_STORE: gl.constexpr,
):  # fmt: skip
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, HALF_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    # The partitions: consumer warpgroups 0 and 1, then the producer warp. Gluon takes them as
    # a literal list, so the two branches repeat their common entries.
    if TMA_STORE:  # one output staging buffer per consumer warpgroup
        c_smem = gl.allocate_shared_memory(c_ptr.dtype.element_ty, [2, HALF_M, BLOCK_N], C_LAYOUT)
        gl.warp_specialize([
                (_consumer, (a_bufs, b_bufs, ready, empty, c_ptr, sa_ptr, sb_ptr, lens_ptr, G, N,
                             K, stride_cm, stride_sam, stride_sak, stride_sbg, stride_sbn,
                             stride_sbk, 0, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE,
                             c_smem, C_LAYOUT, TMA_STORE)),
                (_consumer, (a_bufs, b_bufs, ready, empty, c_ptr, sa_ptr, sb_ptr, lens_ptr, G, N,
                             K, stride_cm, stride_sam, stride_sak, stride_sbg, stride_sbn,
                             stride_sbk, 1, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE,
                             c_smem, C_LAYOUT, TMA_STORE)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, lens_ptr, G, N, K,
                             G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS)),
            ], [4, 1], [CONSUMER_REGS, 40])  # fmt: skip
    else:
        gl.warp_specialize([
                (_consumer, (a_bufs, b_bufs, ready, empty, c_ptr, sa_ptr, sb_ptr, lens_ptr, G, N,
                             K, stride_cm, stride_sam, stride_sak, stride_sbg, stride_sbn,
                             stride_sbk, 0, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE)),
                (_consumer, (a_bufs, b_bufs, ready, empty, c_ptr, sa_ptr, sb_ptr, lens_ptr, G, N,
                             K, stride_cm, stride_sam, stride_sak, stride_sbg, stride_sbn,
                             stride_sbk, 1, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, lens_ptr, G, N, K,
                             G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS)),
            ], [4, 1], [CONSUMER_REGS, 40])  # fmt: skip
