"""Warp-specialized blockwise FP8 GEMM for Hopper (Gluon): ``C = (A * sa) @ (B * sb)ᵀ``.

Blockwise scaling (1x128 activation groups, 128x128 or 1x128 weight groups) multiplies each
128-wide k-group's partial product by its scales in fp32 before it joins the accumulator. In the
Triton kernel of :mod:`.kernel` every k-group's wgmma must complete before its scaled
accumulation, so the tensor cores idle while the CUDA cores scale. This kernel splits a CTA into
one producer warp that only issues TMA loads into a ring of ``STAGES`` shared-memory stages
(``ready`` / ``empty`` mbarriers per stage), and two consumer warpgroups, each owning 64 rows of
the 128-row output tile, in separate partitions: neither waits for the other, so one's scaling
overlaps the other's wgmma. The grid is persistent (one CTA per SM) over grouped-M ordered
tiles; the producer fetches the next tile while the consumers store this one (TMA store).

Operands: K-major FP8 ``A [M, K]``, ``B [N, K]`` with 16-byte aligned rows; fp32 scales
``sa [M, ceil(K/128)]``, ``sb [ceil(N/G), ceil(K/128)]`` with ``G`` = ``SB_GROUP_N`` (128: one
per 128x128 weight block; 1: one per row of ``B``), any strides. The host side (checks,
descriptors, launch, offline compile) is :mod:`.fp8_block_ws_launch`.
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

#: Rows of the output tile each consumer warpgroup owns (the wgmma M of one warpgroup).
ROWS = 64
#: The k-group of blockwise scaling, and the K of one stage.
KGROUP = 128
HALF_M = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(KGROUP)
#: Registers of the producer warp after the partitions' moves (it only issues TMA loads).
PRODUCER_REGS = gl.constexpr(40)


@gluon.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Grouped-M order: GROUP_M row-tiles sweep one column panel before moving on (L2 reuse)."""
    num_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_in_group
    first_m = group_id * GROUP_M
    group_size = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % num_in_group) % group_size
    pid_n = (tile_id % num_in_group) // group_size
    return pid_m, pid_n


