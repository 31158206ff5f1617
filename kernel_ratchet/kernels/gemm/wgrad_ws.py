"""Warp-specialized grouped bf16/fp16 weight gradient for Hopper (Gluon).

Grouped: the MoE layer's experts (:mod:`kernel_ratchet.kernels.grouped_gemm`); with one group,
a Linear's weight gradient over few rows.

``dW[g] = dY_gᵀ @ X_g`` over each group's rows of ``dY [T, N]`` and ``X [T, K]`` (sorted by
group), 0 for an empty group. A tile is 128 rows of N by ``BLOCK_K`` columns of one group's dW.
One producer warp loads 64-row steps of dY and X into a ring of ``STAGES`` shared-memory stages
through TMA descriptors it builds on the device over the current group's own rows (base at its
first row, its length as the row count: rows past the group load as zeros, no mask). It keeps
two pairs and rebuilds one in place when its next tile is in another group, the groups taking
them in turn: the loads through the rebuilt pair, issued a tile or more before, must have
landed, which seldom waits. Two consumer warpgroups, each owning 64 of the tile's rows, run
their wgmma chains over the steps (dY's step read transposed from shared memory) and store their
half by TMA. The grid is persistent over the (group, n tile, k tile) list, so the producer loads
the next tile's first steps while the consumers finish and store this one: a short reduction (a
few hundred rows per expert) no longer pays the pipeline's fill per tile. Inside a group, bands
of ``GROUP_N`` n tiles share each k tile's steps of X among the programs running at once.

The output is ``dW`` viewed ``[G * N, K]`` with N a multiple of 128, so a tile never reaches
into the next group's rows. The host side is :mod:`.wgrad_ws_launch`.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

#: Rows of N each consumer warpgroup owns (the wgmma M of one warpgroup); a tile has two.
ROWS = 64
#: Rows of dY and X (tokens) one stage holds: the reduction step.
STEP = 64
HALF_N = gl.constexpr(ROWS)
BLOCK_T = gl.constexpr(STEP)


@gluon.jit
def _add(a, b):
    """The combine of a running sum (``gl.associative_scan``)."""
    return a + b


@gluon.jit
def _groups(lens_ptr, G, G_POW2: gl.constexpr, NW: gl.constexpr):
    """The group lengths and their running ends (one vector each over ``G_POW2`` lanes)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    offs_g = gl.arange(0, G_POW2, layout=layout)
    lens = gl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(gl.int32)
    return offs_g, lens, gl.associative_scan(lens, 0, _add)


