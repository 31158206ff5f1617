"""Warp-specialized blockwise FP8 GEMM for Hopper (Gluon): ``C = (A * sa) @ (B * sb)ᵀ``.

Why a second kernel: blockwise scaling (1x128 activation groups, 128x128 or 1x128 weight
groups) multiplies each 128-wide k-group's partial product by its scales in fp32 before it is
added to the accumulator. In the Triton kernel of :mod:`.kernel` every k-group's wgmma must
therefore complete before its scaled accumulation, so the tensor cores idle while the CUDA
cores scale, and the loads and the math share the same warps. This kernel splits a CTA into

* one producer warp that only issues TMA loads into a ring of ``STAGES`` shared-memory stages
  (``ready`` / ``empty`` mbarriers per stage);
* two consumer warpgroups, each owning 64 rows of the 128-row output tile, that issue the
  wgmma of k-group ``k + 1`` before they wait for the one of k-group ``k`` and scale it
  (two partial accumulators in flight), then release the stage.

The two consumer warpgroups are separate partitions: neither waits for the other, so one's
scaling overlaps the other's wgmma as well. The grid is persistent (one CTA per SM) over
grouped-M ordered tiles, so the producer fetches the next tile while the consumers store
this one (TMA store from shared memory).

Operands must be K-major FP8 (``A [M, K]``, ``B [N, K]``) with 16-byte aligned rows, and the
bf16 output's rows 16-byte aligned (``N % 8 == 0``); :func:`supported` says whether a problem
qualifies, and the launcher (:mod:`.launch`) falls back to the Triton kernel otherwise.
Scales are fp32, ``sa [M, ceil(K/128)]``, ``sb [ceil(N/G), ceil(K/128)]`` with ``G`` =
``SB_GROUP_N`` (128: one scale per 128x128 weight block; 1: one per row of ``B``), any
strides.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

#: Rows of the output tile each consumer warpgroup owns (the wgmma M of one warpgroup).
ROWS = 64
#: The k-group of blockwise scaling, and the K of one stage.
KGROUP = 128
HALF_M = gl.constexpr(ROWS)
BLOCK_K = gl.constexpr(KGROUP)
#: Registers per thread at launch: 12 warps (two consumer warpgroups and the producer's,
#: padded to a warpgroup) x 168 fit the 64 K register file; the partitions then move
#: registers from the producer to the consumers (``CONSUMER_REGS``).
MAXNREG = 168


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
    a_desc,
    b_desc,
    a_bufs,
    b_bufs,
    ready,
    empty,
    M,
    N,
    K,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
):
    """TMA loads of every (tile, k-group) this CTA owns, in the consumers' order."""
    num_pid_m = gl.cdiv(M, 2 * HALF_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    nbytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * 2 * HALF_M
        off_n = pid_n * BLOCK_N
        for kt in range((k_tiles + 1) // 2 * 2):  # the consumers' even step count
            s = it % STAGES
            # A stage is free once both consumer warpgroups released it; a fresh mbarrier
            # counts as having completed the phase before phase 0.
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, nbytes)
            k = kt * BLOCK_K
            tma.async_copy_global_to_shared(a_desc, [off_m, k], bar, a_bufs.index(2 * s))
            tma.async_copy_global_to_shared(
                a_desc, [off_m + HALF_M, k], bar, a_bufs.index(2 * s + 1)
            )
            tma.async_copy_global_to_shared(b_desc, [off_n, k], bar, b_bufs.index(s))
            it += 1


@gluon.jit
def _scales(
    sa_rows,
    m_ok,
    sb_ptr,
    off_n,
    N,
    kt,
    k_tiles,
    stride_sak,
    stride_sbn,
    stride_sbk,
    SB_GROUP_N: gl.constexpr,
    BLOCK_N: gl.constexpr,
    layout: gl.constexpr,
):
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
def _issue(a_bufs, b_bufs, ready, it, zero, WG: gl.constexpr, STAGES: gl.constexpr):
    """Wait for ring step ``it``'s stage and start its wgmma (this warpgroup's 64 rows)."""
    s = it % STAGES
    mbarrier.wait(ready.index(s), (it // STAGES) & 1)
    return warpgroup_mma(
        a_bufs.index(2 * s + WG),
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
def _consumer(
    a_bufs,
    b_bufs,
    ready,
    empty,
    c_desc,
    c_smem,
    sa_ptr,
    sb_ptr,
    M,
    N,
    K,
    stride_sam,
    stride_sak,
    stride_sbn,
    stride_sbk,
    WG: gl.constexpr,
    SB_GROUP_N: gl.constexpr,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
    MODE: gl.constexpr,
):
    """Rows ``[WG * 64, WG * 64 + 64)`` of every tile: scaled wgmma chain, then TMA store."""
    layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 32]
    )
    rows_l: gl.constexpr = gl.SliceLayout(1, layout)
    SB_SCALAR: gl.constexpr = SB_GROUP_N % BLOCK_N == 0
    num_pid_m = gl.cdiv(M, 2 * HALF_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_tiles = gl.cdiv(K, BLOCK_K)
    zero = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout)
    c_buf = c_smem.index(WG)
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * 2 * HALF_M + WG * HALF_M
        off_n = pid_n * BLOCK_N
        offs_m = off_m + gl.arange(0, HALF_M, layout=rows_l)
        m_ok = offs_m < M
        sa_rows = sa_ptr + offs_m * stride_sam
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
            for kt in range(0, k_steps, 2):
                sa0, sb0 = _scales(
                    sa_rows,
                    m_ok,
                    sb_ptr,
                    off_n,
                    N,
                    kt,
                    k_tiles,
                    stride_sak,
                    stride_sbn,
                    stride_sbk,
                    SB_GROUP_N,
                    BLOCK_N,
                    layout,
                )
                sa1, sb1 = _scales(
                    sa_rows,
                    m_ok,
                    sb_ptr,
                    off_n,
                    N,
                    kt + 1,
                    k_tiles,
                    stride_sak,
                    stride_sbn,
                    stride_sbk,
                    SB_GROUP_N,
                    BLOCK_N,
                    layout,
                )
                p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES)
                p1 = _issue(a_bufs, b_bufs, ready, it + kt + 1, zero, WG, STAGES)
                acc = _retire(acc, p0, sa0, sb0, empty, it + kt, 1, STAGES, SB_SCALAR)
                acc = _retire(acc, p1, sa1, sb1, empty, it + kt + 1, 0, STAGES, SB_SCALAR)
        else:
            for kt in range(0, k_steps):
                sa0, sb0 = _scales(
                    sa_rows,
                    m_ok,
                    sb_ptr,
                    off_n,
                    N,
                    kt,
                    k_tiles,
                    stride_sak,
                    stride_sbn,
                    stride_sbk,
                    SB_GROUP_N,
                    BLOCK_N,
                    layout,
                )
                p0 = _issue(a_bufs, b_bufs, ready, it + kt, zero, WG, STAGES)
                acc = _retire(acc, p0, sa0, sb0, empty, it + kt, 0, STAGES, SB_SCALAR)
        it += k_steps
        # The previous tile's store must have read c_buf before it is overwritten.
        tma.store_wait(pendings=0)
        c_buf.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_buf)
    tma.store_wait(pendings=0)


