"""Warp-specialized FP8 blockwise weight gradient of the grouped GEMM (Gluon, sm_90).

``dW[g] = dY_gᵀ @ X_g`` from the column-wise copies the step's dual quantization writes with
each group its own 128-token chunks (:mod:`kernel_ratchet.kernels.quant.dual_grouped`):
``dYᵀ [N, C * 128]`` and ``Xᵀ [K, C * 128]`` (FP8, tokens contiguous: both K-major, as
Hopper's FP8 wgmma takes them), group ``g`` owning chunks ``[c_g, c_g + ceil(len_g / 128))``,
zero-padded, with one scale per row and chunk (``[N, C]``, ``[K, C]``, chunk-major).

The structure is the dense blockwise kernel's with column scales in the stages
(:mod:`kernel_ratchet.kernels.gemm.fp8_block_ws_cols`): one producer warp loads, per chunk,
two 64-row halves of dYᵀ, 128 rows of Xᵀ and the chunk's 128 scales of those rows (the output
tile's column scales) by TMA into a ring of stages; two consumer warpgroups take the chunks in
pairs and scale each partial product by its rows' dY scales and its columns' X scales. Since a
group's chunks start on 128-token boundaries, plain descriptors over the whole copies serve
every group: only the chunk offset moves. The grid is persistent over (group, n tile, k tile),
grouped-M ordered inside a group, the chunk offsets derived from ``group_lens`` on the device.
An odd chunk count ends with a padding step (the group's last chunk again, scaled by 0: the
chunks past the last group's are never written, so they may hold NaN); an empty group stores
zeros. The output is ``dW`` viewed ``[G * N, K]`` with N a multiple of 128, so a tile
never reaches into the next group's rows. The host side is :mod:`.wgrad_fp8_ws_launch`.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from kernel_ratchet.kernels.gemm.fp8_block_ws import (
    BLOCK_K,
    HALF_M,
    PRODUCER_REGS,
    _store_tile,
    _tile_coords,
)
from kernel_ratchet.kernels.gemm.fp8_block_ws_cols import _buffers, _pairs
from kernel_ratchet.kernels.gemm.wgrad_ws import _add


@gluon.jit
def _chunks(lens_ptr, G, G_POW2: gl.constexpr, NW: gl.constexpr):
    """Each group's chunk count and the running end of the chunks (vectors over G_POW2)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    offs_g = gl.arange(0, G_POW2, layout=layout)
    lens = gl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(gl.int32)
    n = (lens + BLOCK_K - 1) // BLOCK_K
    return offs_g, n, gl.associative_scan(n, 0, _add)


@gluon.jit
def _tile(tile, offs_g, n, ends, N, K, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """A flat tile index -> (group, first row of N, first column of K, first chunk, chunks)."""
    n_tiles = gl.cdiv(N, 2 * HALF_M)
    k_tiles = gl.cdiv(K, BLOCK_N)
    g = tile // (n_tiles * k_tiles)
    pid_m, pid_n = _tile_coords(tile % (n_tiles * k_tiles), n_tiles, k_tiles, GROUP_M)
    sel = offs_g == g
    first = gl.sum(gl.where(sel, ends - n, 0), 0)
    count = gl.sum(gl.where(sel, n, 0), 0)
    return g, pid_m * 2 * HALF_M, pid_n * BLOCK_N, first, count


@gluon.jit
def _producer(a_desc, b_desc, sb_desc, a_bufs, b_bufs, sb_bufs, ready, empty, lens_ptr, G, N, K,
              G_POW2: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr,
              STAGES: gl.constexpr, NUM_SMS: gl.constexpr):  # fmt: skip
    """TMA loads of every (tile, chunk) this CTA owns, in the consumers' order."""
    offs_g, n, ends = _chunks(lens_ptr, G, G_POW2, 1)
    tiles = G * gl.cdiv(N, 2 * HALF_M) * gl.cdiv(K, BLOCK_N)
    AB_BYTES: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    nbytes: gl.constexpr = AB_BYTES + sb_desc.block_type.nbytes
    it = 0
    for tile in range(gl.program_id(0), tiles, NUM_SMS):
        _g, off_m, off_n, first, count = _tile(tile, offs_g, n, ends, N, K, BLOCK_N, GROUP_M)
        for kt in range((count + 1) // 2 * 2):  # the consumers' even step count
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            c = first + gl.minimum(kt, count - 1)  # the padding step reloads the last chunk
            for w in gl.static_range(2):  # each consumer warpgroup's 64 rows
                tma.async_copy_global_to_shared(
                    a_desc, [off_m + w * HALF_M, c * BLOCK_K], bar, a_bufs.index(2 * s + w)
                )
            tma.async_copy_global_to_shared(b_desc, [off_n, c * BLOCK_K], bar, b_bufs.index(s))
            tma.async_copy_global_to_shared(sb_desc, [c, off_n], bar, sb_bufs.index(s))
            it += 1


@gluon.jit
def _consumer(a_bufs, b_bufs, sb_bufs, ready, empty, c_desc, c_smem, sa_ptr, lens_ptr, G, N, K,
              stride_sam, stride_sak, WG: gl.constexpr, G_POW2: gl.constexpr,
              BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
              NUM_SMS: gl.constexpr):  # fmt: skip
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile over its group's chunks, then the store
    into the group's rows of the output."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 32]
    )
    offs_g, n, ends = _chunks(lens_ptr, G, G_POW2, 4)
    tiles = G * gl.cdiv(N, 2 * HALF_M) * gl.cdiv(K, BLOCK_N)
    zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), tiles, NUM_SMS):
        g, off_m, off_n, first, count = _tile(tile, offs_g, n, ends, N, K, BLOCK_N, GROUP_M)
        rows = off_m + WG * HALF_M + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, layout))
        sa_rows = sa_ptr + rows * stride_sam
        acc = _pairs(a_bufs, b_bufs, sb_bufs, ready, empty, sa_rows, stride_sak, rows < N, first,
                     count, it, zero, WG, STAGES, BLOCK_N, layout)  # fmt: skip
        it += (count + 1) // 2 * 2
        _store_tile(acc, c_desc, c_buf, g * N + off_m + WG * HALF_M, off_n)
    tma.store_wait(pendings=0)


@gluon.jit
def _wgrad_fp8_ws_kernel(
    a_desc, b_desc, sb_desc, c_desc, sa_ptr, lens_ptr, G, N, K, stride_sam, stride_sak,
    G_POW2: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
):  # fmt: skip
    a_bufs, b_bufs, sb_bufs, c_smem, ready, empty = _buffers(
        a_desc, b_desc, c_desc, STAGES, BLOCK_N
    )
    gl.warp_specialize([
            (_consumer, (a_bufs, b_bufs, sb_bufs, ready, empty, c_desc, c_smem, sa_ptr, lens_ptr,
                         G, N, K, stride_sam, stride_sak, 0, G_POW2, BLOCK_N, GROUP_M, STAGES,
                         NUM_SMS)),
            (_consumer, (a_bufs, b_bufs, sb_bufs, ready, empty, c_desc, c_smem, sa_ptr, lens_ptr,
                         G, N, K, stride_sam, stride_sak, 1, G_POW2, BLOCK_N, GROUP_M, STAGES,
                         NUM_SMS)),
            (_producer, (a_desc, b_desc, sb_desc, a_bufs, b_bufs, sb_bufs, ready, empty, lens_ptr,
                         G, N, K, G_POW2, BLOCK_N, GROUP_M, STAGES, NUM_SMS)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])  # fmt: skip
