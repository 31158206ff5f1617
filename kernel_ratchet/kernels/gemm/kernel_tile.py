"""The dense GEMM kernel's per-tile pieces (:mod:`.kernel`): where a tile lies, how its
operands are loaded and how its output is written."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _operand(ptr, rows, cols, row_stride, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
             USE_TMA: tl.constexpr):  # fmt: skip
    """A TMA descriptor of ``[BLOCK_R, BLOCK_C]`` blocks over the row-major ``[rows, cols]``
    tensor at ``ptr`` when ``USE_TMA``, else the pointer itself."""
    if USE_TMA:
        return tl.make_tensor_descriptor(
            ptr, shape=[rows, cols], strides=[row_stride, 1], block_shape=[BLOCK_R, BLOCK_C]
        )
    else:
        return ptr


@triton.jit
def _sources(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
             A_KMAJOR: tl.constexpr, B_KMAJOR: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, USE_TMA: tl.constexpr):  # fmt: skip
    """What :func:`_load_ab` reads A and B through: descriptors over the operands' memory
    layout (non-K-major tiles are transposed by tl.dot's operand layout: .T is free for 16-bit
    wgmma), or the pointers."""
    if A_KMAJOR:
        a_src = _operand(a_ptr, M, K, stride_am, BLOCK_M, BLOCK_K, USE_TMA)
    else:
        a_src = _operand(a_ptr, K, M, stride_ak, BLOCK_K, BLOCK_M, USE_TMA)
    if B_KMAJOR:
        b_src = _operand(b_ptr, N, K, stride_bn, BLOCK_N, BLOCK_K, USE_TMA)
    else:
        b_src = _operand(b_ptr, K, N, stride_bk, BLOCK_K, BLOCK_N, USE_TMA)
    return a_src, b_src


@triton.jit
def _output(c_ptr, M, N, stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            TMA_STORE: tl.constexpr):  # fmt: skip
    """What :func:`_store_tile` writes the output through: a descriptor of tiles (or halves)
    when ``TMA_STORE`` (the launcher's choice: TMA loads, no split-K, 16-byte output rows),
    else the pointer."""
    if TMA_STORE > 0:
        return _operand(c_ptr, M, N, stride_cm, BLOCK_M, BLOCK_N // TMA_STORE, True)
    else:
        return c_ptr


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped-M order: GROUP_M row-tiles sweep one column panel before moving on (L2 reuse)."""
    num_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_in_group
    first_m = group_id * GROUP_M
    group_size = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % num_in_group) % group_size
    pid_n = (tile_id % num_in_group) // group_size
    return pid_m, pid_n


@triton.jit
def _load_ab(
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
    A_KMAJOR: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    BLOCK_K: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    """The A [BLOCK_M, BLOCK_K] and B [BLOCK_K, BLOCK_N] tiles of k-block ``kt`` (zeros past K)."""
    if USE_TMA:
        if A_KMAJOR:  # noqa: SIM108 - constexpr branches, kept as statements for Triton
            a = a_src.load([off_m, kt * BLOCK_K])
        else:
            a = a_src.load([kt * BLOCK_K, off_m]).T
        if B_KMAJOR:  # noqa: SIM108
            b = b_src.load([off_n, kt * BLOCK_K]).T
        else:
            b = b_src.load([kt * BLOCK_K, off_n])
    else:
        ks = kt * BLOCK_K + offs_k
        k_ok = ks < K
        a = tl.load(
            a_src + offs_am[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=k_ok[None, :],
            other=0.0,
        )
        b = tl.load(
            b_src + ks[:, None] * stride_bk + offs_bn[None, :] * stride_bn,
            mask=k_ok[:, None],
            other=0.0,
        )
    return a, b


@triton.jit
def _store_tile(
    acc,
    c_ptr,
    c_dst,
    off_m,
    off_n,
    offs_m,
    offs_n,
    M,
    N,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_K: tl.constexpr,
    TMA_STORE: tl.constexpr,
):
    """Write one fp32 output tile ``acc`` at (``off_m``, ``off_n``): through shared memory with
    TMA stores into the descriptor ``c_dst`` (``TMA_STORE`` 1: the whole tile; 2: two halves of
    ``BLOCK_N``, half the staging memory; the hardware drops rows and columns past M and N), else
    masked pointer stores into ``c_ptr`` (fp32 atomic adds when ``SPLIT_K`` > 1)."""
    out_ty = c_ptr.dtype.element_ty
    if TMA_STORE == 1:
        c_dst.store([off_m, off_n], acc.to(out_ty))
    elif TMA_STORE == 2:
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        c0, c1 = tl.split(halves)
        c_dst.store([off_m, off_n], c0.to(out_ty))
        c_dst.store([off_m, off_n + BLOCK_N // 2], c1.to(out_ty))
    else:
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        if SPLIT_K == 1:
            tl.store(c_ptrs, acc.to(out_ty), mask=c_mask)
        else:
            tl.atomic_add(c_ptrs, acc, mask=c_mask)


@triton.jit
def _finish_split(acc, ws_ptr, count_ptr, mn, c_ptr, offs_m, offs_n, M, N, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr):  # fmt: skip
    """Split-K in one launch: add this K slice's partial tile into output tile ``mn``'s fp32 slot
    of ``ws_ptr`` and count the slice in ``count_ptr[mn]``; the tile's last slice to arrive
    takes the sum out (leaving the slot zero), resets the count and stores the tile in ``c_ptr``'s
    dtype. The slots and counts start zero and are left zero, so a caller keeps them across
    launches of one stream instead of zeroing an fp32 output and casting it per call."""
    slot = (
        ws_ptr
        + mn * (BLOCK_M * BLOCK_N)
        + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N
        + tl.arange(0, BLOCK_N)[None, :]
    )
    tl.atomic_add(slot, acc, sem="relaxed")
    tl.debug_barrier()  # every thread's adds precede the count's release
    if tl.atomic_add(count_ptr + mn, 1, sem="acq_rel") == SPLIT_K - 1:
        total = tl.load(slot, cache_modifier=".cg")  # from L2, where the adds were performed
        # The load and the zeroing store may take different layouts (each thread zeroing
        # outputs another thread reads): every thread's read precedes any zeroing.
        tl.debug_barrier()
        tl.store(slot, tl.zeros_like(acc))
        tl.atomic_xchg(count_ptr + mn, 0, sem="relaxed")
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=c_mask)