@gluon.jit
def _producer(
    a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr, CONSUMERS: gl.constexpr,
    sb_desc=None, sb_bufs=None, SB_SMEM: gl.constexpr = False,
):  # fmt: skip
    """TMA loads of every (tile, k-group) this CTA owns, in the consumers' order (with
    ``SB_SMEM``, each k-group's row of column scales too: :mod:`.fp8_block_ws_cols`)."""
    num_pid_m = gl.cdiv(M, CONSUMERS * HALF_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    SB_BYTES: gl.constexpr = sb_desc.block_type.nbytes if SB_SMEM else 0
    AB_BYTES: gl.constexpr = CONSUMERS * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    nbytes: gl.constexpr = AB_BYTES + SB_BYTES
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * CONSUMERS * HALF_M
        off_n = pid_n * BLOCK_N
        for kt in range((k_tiles + 1) // 2 * 2):  # the consumers' even step count
            s = it % STAGES
            # A stage is free once every consumer warpgroup released it; a fresh mbarrier
            # counts as having completed the phase before phase 0.
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            k = kt * BLOCK_K
            for w in gl.static_range(CONSUMERS):  # each warpgroup's 64 rows
                tma.async_copy_global_to_shared(
                    a_desc, [off_m + w * HALF_M, k], bar, a_bufs.index(CONSUMERS * s + w)
                )
            tma.async_copy_global_to_shared(b_desc, [off_n, k], bar, b_bufs.index(s))
            if SB_SMEM:
                tma.async_copy_global_to_shared(sb_desc, [kt, off_n], bar, sb_bufs.index(s))
            it += 1


@gluon.jit
def _scales(
    sa_rows, m_ok, sb_ptr, off_n, N, kt, k_tiles, stride_sak, stride_sbn, stride_sbk,
    SB_GROUP_N: gl.constexpr, BLOCK_N: gl.constexpr, layout: gl.constexpr,
):  # fmt: skip
    """k-group ``kt``'s A scales (one per row) and B scale(s) (one per tile, or one per column,
    whose addresses are recomputed here rather than held in 64 registers); zeros for the
    padding group past the last one."""
    real = kt < k_tiles
    sa = gl.load(sa_rows + kt * stride_sak, mask=m_ok & real, other=0.0)
    if SB_GROUP_N % BLOCK_N == 0:
        sb = gl.load(
            sb_ptr + (off_n // SB_GROUP_N) * stride_sbn + kt * stride_sbk, mask=real, other=0.0
        )
    else:
        offs_n = gl.minimum(off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout)), N - 1)
        sb = gl.load(
            sb_ptr + kt * stride_sbk + (offs_n // SB_GROUP_N) * stride_sbn, mask=real, other=0.0
        )
    return sa, sb


@gluon.jit
def _issue(
    a_bufs,
    b_bufs,
    ready,
    it,
    zero,
    WG: gl.constexpr,
    STAGES: gl.constexpr,
    CONSUMERS: gl.constexpr = 2,
):
    """Wait for ring step ``it``'s stage and start its wgmma (this warpgroup's 64 rows of the
    ``CONSUMERS`` a stage holds; the grouped kernel's stages hold two)."""
    s = it % STAGES
    mbarrier.wait(ready.index(s), (it // STAGES) & 1)
    return warpgroup_mma(
        a_bufs.index(CONSUMERS * s + WG),
        b_bufs.index(s).permute((1, 0)),
        zero,
        use_acc=False,
        is_async=True,
    )


@gluon.jit
def _retire(
    acc, p, sa, sb, empty, it, PENDING: gl.constexpr, STAGES: gl.constexpr, SB_SCALAR: gl.constexpr
):
    """Wait for ring step ``it``'s wgmma (``PENDING`` younger ones may stay in flight),
    release its stage and add its scaled product to ``acc``."""
    done = warpgroup_mma_wait(num_outstanding=PENDING, deps=(p,))
    mbarrier.arrive(empty.index(it % STAGES), count=1)
    return acc + _scaled(done, sa, sb, SB_SCALAR)


@gluon.jit
def _scaled(p, sa, sb, SB_SCALAR: gl.constexpr):
    """``p * sa[:, None] * sb`` (sb a scalar or a row of column scales)."""
    if SB_SCALAR:
        return p * gl.expand_dims(sa * sb, 1)
    else:
        return p * (gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0))


@gluon.jit
def _tile_rows(tile, M, N, sa_ptr, stride_sam, WG: gl.constexpr, CONSUMERS: gl.constexpr,
               BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr, layout: gl.constexpr):  # fmt: skip
    """This warpgroup's rows of output tile ``tile``: (first row, first column, rows inside
    M, the rows' A scale pointers)."""
    num_pid_m = gl.cdiv(M, CONSUMERS * HALF_M)
    pid_m, pid_n = _tile_coords(tile, num_pid_m, gl.cdiv(N, BLOCK_N), GROUP_M)
    off_m = pid_m * CONSUMERS * HALF_M + WG * HALF_M
    offs_m = off_m + gl.arange(0, HALF_M, layout=gl.SliceLayout(1, layout))
    return off_m, pid_n * BLOCK_N, offs_m < M, sa_ptr + offs_m * stride_sam


@gluon.jit
def _consumer(
    a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K, stride_sam, stride_sak,
    stride_sbn, stride_sbk, WG: gl.constexpr, SB_GROUP_N: gl.constexpr, BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr, MODE: gl.constexpr,
    CONSUMERS: gl.constexpr,
):  # fmt: skip
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile: scaled wgmma chain, then TMA store."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 32]
    )
    SB_SCALAR: gl.constexpr = SB_GROUP_N % BLOCK_N == 0
    tiles = gl.cdiv(M, CONSUMERS * HALF_M) * gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), tiles, NUM_SMS):
        off_m, off_n, m_ok, sa_rows = _tile_rows(
            tile, M, N, sa_ptr, stride_sam, WG, CONSUMERS, BLOCK_N, GROUP_M, layout
        )
        # MODE 1 takes the k-groups in pairs and issues both wgmmas before it waits for the
        # first, so the first's scaling runs under the second's wgmma (MODE 0: one at a time;
        # the other warpgroup's wgmmas still fill the tensor cores). A partial product carried
        # into the next iteration would be copied while in flight, which makes ptxas
        # serialize every wgmma, so each pair starts and ends within its iteration. The
        # producer loads an even number of k-groups: an odd count gets one all-zero group
        # (TMA fills past K with zeros; its scales load as 0).
        k_steps = (k_tiles + 1) // 2 * 2
        acc = zero
        if MODE == 1:
            # The pair's scales are loaded one pair ahead, under the previous pair's wgmmas,
            # so their latency is not paid between a wgmma's end and its scaling (past the
            # last group the loads are masked off and read as zeros).
            sa0, sb0 = _scales(
                sa_rows, m_ok, sb_ptr, off_n, N, 0, k_tiles,
                stride_sak, stride_sbn, stride_sbk, SB_GROUP_N, BLOCK_N, layout,
            )  # fmt: skip
            sa1, sb1 = _scales(
                sa_rows, m_ok, sb_ptr, off_n, N, 1, k_tiles,
                stride_sak, stride_sbn, stride_sbk, SB_GROUP_N, BLOCK_N, layout,
            )  # fmt: skip
            for kt in range(0, k_steps, 2):
                p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES, CONSUMERS)
                p1 = _issue(a_bufs, b_bufs, ready, it + kt + 1, zero, WG, STAGES, CONSUMERS)
                na0, nb0 = _scales(
                    sa_rows, m_ok, sb_ptr, off_n, N, kt + 2, k_tiles,
                    stride_sak, stride_sbn, stride_sbk, SB_GROUP_N, BLOCK_N, layout,
                )  # fmt: skip
                na1, nb1 = _scales(
                    sa_rows, m_ok, sb_ptr, off_n, N, kt + 3, k_tiles,
                    stride_sak, stride_sbn, stride_sbk, SB_GROUP_N, BLOCK_N, layout,
                )  # fmt: skip
                acc = _retire(acc, p0, sa0, sb0, empty, it + kt, 1, STAGES, SB_SCALAR)
                acc = _retire(acc, p1, sa1, sb1, empty, it + kt + 1, 0, STAGES, SB_SCALAR)
                sa0, sb0, sa1, sb1 = na0, nb0, na1, nb1
        else:
            for kt in range(0, k_steps):
                sa0, sb0 = _scales(
                    sa_rows, m_ok, sb_ptr, off_n, N, kt, k_tiles,
                    stride_sak, stride_sbn, stride_sbk, SB_GROUP_N, BLOCK_N, layout,
                )  # fmt: skip
                p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES, CONSUMERS)
                acc = _retire(acc, p0, sa0, sb0, empty, it + kt, 0, STAGES, SB_SCALAR)
        it += k_steps
        _store_tile(acc, c_desc, c_buf, off_m, off_n)
    tma.store_wait(pendings=0)


