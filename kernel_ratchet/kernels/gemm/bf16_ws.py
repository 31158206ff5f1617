"""Warp-specialized persistent 16-bit GEMM for Hopper (Gluon): ``C = A @ B``.

The Triton kernel of :mod:`.kernel` issues its loads and its wgmmas from the same warps, and a
program runs one output tile: on an output of a few hundred 128 x 128 tiles over a short K
(1000 x 5120 x 1000: 320 tiles of 16 k-steps), every tile pays the pipeline's fill and its
epilogue with the tensor cores idle. Here a CTA (one per SM, persistent over grouped-M ordered
tiles) is split into one producer warp that only issues TMA loads into a ring of ``STAGES``
shared-memory stages (``ready`` / ``empty`` mbarriers per stage), and two consumer warpgroups,
each owning 64 rows of the 128-row tile, that chain their wgmmas over the ring (one in flight
while the next is issued) and store their rows by TMA. The producer loads the next tile's first
stages while the consumers finish and store this one.

Operands: ``A [M, K]`` K-major; ``B`` either ``[N, K]`` K-major (``B_KMAJOR``: a Linear's
forward, ``a @ bᵀ``) or ``[K, N]`` N-major (its input gradient, ``dout @ b``); bf16 or fp16,
16-byte aligned rows; TMA reads past an edge as zeros and clips the store, so M, N and K are
free. The host side is :mod:`.bf16_ws_launch`.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from kernel_ratchet.kernels.gemm.fp8_block_ws import _ring, _store_tile, _tile_coords

#: Rows of the output tile each consumer warpgroup owns (the wgmma M of one warpgroup).
ROWS = 64
HALF_M = gl.constexpr(ROWS)
#: Registers of the producer warp after the partitions' moves (it only issues TMA loads).
PRODUCER_REGS = gl.constexpr(40)


@gluon.jit
def _producer(
    a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N: gl.constexpr,
    BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr,
    B_KMAJOR: gl.constexpr,
):  # fmt: skip
    """TMA loads of every (tile, k-step) this CTA owns, in the consumers' order."""
    num_pid_m = gl.cdiv(M, 2 * HALF_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * 2 * HALF_M
        off_n = pid_n * BLOCK_N
        for kt in range(k_tiles):
            k = kt * BLOCK_K
            b_row = off_n if B_KMAJOR else k
            b_col = k if B_KMAJOR else off_n
            _load_step(a_desc, b_desc, a_bufs, b_bufs, ready, empty, it, off_m, k, b_row, b_col,
                       STAGES)  # fmt: skip
            it += 1


@gluon.jit
def _load_step(
    a_desc, b_desc, a_bufs, b_bufs, ready, empty, it, a_row, k, b_row, b_col,
    STAGES: gl.constexpr,
):  # fmt: skip
    """Ring step ``it`` of a producer feeding two consumer warpgroups: once both released its
    stage (a fresh mbarrier counts as having completed the phase before phase 0), the TMA loads
    of the two 64-row A tiles at ``[a_row, k]`` and of the B tile at ``[b_row, b_col]``."""
    s = it % STAGES
    mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
    bar = ready.index(s)
    nbytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    mbarrier.expect(bar, nbytes)
    for w in gl.static_range(2):
        tma.async_copy_global_to_shared(
            a_desc, [a_row + w * HALF_M, k], bar, a_bufs.index(2 * s + w)
        )
    tma.async_copy_global_to_shared(b_desc, [b_row, b_col], bar, b_bufs.index(s))


@gluon.jit
def _chain(
    a_bufs, b_bufs, ready, empty, acc, it, k_steps, WG: gl.constexpr, STAGES: gl.constexpr,
    B_KMAJOR: gl.constexpr,
):  # fmt: skip
    """The ``k_steps`` ring steps of one tile from ``it`` on, chained into ``acc`` by warpgroup
    ``WG``'s wgmmas: one in flight while the next is issued, each stage released once its
    wgmma is done. Returns ``(acc, it)``; the last wgmma may still run, its stage unreleased."""
    for kt in range(k_steps):
        s = it % STAGES
        mbarrier.wait(ready.index(s), (it // STAGES) & 1)
        b = b_bufs.index(s).permute((1, 0)) if B_KMAJOR else b_bufs.index(s)
        acc = warpgroup_mma(a_bufs.index(2 * s + WG), b, acc, is_async=True)
        # the previous step's wgmma is done: its stage goes back to the producer
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kt > 0)
        it += 1
    return acc, it


@gluon.jit
def _consumer(
    a_bufs, b_bufs, ready, empty, c_desc, c_smem, M, N, K, WG: gl.constexpr,
    BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr, B_KMAJOR: gl.constexpr,
):  # fmt: skip
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile: its wgmma chain (:func:`_chain`), then
    a TMA store."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
    )
    num_pid_m = gl.cdiv(M, 2 * HALF_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
        acc, it = _chain(a_bufs, b_bufs, ready, empty, acc, it, k_tiles, WG, STAGES, B_KMAJOR)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
        _store_tile(acc, c_desc, c_buf, pid_m * 2 * HALF_M + WG * HALF_M, pid_n * BLOCK_N)
    tma.store_wait(pendings=0)


@gluon.jit
def _bf16_ws_kernel(
    a_desc, b_desc, c_desc, M, N, K, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
    GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr, B_KMAJOR: gl.constexpr,
):  # fmt: skip
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, HALF_M, BLOCK_K], a_desc.layout)
    b_shape: gl.constexpr = [STAGES, BLOCK_N, BLOCK_K] if B_KMAJOR else [STAGES, BLOCK_K, BLOCK_N]
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, b_shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2, HALF_M, BLOCK_N], c_desc.layout)
    ready, empty = _ring(STAGES, 2)
    gl.warp_specialize([
            (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, M, N, K, 0, BLOCK_N,
                         BLOCK_K, GROUP_M, STAGES, NUM_SMS, B_KMAJOR)),
            (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, M, N, K, 1, BLOCK_N,
                         BLOCK_K, GROUP_M, STAGES, NUM_SMS, B_KMAJOR)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N,
                         BLOCK_K, GROUP_M, STAGES, NUM_SMS, B_KMAJOR)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])  # fmt: skip