@gluon.jit
def _fp8_block_ws_kernel(
    a_desc,
    b_desc,
    c_desc,
    sa_ptr,
    sb_ptr,
    M,
    N,
    K,
    stride_sam,
    stride_sak,
    stride_sbn,
    stride_sbk,
    SB_GROUP_N: gl.constexpr,
    BLOCK_N: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    NUM_SMS: gl.constexpr,
    CONSUMER_REGS: gl.constexpr,
    MODE: gl.constexpr,
):
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [2 * STAGES, HALF_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BLOCK_N, BLOCK_K], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2, HALF_M, BLOCK_N], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)  # one arrival per consumer warpgroup
    gl.warp_specialize(
        [
            (
                _consumer,
                (
                    a_bufs,
                    b_bufs,
                    ready,
                    empty,
                    c_desc,
                    c_smem,
                    sa_ptr,
                    sb_ptr,
                    M,
                    N,
                    K,
                    stride_sam,
                    stride_sak,
                    stride_sbn,
                    stride_sbk,
                    0,
                    SB_GROUP_N,
                    BLOCK_N,
                    GROUP_M,
                    STAGES,
                    NUM_SMS,
                    MODE,
                ),
            ),
            (
                _consumer,
                (
                    a_bufs,
                    b_bufs,
                    ready,
                    empty,
                    c_desc,
                    c_smem,
                    sa_ptr,
                    sb_ptr,
                    M,
                    N,
                    K,
                    stride_sam,
                    stride_sak,
                    stride_sbn,
                    stride_sbk,
                    1,
                    SB_GROUP_N,
                    BLOCK_N,
                    GROUP_M,
                    STAGES,
                    NUM_SMS,
                    MODE,
                ),
            ),
            (
                _producer,
                (
                    a_desc,
                    b_desc,
                    a_bufs,
                    b_bufs,
                    ready,
                    empty,
                    M,
                    N,
                    K,
                    BLOCK_N,
                    GROUP_M,
                    STAGES,
                    NUM_SMS,
                ),
            ),
        ],
        [4, 1],
        [CONSUMER_REGS, 40],
    )


@functools.cache
def _layouts(block_n: int, a_dtype: torch.dtype, b_dtype: torch.dtype, out_dtype: torch.dtype):
    gl_of = {
        torch.float8_e4m3fn: gl.float8e4nv,
        torch.float8_e5m2: gl.float8e5,
        torch.bfloat16: gl.bfloat16,
        torch.float16: gl.float16,
    }
    return (
        gl.NVMMASharedLayout.get_default_for([ROWS, KGROUP], gl_of[a_dtype]),
        gl.NVMMASharedLayout.get_default_for([block_n, KGROUP], gl_of[b_dtype]),
        gl.NVMMASharedLayout.get_default_for([ROWS, block_n], gl_of[out_dtype]),
    )


