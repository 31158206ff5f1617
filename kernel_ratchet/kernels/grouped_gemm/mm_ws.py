"""Warp-specialized grouped bf16/fp16 GEMM for Hopper (Gluon): the forward and the dgrad.

``out[rows of g] = A[rows of g] @ B_g`` for every group ``g`` of the rows of ``A [T, Kr]``
(sorted by group), with ``B_g`` the group's ``[N, Kr]`` (forward, ``B_KMAJOR``: the weight
stack viewed ``[G * N, Kr]``) or ``[Kr, N]`` (dgrad: the stack viewed ``[G * Kr, N]``, Kr a
multiple of 64). A tile is 128 rows by ``BLOCK_N`` columns of one group's output. One producer
warp loads 64-wide k steps of A and B into a ring of ``STAGES`` shared-memory stages through
descriptors over the whole tensors: a tile's rows past its group read the next group's rows,
which no output keeps. Two consumer warpgroups, each owning 64 of the tile's rows, run their
wgmma chains and store their half by TMA through a descriptor each builds on the device over
its group's output rows (its first row as base, its length as the row count), so the rows past
the group are clipped by the TMA unit rather than masked; it is rebuilt when the next tile is
in another group, after the previous store has completed. The grid is persistent over the
(group, row tile, column tile) list of :mod:`.fp8_ws`'s schedule, row tiles in ``GROUP_M``
bands: the producer loads the next tile while the consumers finish and store this one, which
a short contraction (``Kr`` of 768-2048: 12-32 steps) otherwise pays at every tile.

The host side is :mod:`.mm_ws_launch`.
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

from kernel_ratchet.kernels.gemm.bf16_ws import _chain, _load_step
from kernel_ratchet.kernels.grouped_gemm.fp8_ws import _group_out, _out_desc, _schedule, _tile_of

#: Rows of the output tile each consumer warpgroup owns (the wgmma M of one warpgroup).
ROWS = 64
#: The k step of one stage (128 bytes of a 16-bit row).
STEP = 64
HALF_M = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(STEP)


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
    B_KMAJOR: gl.constexpr,
):
    """TMA loads of every (tile, k step) this CTA owns, in the consumers' order."""
    offs_g, lens, tiles, tile_end, row_end = _schedule(lens_ptr, G, N, G_POW2, BLOCK_N, 1)
    total = gl.sum(tiles, 0)
    it = 0
    for tile in range(gl.program_id(0), total, NUM_SMS):
        row0, valid, pn, g = _tile_of(
            tile, offs_g, lens, tiles, tile_end, row_end, N, BLOCK_N, GROUP_M
        )
        for kt in range(gl.cdiv(K, BLOCK_K)):
            k = kt * BLOCK_K
            b_row = g * N + pn * BLOCK_N if B_KMAJOR else g * K + k
            b_col = k if B_KMAJOR else pn * BLOCK_N
            _load_step(a_desc, b_desc, a_bufs, b_bufs, ready, empty, it, row0, k, b_row, b_col,
                       STAGES)  # fmt: skip
            it += 1


@gluon.jit
def _consumer(
    a_bufs,
    b_bufs,
    ready,
    empty,
    c_ptr,
    c_smem,
    c_turn,
    lens_ptr,
    G,
    N,
    K,
    stride_cm,
    WG: gl.constexpr,
    C_LAYOUT: gl.constexpr,
    G_POW2: gl.constexpr,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
    B_KMAJOR: gl.constexpr,
    SHARED_C: gl.constexpr,
):
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile: the wgmma chain, then a TMA store
    (with ``SHARED_C`` through one staging buffer the two warpgroups take in turn, warpgroup 0
    first: ``c_turn[w]`` completes a phase when it is warpgroup ``w``'s turn)."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    offs_g, lens, tiles, tile_end, row_end = _schedule(lens_ptr, G, N, G_POW2, BLOCK_N, 4)
    total = gl.sum(tiles, 0)
    zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
    c_buf = c_smem.index(0 if SHARED_C else WG)
    cur = gl.program_id(0) * 0 - 1  # no group yet (tensors: the loop reassigns them)
    c_desc = _out_desc(c_ptr, cur + 1, cur + 2, N, stride_cm, BLOCK_N, C_LAYOUT)
    it = 0
    for tile in range(gl.program_id(0), total, NUM_SMS):
        row0, valid, pn, g = _tile_of(
            tile, offs_g, lens, tiles, tile_end, row_end, N, BLOCK_N, GROUP_M
        )
        k_steps = gl.cdiv(K, BLOCK_K)
        acc, it = _chain(a_bufs, b_bufs, ready, empty, zero, it, k_steps, WG, STAGES, B_KMAJOR)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=k_steps > 0)
        if not SHARED_C:
            # the previous tile's store has read c_buf (and its descriptor) once this returns
            tma.store_wait(pendings=0)
        c_desc, cur, g_row0 = _group_out(
            c_desc, cur, g, offs_g, lens, row_end, c_ptr, N, stride_cm, BLOCK_N, C_LAYOUT
        )
        if SHARED_C:  # a fresh mbarrier counts as having completed the phase before phase 0
            n = (tile - gl.program_id(0)) // NUM_SMS  # this program's tiles stored so far
            mbarrier.wait(c_turn.index(WG), (n & 1) ^ (1 - WG))
        c_buf.store(acc.to(c_ptr.dtype.element_ty))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [row0 - g_row0 + WG * HALF_M, pn * BLOCK_N], c_buf)
        if SHARED_C:  # the buffer is the other warpgroup's once the store has read it
            tma.store_wait(pendings=0)
            mbarrier.arrive(c_turn.index(1 - WG), count=1)
    tma.store_wait(pendings=0)


@gluon.jit
def _grouped_mm_ws_kernel(
    a_desc,
    b_desc,
    c_ptr,
    lens_ptr,
    G,
    N,
    K,
    stride_cm,
    C_LAYOUT: gl.constexpr,
    G_POW2: gl.constexpr,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
    B_KMAJOR: gl.constexpr,
    SHARED_C: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, HALF_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(
        b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout
    )
    c_bufs: gl.constexpr = 1 if SHARED_C else 2
    c_smem = gl.allocate_shared_memory(a_desc.dtype, [c_bufs, HALF_M, BLOCK_N], C_LAYOUT)
    c_turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(c_turn.index(i), count=1)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    gl.warp_specialize([
            (_consumer, (a_bufs, b_bufs, ready, empty, c_ptr, c_smem, c_turn, lens_ptr, G, N, K,
                         stride_cm, 0, C_LAYOUT, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS,
                         B_KMAJOR, SHARED_C)),
            (_consumer, (a_bufs, b_bufs, ready, empty, c_ptr, c_smem, c_turn, lens_ptr, G, N, K,
                         stride_cm, 1, C_LAYOUT, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS,
                         B_KMAJOR, SHARED_C)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, lens_ptr, G, N, K,
                         G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS, B_KMAJOR)),
        ], [4, 1], [CONSUMER_REGS, 40])  # fmt: skip