@gluon.jit
def _start(a, b, zero, I: gl.constexpr, SUB: gl.constexpr):
    """Start the wgmma of part ``I`` (columns ``[I * SUB, I * SUB + SUB)`` of the stage's B)."""
    return warpgroup_mma(
        a, b.slice(I * SUB, SUB).permute((1, 0)), zero, use_acc=False, is_async=True
    )


@gluon.jit
def _finish(acc, p, sa, sb_ptr, PENDING: gl.constexpr):
    """Wait for part ``p`` (``PENDING`` younger ones may stay in flight) and add it to ``acc``
    scaled by ``sa`` (one value per row) and the B scale at ``sb_ptr`` (read here, after the
    wait: a scale product computed early is kept in registers the accumulators need)."""
    p = warpgroup_mma_wait(num_outstanding=PENDING, deps=(p,))
    return acc + p * gl.expand_dims(sa * gl.load(sb_ptr), 1)


@gluon.jit
def _store_tile(acc, c_desc, c_buf, off_m, off_n):
    """Store ``acc`` at ``[off_m, off_n]`` by TMA through ``c_buf``, once the previous store
    from it has read it."""
    tma.store_wait(pendings=0)
    c_buf.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_buf)


@gluon.jit
def _consumer_parts(
    a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K,
    stride_sam, stride_sak, stride_sbn, stride_sbk, WG: gl.constexpr, SB_GROUP_N: gl.constexpr,
    BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr, NUM_SMS: gl.constexpr,
    CONSUMERS: gl.constexpr, MODE: gl.constexpr,
):  # fmt: skip
    """MODE 2 and 3: :func:`_consumer` on tiles four times as wide as a wgmma, each k-group
    taken as four column quarters (MODE 2: two quarters' partial products in flight, one's
    scaling under the next's wgmma; MODE 3: one at a time), each scaled into its quarter's
    accumulator: the registers of MODE 1's two partial products. A stage's B tile is wider, so
    the loads move fewer bytes per product than narrow tiles'. The B scales of the tile's two
    column halves are one value each (``SB_GROUP_N`` a multiple of ``BLOCK_N / 2``)."""
    SUB: gl.constexpr = BLOCK_N // 4
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, SUB, 32]
    )
    tiles = gl.cdiv(M, CONSUMERS * HALF_M) * gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    zero = gl.zeros([HALF_M, SUB], gl.float32, layout)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), tiles, NUM_SMS):
        off_m, off_n, m_ok, sa_rows = _tile_rows(
            tile, M, N, sa_ptr, stride_sam, WG, CONSUMERS, BLOCK_N, GROUP_M, layout
        )
        # The B scale rows of the tile's two column halves (a half past N reads the last one;
        # its columns are not stored).
        last = (N - 1) // SB_GROUP_N
        sb_lo = sb_ptr + (off_n // SB_GROUP_N) * stride_sbn
        sb_hi = sb_ptr + gl.minimum((off_n + 2 * SUB) // SB_GROUP_N, last) * stride_sbn
        k_steps = (k_tiles + 1) // 2 * 2  # the producer's count (a padding group scales by 0)
        acc0 = zero
        acc1 = zero
        acc2 = zero
        acc3 = zero
        for kt in range(0, k_steps):
            sa = gl.load(sa_rows + kt * stride_sak, mask=m_ok & (kt < k_tiles), other=0.0)
            s = (it + kt) % STAGES
            mbarrier.wait(ready.index(s), ((it + kt) // STAGES) & 1)
            a = a_bufs.index(CONSUMERS * s + WG)
            b = b_bufs.index(s)
            k_b = gl.minimum(kt, k_tiles - 1) * stride_sbk  # the padding group: a real scale, sa 0
            lo_k = sb_lo + k_b
            hi_k = sb_hi + k_b
            if MODE == 2:
                p0 = _start(a, b, zero, 0, SUB)
                p1 = _start(a, b, zero, 1, SUB)
                acc0 = _finish(acc0, p0, sa, lo_k, 1)
                p2 = _start(a, b, zero, 2, SUB)
                acc1 = _finish(acc1, p1, sa, lo_k, 1)
                p3 = _start(a, b, zero, 3, SUB)
                acc2 = _finish(acc2, p2, sa, hi_k, 1)
                acc3 = _finish(acc3, p3, sa, hi_k, 0)
            else:
                acc0 = _finish(acc0, _start(a, b, zero, 0, SUB), sa, lo_k, 0)
                acc1 = _finish(acc1, _start(a, b, zero, 1, SUB), sa, lo_k, 0)
                acc2 = _finish(acc2, _start(a, b, zero, 2, SUB), sa, hi_k, 0)
                acc3 = _finish(acc3, _start(a, b, zero, 3, SUB), sa, hi_k, 0)
            mbarrier.arrive(empty.index(s), count=1)  # every part's wgmma has read the stage
        it += k_steps
        _store_tile(acc0, c_desc, c_buf, off_m, off_n)
        _store_tile(acc1, c_desc, c_buf, off_m, off_n + SUB)
        _store_tile(acc2, c_desc, c_buf, off_m, off_n + 2 * SUB)
        _store_tile(acc3, c_desc, c_buf, off_m, off_n + 3 * SUB)
    tma.store_wait(pendings=0)


@gluon.jit
def _ring(STAGES: gl.constexpr, CONSUMERS: gl.constexpr):
    """The ring's ``ready`` (TMA bytes landed) and ``empty`` (one arrival per consumer
    warpgroup) mbarriers, one of each per stage."""
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=CONSUMERS)
    return ready, empty


@gluon.jit
def _fp8_block_ws_kernel(
    a_desc, b_desc, c_desc, sa_ptr, sb_ptr, M, N, K, stride_sam, stride_sak, stride_sbn,
    stride_sbk, SB_GROUP_N: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr,
    STAGES: gl.constexpr, NUM_SMS: gl.constexpr, CONSUMER_REGS: gl.constexpr, MODE: gl.constexpr,
    CONSUMERS: gl.constexpr = 2,
):  # fmt: skip
    rows: gl.constexpr = CONSUMERS * STAGES
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [rows, HALF_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    C_N: gl.constexpr = c_desc.block_type.shape[1]  # MODE 2 stores halves
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [CONSUMERS, HALF_M, C_N], c_desc.layout)
    ready, empty = _ring(STAGES, CONSUMERS)
    # The partitions: consumer warpgroups 0, 1 (and 2), then the producer warp. Gluon takes
    # them as a literal list (a partition cannot be held in a variable), so the two branches
    # repeat their common entries.
    if CONSUMERS == 3:  # 192-row tiles
        gl.warp_specialize([
                (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K,
                              stride_sam, stride_sak, stride_sbn, stride_sbk, 0, SB_GROUP_N,
                              BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE, CONSUMERS)),
                (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K,
                              stride_sam, stride_sak, stride_sbn, stride_sbk, 1, SB_GROUP_N,
                              BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE, CONSUMERS)),
                (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K,
                              stride_sam, stride_sak, stride_sbn, stride_sbk, 2, SB_GROUP_N,
                              BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE, CONSUMERS)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N,
                              GROUP_M, STAGES, NUM_SMS, CONSUMERS)),
            ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, 40])  # fmt: skip
    elif MODE >= 2:  # 2: quarters two in flight, 3: one at a time
        gl.warp_specialize([
                (_consumer_parts, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M,
                                    N, K, stride_sam, stride_sak, stride_sbn, stride_sbk, 0,
                                    SB_GROUP_N, BLOCK_N, GROUP_M, STAGES, NUM_SMS, CONSUMERS,
                                    MODE)),
                (_consumer_parts, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M,
                                    N, K, stride_sam, stride_sak, stride_sbn, stride_sbk, 1,
                                    SB_GROUP_N, BLOCK_N, GROUP_M, STAGES, NUM_SMS, CONSUMERS,
                                    MODE)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N,
                              GROUP_M, STAGES, NUM_SMS, CONSUMERS)),
            ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])  # fmt: skip
    else:
        gl.warp_specialize([
                (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K,
                              stride_sam, stride_sak, stride_sbn, stride_sbk, 0, SB_GROUP_N,
                              BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE, CONSUMERS)),
                (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, c_smem, sa_ptr, sb_ptr, M, N, K,
                              stride_sam, stride_sak, stride_sbn, stride_sbk, 1, SB_GROUP_N,
                              BLOCK_N, GROUP_M, STAGES, NUM_SMS, MODE, CONSUMERS)),
                (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, BLOCK_N,
                              GROUP_M, STAGES, NUM_SMS, CONSUMERS)),
            ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])  # fmt: skip