def _rows_ok(t: torch.Tensor) -> bool:
    return (
        t.dim() == 2
        and t.stride(1) == 1
        and t.data_ptr() % 16 == 0
        and (t.stride(0) * t.element_size()) % 16 == 0
    )


@functools.lru_cache(maxsize=8)
def _sm90(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device) == (9, 0)


def supported(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> bool:
    """Whether this kernel can run ``a [M, K] @ b [N, K]ᵀ`` here: an sm_90 GPU, FP8 K-major
    operands with 16-byte aligned rows, and output rows of 16 bytes (``N`` a multiple of 8)."""
    if a.device.type != "cuda" or not _sm90(a.device):
        return False
    if out_dtype not in (torch.bfloat16, torch.float16):
        return False
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    return a.dtype in fp8 and b.dtype in fp8 and _rows_ok(a) and _rows_ok(b) and b.shape[0] % 8 == 0


def matmul_fp8_block_ws(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    *,
    b_scale_group_n: int,
    out_dtype: torch.dtype = torch.bfloat16,
    block_n: int = 128,
    stages: int = 4,
    group_m: int = 8,
    consumer_regs: int = 232,
    mode: int = 1,
    num_sms: int | None = None,
) -> torch.Tensor:
    """``a [M, K] @ b [N, K]ᵀ`` with blockwise scales (see the module docstring) -> ``[M, N]``.

    The caller checks :func:`supported` first. ``block_n`` (a multiple of 8, at most 256),
    ``stages`` and ``group_m`` are the launch configuration; shared memory is
    ``stages * (128 + block_n) * 128 + 2 * 64 * block_n * 2`` bytes.
    """
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    la, lb, lc = _layouts(block_n, a.dtype, b.dtype, out_dtype)
    a_desc = TensorDescriptor.from_tensor(a, [ROWS, KGROUP], la)
    b_desc = TensorDescriptor.from_tensor(b, [block_n, KGROUP], lb)
    c_desc = TensorDescriptor.from_tensor(c, [ROWS, block_n], lc)
    sms = num_sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = triton.cdiv(M, 2 * ROWS) * triton.cdiv(N, block_n)
    _fp8_block_ws_kernel[(min(sms, tiles),)](
        a_desc,
        b_desc,
        c_desc,
        a_scale,
        b_scale,
        M,
        N,
        K,
        a_scale.stride(0),
        a_scale.stride(1),
        b_scale.stride(0),
        b_scale.stride(1),
        SB_GROUP_N=b_scale_group_n,
        BLOCK_N=block_n,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=sms,
        CONSUMER_REGS=consumer_regs,
        MODE=mode,
        num_warps=4,
        maxnreg=MAXNREG,
    )
    return c


def compile_offline(
    *,
    block_n: int = 128,
    stages: int = 4,
    group_m: int = 8,
    b_scale_group_n: int = 128,
    mode: int = 1,
    consumer_regs: int = 232,
    arch: int = 90,
):
    """The kernel compiled for ``sm_<arch>`` without a GPU (Triton's front end and the ptxas it
    ships), as :func:`matmul_fp8_block_ws` would launch it on E4M3 operands; read its cost with
    :func:`kernel_ratchet.kernels.offline.resources`."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    la, lb, lc = _layouts(block_n, torch.float8_e4m3fn, torch.float8_e4m3fn, torch.bfloat16)
    fn = _fp8_block_ws_kernel
    consts = dict(
        SB_GROUP_N=b_scale_group_n,
        BLOCK_N=block_n,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=132,
        CONSUMER_REGS=consumer_regs,
        MODE=mode,
    )
    sig = {
        "a_desc": f"tensordesc<fp8e4nv[{ROWS}, {KGROUP}],{la!r}>",
        "b_desc": f"tensordesc<fp8e4nv[{block_n}, {KGROUP}],{lb!r}>",
        "c_desc": f"tensordesc<bf16[{ROWS}, {block_n}],{lc!r}>",
        "sa_ptr": "*fp32",
        "sb_ptr": "*fp32",
    }
    sig.update(dict.fromkeys(("M", "N", "K"), "i32"))
    sig.update(dict.fromkeys(("stride_sam", "stride_sak", "stride_sbn", "stride_sbk"), "i32"))
    sig.update(dict.fromkeys(consts, "constexpr"))
    names = fn.arg_names
    src = GluonASTSource(
        fn,
        sig,
        {(names.index(k),): v for k, v in consts.items()},
        {(names.index(p),): [["tt.divisibility", 16]] for p in ("sa_ptr", "sb_ptr")},
    )
    return triton.compile(
        src, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4, "maxnreg": MAXNREG}
    )