@gluon.jit
def _tile_of(tile_id, offs_g, lens, row_end, lens_ptr, G, N, K, BLOCK_K: gl.constexpr,
             GROUP_N: gl.constexpr, ORDERED: gl.constexpr):  # fmt: skip
    """A flat tile index -> (group, n tile, k tile, the group's first row, its row count).

    The groups follow each other in index order, or with ``ORDERED`` in the order listed
    after their lengths (``lens_ptr[G:]``; longest first, so the round-robin ends on short
    tiles). Inside a
    group, bands of ``GROUP_N`` n tiles are walked k tile by k tile, the n tiles of a band
    next to each other: the programs running at once then share the steps of X they load, not
    only those of dY (GROUP_N 1: each n tile's k tiles in a row)."""
    n_tiles = gl.cdiv(N, 2 * HALF_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    g = tile_id // (n_tiles * k_tiles)
    if ORDERED:
        g = gl.load(lens_ptr + G + g)
    local = tile_id % (n_tiles * k_tiles)
    width = GROUP_N * k_tiles
    first_n = (local // width) * GROUP_N
    band = gl.minimum(n_tiles - first_n, GROUP_N)
    sel = offs_g == g
    row0 = gl.sum(gl.where(sel, row_end - lens, 0), 0)
    rows = gl.sum(gl.where(sel, lens, 0), 0)
    return g, first_n + (local % width) % band, (local % width) // band, row0, rows


@gluon.jit
def _descs(dy_ptr, x_ptr, row0, rows, N, K, stride_dy, stride_x, DY_LAYOUT: gl.constexpr,
           X_LAYOUT: gl.constexpr, BLOCK_K: gl.constexpr):  # fmt: skip
    """TMA descriptors over one group's rows of dY and X (an empty group: one row, unread)."""
    dy_desc = tma.make_tensor_descriptor(
        dy_ptr + row0.to(gl.int64) * stride_dy,
        shape=[gl.maximum(rows, 1), N],
        strides=[stride_dy, 1],
        block_shape=[BLOCK_T, HALF_N],
        layout=DY_LAYOUT,
    )
    x_desc = tma.make_tensor_descriptor(
        x_ptr + row0.to(gl.int64) * stride_x,
        shape=[gl.maximum(rows, 1), K],
        strides=[stride_x, 1],
        block_shape=[BLOCK_T, BLOCK_K],
        layout=X_LAYOUT,
    )
    return dy_desc, x_desc


@gluon.jit
def _producer(
    dy_ptr,
    x_ptr,
    dy_bufs,
    x_bufs,
    ready,
    empty,
    lens_ptr,
    G,
    N,
    K,
    stride_dy,
    stride_x,
    DY_LAYOUT: gl.constexpr,
    X_LAYOUT: gl.constexpr,
    G_POW2: gl.constexpr,
    BLOCK_K: gl.constexpr,
    GROUP_N: gl.constexpr,
    ORDERED: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
):
    """TMA loads of every (tile, step) this CTA owns, in the consumers' order."""
    offs_g, lens, row_end = _groups(lens_ptr, G, G_POW2, 1)
    total = G * gl.cdiv(N, 2 * HALF_N) * gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = (2 * HALF_N + BLOCK_K) * BLOCK_T * dy_bufs.dtype.primitive_bitwidth // 8
    it = 0
    # Two descriptor pairs, one per group in turn: a rebuild rewrites a pair in place, so the
    # loads through it must have landed first, and those were issued at least one tile ago.
    cur = gl.program_id(0) * 0 - 1  # no group yet (tensors: the loop reassigns them)
    slot = cur + 1
    last0 = cur
    last1 = cur  # the last step loaded through each pair
    dy0, x0 = _descs(dy_ptr, x_ptr, slot, slot + 1, N, K, stride_dy, stride_x, DY_LAYOUT,
                     X_LAYOUT, BLOCK_K)  # fmt: skip
    dy1, x1 = _descs(dy_ptr, x_ptr, slot, slot + 1, N, K, stride_dy, stride_x, DY_LAYOUT,
                     X_LAYOUT, BLOCK_K)  # fmt: skip
    for tile in range(gl.program_id(0), total, NUM_SMS):
        g, pn, pk, row0, rows = _tile_of(tile, offs_g, lens, row_end, lens_ptr, G, N, K,
                                         BLOCK_K, GROUP_N, ORDERED)  # fmt: skip
        if g != cur:  # consecutive tiles of a program mostly share their group
            slot = 1 - slot
            if slot == 0:
                _landed(ready, last0, it, STAGES)
                dy0, x0 = _descs(dy_ptr, x_ptr, row0, rows, N, K, stride_dy, stride_x,
                                 DY_LAYOUT, X_LAYOUT, BLOCK_K)  # fmt: skip
            else:
                _landed(ready, last1, it, STAGES)
                dy1, x1 = _descs(dy_ptr, x_ptr, row0, rows, N, K, stride_dy, stride_x,
                                 DY_LAYOUT, X_LAYOUT, BLOCK_K)  # fmt: skip
            cur = g
        for t in range(gl.cdiv(rows, BLOCK_T)):
            s = it % STAGES
            # free once both consumer warpgroups released it; a fresh mbarrier counts as
            # having completed the phase before phase 0
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            if slot == 0:
                _load_step(dy0, x0, dy_bufs, x_bufs, bar, s, t, pn, pk, BLOCK_K)
            else:
                _load_step(dy1, x1, dy_bufs, x_bufs, bar, s, t, pn, pk, BLOCK_K)
            it += 1
        if slot == 0:
            last0 = it - 1
        else:
            last1 = it - 1


@gluon.jit
def _landed(ready, last, it, STAGES: gl.constexpr):
    """Wait until the loads of ring steps up to ``last`` have landed: those of the last
    ``STAGES`` steps issued (``it`` so far) may be in flight; an older step's stage has been
    refilled since, so its loads were consumed."""
    for j in gl.static_range(STAGES):
        step = gl.maximum(last - j, 0)
        live = (last - j >= 0) & (last - j >= it - STAGES)
        mbarrier.wait(ready.index(step % STAGES), (step // STAGES) & 1, pred=live)


@gluon.jit
def _load_step(dy_desc, x_desc, dy_bufs, x_bufs, bar, s, t, pn, pk, BLOCK_K: gl.constexpr):
    """Step ``t`` of tile (``pn``, ``pk``) into stage ``s``: each consumer warpgroup's 64
    columns of dY, then the tile's columns of X."""
    r = t * BLOCK_T
    for w in gl.static_range(2):
        tma.async_copy_global_to_shared(dy_desc, [r, (2 * pn + w) * HALF_N], bar,
                                        dy_bufs.index(2 * s + w))  # fmt: skip
    tma.async_copy_global_to_shared(x_desc, [r, pk * BLOCK_K], bar, x_bufs.index(s))


@gluon.jit
def _consumer(
    dy_bufs,
    x_bufs,
    ready,
    empty,
    dw_desc,
    c_smem,
    lens_ptr,
    G,
    N,
    K,
    WG: gl.constexpr,
    G_POW2: gl.constexpr,
    BLOCK_K: gl.constexpr,
    GROUP_N: gl.constexpr,
    ORDERED: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
):
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile: the wgmma chain, then a TMA store."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_K, 16]
    )
    offs_g, lens, row_end = _groups(lens_ptr, G, G_POW2, 4)
    total = G * gl.cdiv(N, 2 * HALF_N) * gl.cdiv(K, BLOCK_K)
    zero = gl.zeros([HALF_N, BLOCK_K], gl.float32, layout)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), total, NUM_SMS):
        g, pn, pk, row0, rows = _tile_of(tile, offs_g, lens, row_end, lens_ptr, G, N, K,
                                         BLOCK_K, GROUP_N, ORDERED)  # fmt: skip
        steps = gl.cdiv(rows, BLOCK_T)
        acc = zero
        for t in range(steps):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            acc = warpgroup_mma(
                dy_bufs.index(2 * s + WG).permute((1, 0)), x_bufs.index(s), acc, is_async=True
            )
            # the previous step's wgmma is done: release its stage
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=t > 0)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=steps > 0)
        # the previous tile's store must have read c_buf before it is overwritten
        tma.store_wait(pendings=0)
        c_buf.store(acc.to(dw_desc.dtype))
        fence_async_shared()
        n0 = g * N + pn * 2 * HALF_N + WG * HALF_N
        tma.async_copy_shared_to_global(dw_desc, [n0, pk * BLOCK_K], c_buf)
    tma.store_wait(pendings=0)


