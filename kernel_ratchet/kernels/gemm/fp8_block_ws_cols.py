"""The warp-specialized blockwise FP8 GEMM (:mod:`.fp8_block_ws`) with one B scale per column
(``sb`` in 1x128 groups: the weight gradient ``dYᵀ @ X``, both operands quantized along the
tokens).

A k-group's promotion then scales each column of the partial product by its own value: 32 per
consumer thread for a 128-column tile, 64 for the two k-groups of a pair. Held in registers from
the loop's top they spill, so here the producer loads them: each stage also carries the k-group's
``BLOCK_N`` B scales, one TMA row of ``sbᵀ [ceil(K/128), N]`` (fp32, N contiguous) beside the
operand tiles, on the same ``ready`` barrier. A consumer reads its stage's scales from shared
memory after the wgmma's wait, right before its promotion, and only then releases the stage.
Columns past N and the padding k-group past K read as zeros from the TMA fill (their outputs are
not stored, or their A scale is 0). Paired k-groups (MODE 1) and two consumer warpgroups only.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma_wait,
)

from kernel_ratchet.kernels.gemm.fp8_block_ws import (
    BLOCK_K,
    HALF_M,
    PRODUCER_REGS,
    _issue,
    _producer,
    _ring,
    _store_tile,
    _tile_rows,
)

#: Shared-memory layout of a stage's row of B scales (the TMA box ``[1, BLOCK_N]`` of fp32).
SB_LAYOUT = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=2))


@gluon.jit
def _retire_cols(acc, p, sa, sb_bufs, empty, it, PENDING: gl.constexpr, STAGES: gl.constexpr,
                 BLOCK_N: gl.constexpr, layout: gl.constexpr):  # fmt: skip
    """Wait for ring step ``it``'s wgmma, read its stage's column scales, release the stage and
    add the product scaled by ``sa`` (rows) and those scales (columns) to ``acc``."""
    done = warpgroup_mma_wait(num_outstanding=PENDING, deps=(p,))
    s = it % STAGES
    sb = sb_bufs.index(s).reshape([BLOCK_N]).load(gl.SliceLayout(0, layout))
    mbarrier.arrive(empty.index(s), count=1)
    return acc + (done * gl.expand_dims(sa, 1)) * gl.expand_dims(sb, 0)


@gluon.jit
def _consumer_cols(
    a_bufs, b_bufs, sb_bufs, ready, empty, c_desc, c_smem, sa_ptr, M, N, K, stride_sam,
    stride_sak, WG: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr,
    STAGES: gl.constexpr, NUM_SMS: gl.constexpr,
):  # fmt: skip
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile, k-groups in pairs (both wgmmas issued
    before the first's wait), then the TMA store."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 32]
    )
    tiles = gl.cdiv(M, 2 * HALF_M) * gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), tiles, NUM_SMS):
        off_m, off_n, m_ok, sa_rows = _tile_rows(
            tile, M, N, sa_ptr, stride_sam, WG, 2, BLOCK_N, GROUP_M, layout
        )
        acc = _pairs(a_bufs, b_bufs, sb_bufs, ready, empty, sa_rows, stride_sak, m_ok, 0,
                     k_tiles, it, zero, WG, STAGES, BLOCK_N, layout)  # fmt: skip
        it += (k_tiles + 1) // 2 * 2
        _store_tile(acc, c_desc, c_buf, off_m, off_n)
    tma.store_wait(pendings=0)


@gluon.jit
def _pairs(a_bufs, b_bufs, sb_bufs, ready, empty, sa_rows, stride_sak, m_ok, k0, k_tiles, it,
           zero, WG: gl.constexpr, STAGES: gl.constexpr, BLOCK_N: gl.constexpr,
           layout: gl.constexpr):  # fmt: skip
    """One tile's scaled product over k-groups ``[k0, k0 + k_tiles)`` of the A scales, in
    pairs from ring step ``it`` on; an odd count ends with a padding step the producer loaded
    too, scaled by 0. Returns the accumulator."""
    k_steps = (k_tiles + 1) // 2 * 2  # the producer's count
    acc = zero
    for kt in range(0, k_steps, 2):
        sa0 = gl.load(sa_rows + (k0 + kt) * stride_sak, mask=m_ok, other=0.0)
        real1 = m_ok & (kt + 1 < k_tiles)
        sa1 = gl.load(sa_rows + (k0 + kt + 1) * stride_sak, mask=real1, other=0.0)
        p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES, 2)
        p1 = _issue(a_bufs, b_bufs, ready, it + kt + 1, zero, WG, STAGES, 2)
        acc = _retire_cols(acc, p0, sa0, sb_bufs, empty, it + kt, 1, STAGES, BLOCK_N, layout)
        acc = _retire_cols(acc, p1, sa1, sb_bufs, empty, it + kt + 1, 0, STAGES, BLOCK_N, layout)
    return acc


@gluon.jit
def _buffers(a_desc, b_desc, c_desc, STAGES: gl.constexpr, BLOCK_N: gl.constexpr):
    """The ring (two 64-row A halves, a B tile and a row of column scales per stage), the C
    staging of the two consumers, and the ring's barriers."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, HALF_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    sb_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, 1, BLOCK_N], SB_LAYOUT)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2, HALF_M, BLOCK_N], c_desc.layout)
    ready, empty = _ring(STAGES, 2)
    return a_bufs, b_bufs, sb_bufs, c_smem, ready, empty


@gluon.jit
def _fp8_block_ws_cols_kernel(
    a_desc, b_desc, sb_desc, c_desc, sa_ptr, M, N, K, stride_sam, stride_sak,
    BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
):  # fmt: skip
    a_bufs, b_bufs, sb_bufs, c_smem, ready, empty = _buffers(
        a_desc, b_desc, c_desc, STAGES, BLOCK_N
    )
    gl.warp_specialize([
            (_consumer_cols, (a_bufs, b_bufs, sb_bufs, ready, empty, c_desc, c_smem, sa_ptr, M, N,
                              K, stride_sam, stride_sak, 0, BLOCK_N, GROUP_M, STAGES, NUM_SMS)),
            (_consumer_cols, (a_bufs, b_bufs, sb_bufs, ready, empty, c_desc, c_smem, sa_ptr, M, N,
                              K, stride_sam, stride_sak, 1, BLOCK_N, GROUP_M, STAGES, NUM_SMS)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N, GROUP_M,
                         STAGES, NUM_SMS, 2, sb_desc, sb_bufs, True)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])  # fmt: skip