@gluon.jit
def _grouped_wgrad_ws_kernel(
    dy_ptr,
    x_ptr,
    dw_desc,
    lens_ptr,
    G,
    N,
    K,
    stride_dy,
    stride_x,
    DY_LAYOUT: gl.constexpr,
    X_LAYOUT: gl.constexpr,
    G_POW2: gl.constexpr,
    BLOCK_K: gl.constexpr,
    GROUP_N: gl.constexpr,
    ORDERED: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
):
    dtype: gl.constexpr = dy_ptr.dtype.element_ty
    dy_bufs = gl.allocate_shared_memory(dtype, [2 * STAGES, BLOCK_T, HALF_N], DY_LAYOUT)
    x_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_T, BLOCK_K], X_LAYOUT)
    c_smem = gl.allocate_shared_memory(dw_desc.dtype, [2, HALF_N, BLOCK_K], dw_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    gl.warp_specialize([
            (_consumer, (dy_bufs, x_bufs, ready, empty, dw_desc, c_smem, lens_ptr, G, N, K, 0,
                         G_POW2, BLOCK_K, GROUP_N, ORDERED, STAGES, NUM_SMS)),
            (_consumer, (dy_bufs, x_bufs, ready, empty, dw_desc, c_smem, lens_ptr, G, N, K, 1,
                         G_POW2, BLOCK_K, GROUP_N, ORDERED, STAGES, NUM_SMS)),
            (_producer, (dy_ptr, x_ptr, dy_bufs, x_bufs, ready, empty, lens_ptr, G, N, K,
                         stride_dy, stride_x, DY_LAYOUT, X_LAYOUT, G_POW2, BLOCK_K, GROUP_N,
                         ORDERED, STAGES, NUM_SMS)),
        ], [4, 1], [CONSUMER_REGS, 40])  # fmt: skip
