"""Grouped GEMM for MoE, bf16/fp16: Triton kernels, launchers and the autograd Function.

Layout contract (tokens sorted by expert):

* ``x``: [T, K], rows of group g are ``x[off_g : off_g + len_g]`` with
  ``off_g = sum(group_lens[:g])``;
* ``w``: [G, N, K] (one nn.Linear weight per expert);
* ``group_lens``: [G] int32/int64 **device** tensor, sum == T; any entry may be 0 and none has
  to be a multiple of a tile.

Forward ``out_g = x_g @ w_g^T`` ([T, N]); backward ``dx_g = dout_g @ w_g`` (same grouped kernel
with the weight read transposed) and ``dw_g = dout_g^T @ x_g`` (0 for an empty group).

No host synchronization: the launchers never read device data. Group offsets and the
(group, tile) schedule are computed inside the kernels from ``group_lens`` (a cumsum over the G
counts held in registers), and the forward/dgrad kernel is persistent: a grid of one program per
SM walks the flattened tile list, so the grid size does not depend on the token counts.
"""

from __future__ import annotations

import os
import warnings

import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources

from kernel_ratchet.kernels.grouped_gemm.configs import TileConfig, select


def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_SM_COUNT: dict[int, int] = {}


def num_programs(device: torch.device) -> int:
    """Persistent grid size: the SM count on a GPU (cached), 4 in the interpreter."""
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


@triton.jit
def _group_of_tile(tile_id, tile_end, tiles, row_end, lens, offs_g, n_tiles, BLOCK_M, GROUP_M):
    """Map a flat tile index to (row0 of the tile, valid rows, n tile, group)."""
    g = tl.sum((tile_end <= tile_id).to(tl.int32))
    sel = offs_g == g
    g_tile0 = tl.sum(tl.where(sel, tile_end - tiles, 0))
    g_row0 = tl.sum(tl.where(sel, row_end - lens, 0))
    g_len = tl.sum(tl.where(sel, lens, 0))
    g_mt = tl.cdiv(g_len, BLOCK_M)
    local = tile_id - g_tile0
    # Swizzle inside the group: GROUP_M row tiles share the weight's column tiles in L2.
    width = GROUP_M * n_tiles
    first_m = (local // width) * GROUP_M
    gsz = tl.minimum(g_mt - first_m, GROUP_M)
    pm = first_m + (local % width) % gsz
    pn = (local % width) // gsz
    row0 = g_row0 + pm * BLOCK_M
    valid = g_len - pm * BLOCK_M
    return row0, valid, pn, g


@triton.jit
def _col_offsets(pn, N, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr, B_N_CONTIG: tl.constexpr):
    """Column indices of a tile (unclamped, for the store mask) and the ones to load with.

    Out-of-range columns are clamped to column 0 when the column axis of B is strided (the
    load stays vectorized along K), but left as they are when it is B's contiguous axis: a
    ``where`` there would hide the contiguity from Triton and turn 16-byte loads into scalar
    ones (measured on the H200: the dgrad ran at ~40 TFLOPS that way); the load is masked then.
    """
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    if EVEN_N or B_N_CONTIG:  # noqa: SIM108 (a constexpr branch, not a value select)
        cols_ld = cols
    else:
        cols_ld = tl.where(cols < N, cols, 0)
    return cols, cols_ld


@triton.jit
def _mm_tile(
    a_ptr,
    b_ptr,
    c_ptr,
    row0,
    valid,
    pn,
    g,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    B_N_CONTIG: tl.constexpr,
):
    """One output tile: rows [row0, row0 + min(valid, BLOCK_M)) x columns of tile pn."""
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    row_ok = rm < valid
    # Clamp instead of masking: rows past the group (or T) re-read row0, and their results
    # are never stored, so the inner loop needs no row mask.
    rows = tl.where(row_ok, rm, 0)
    cols, cols_ld = _col_offsets(pn, N, BLOCK_N, EVEN_N, B_N_CONTIG)
    col_ok = cols < N
    a_ptrs = a_ptr + row0.to(tl.int64) * stride_am + rows[:, None] * stride_am
    a_ptrs += rk[None, :] * stride_ak
    b_ptrs = b_ptr + g.to(tl.int64) * stride_bg + cols_ld[None, :] * stride_bn
    b_ptrs += rk[:, None] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            if B_N_CONTIG and not EVEN_N:
                b = tl.load(b_ptrs, mask=col_ok[None, :], other=0.0)
            else:
                b = tl.load(b_ptrs)
        else:
            k_ok = rk < K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
            if B_N_CONTIG and not EVEN_N:
                b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
            else:
                b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + row0.to(tl.int64) * stride_cm + rm[:, None] * stride_cm
    c_ptrs += cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _grouped_mm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_am,
    stride_ak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    NUM_PROGS: tl.constexpr,
    G_POW2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    B_N_CONTIG: tl.constexpr,
    SPLIT_TAIL: tl.constexpr,
):
    """C[rows of g, n] = sum_k A[rows of g, k] * B[g, n, k] (B element (g, n, k) by strides).

    SPLIT_TAIL: a tile with at most BLOCK_M / 2 valid rows (the last tile of a group whose
    count is not a tile multiple) runs a half-height tile, so ragged groups waste at most
    BLOCK_M / 2 rows of MMA work instead of BLOCK_M - 1.
    """
    pid = tl.program_id(0)
    offs_g = tl.arange(0, G_POW2)
    lens = tl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(tl.int32)
    n_tiles = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(lens, BLOCK_M) * n_tiles
    tile_end = tl.cumsum(tiles, 0)
    row_end = tl.cumsum(lens, 0)
    total = tl.sum(tiles)
    for tile_id in range(pid, total, NUM_PROGS):
        row0, valid, pn, g = _group_of_tile(
            tile_id, tile_end, tiles, row_end, lens, offs_g, n_tiles, BLOCK_M, GROUP_M
        )
        if SPLIT_TAIL:
            if valid <= BLOCK_M // 2:
                _mm_tile(
                    a_ptr,
                    b_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
                    stride_cm,
                    stride_cn,
                    BLOCK_M // 2,
                    BLOCK_N,
                    BLOCK_K,
                    EVEN_K,
                    EVEN_N,
                    B_N_CONTIG,
                )
            else:
                _mm_tile(
                    a_ptr,
                    b_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
                    stride_cm,
                    stride_cn,
                    BLOCK_M,
                    BLOCK_N,
                    BLOCK_K,
                    EVEN_K,
                    EVEN_N,
                    B_N_CONTIG,
                )
        else:
            _mm_tile(
                a_ptr,
                b_ptr,
                c_ptr,
                row0,
                valid,
                pn,
                g,
                N,
                K,
                stride_am,
                stride_ak,
                stride_bg,
                stride_bn,
                stride_bk,
                stride_cm,
                stride_cn,
                BLOCK_M,
                BLOCK_N,
                BLOCK_K,
                EVEN_K,
                EVEN_N,
                B_N_CONTIG,
            )


@triton.jit
def _grouped_wgrad_kernel(
    dy_ptr,
    x_ptr,
    dw_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_dym,
    stride_dyn,
    stride_xm,
    stride_xk,
    stride_wg,
    stride_wn,
    stride_wk,
    G_POW2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """dW[g, n, k] = sum over rows r of group g of dY[r, n] * X[r, k]; 0 for an empty group.

    One program per (g, n tile, k tile); the grid depends on G, N, K only.
    """
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    g = pid // (n_tiles * k_tiles)
    local = pid % (n_tiles * k_tiles)
    pn = local // k_tiles
    pk = local % k_tiles
    offs_g = tl.arange(0, G_POW2)
    lens = tl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(tl.int32)
    row_end = tl.cumsum(lens, 0)
    sel = offs_g == g
    g_row0 = tl.sum(tl.where(sel, row_end - lens, 0))
    g_len = tl.sum(tl.where(sel, lens, 0))
    rm = tl.arange(0, BLOCK_M)
    cols_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cols_k = pk * BLOCK_K + tl.arange(0, BLOCK_K)
    # N and K are the contiguous axes of dY and X: masked, never clamped (see _col_offsets).
    n_ok = cols_n < N
    k_ok = cols_k < K
    dy_ptrs = dy_ptr + g_row0.to(tl.int64) * stride_dym + rm[None, :] * stride_dym
    dy_ptrs += cols_n[:, None] * stride_dyn
    x_ptrs = x_ptr + g_row0.to(tl.int64) * stride_xm + rm[:, None] * stride_xm
    x_ptrs += cols_k[None, :] * stride_xk
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for m in range(0, tl.cdiv(g_len, BLOCK_M)):
        ok = rm < g_len - m * BLOCK_M
        dy = tl.load(dy_ptrs, mask=ok[None, :] & n_ok[:, None], other=0.0)
        x = tl.load(x_ptrs, mask=ok[:, None] & k_ok[None, :], other=0.0)
        acc = tl.dot(dy, x, acc)
        dy_ptrs += BLOCK_M * stride_dym
        x_ptrs += BLOCK_M * stride_xm
    w_ptrs = dw_ptr + g.to(tl.int64) * stride_wg + cols_n[:, None] * stride_wn
    w_ptrs += cols_k[None, :] * stride_wk
    tl.store(w_ptrs, acc.to(dw_ptr.dtype.element_ty), mask=n_ok[:, None] & k_ok[None, :])


def _check(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> None:
    if x.dim() != 2 or w.dim() != 3:
        raise ValueError(
            f"expected x [T, K] and w [G, N, K], got {tuple(x.shape)}, {tuple(w.shape)}"
        )
    if group_lens.dim() != 1 or group_lens.shape[0] != w.shape[0]:
        raise ValueError(f"group_lens must be [G={w.shape[0]}], got {tuple(group_lens.shape)}")
    if group_lens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"group_lens must be int32 or int64, got {group_lens.dtype}")
    if group_lens.device != x.device or w.device != x.device:
        raise ValueError("x, w and group_lens must be on one device")


_NO_SPLIT: set[tuple[str, TileConfig]] = set()


def launch_split_tail(kernel, grid: tuple[int, ...], cfg: TileConfig, *args, **kwargs) -> None:
    """Launch ``kernel`` with ``SPLIT_TAIL=cfg.split_tail``.

    The split-tail variant holds two software pipelines (full and half-height tiles); if it does
    not fit the shared memory or does not compile on this device, the kernel is relaunched
    without it (same results, ragged groups just waste more MMA work), once per config, with a
    warning; the decision is remembered for the process.
    """
    key = (getattr(kernel, "__name__", repr(kernel)), cfg)
    split = cfg.split_tail and key not in _NO_SPLIT
    try:
        kernel[grid](*args, SPLIT_TAIL=split, **kwargs)
    except (OutOfResources, CompilationError) as exc:
        if not split:
            raise
        _NO_SPLIT.add(key)
        warnings.warn(
            f"{key[0]}: split-tail variant unavailable ({type(exc).__name__}); "
            f"running {cfg} without it",
            RuntimeWarning,
            stacklevel=2,
        )
        kernel[grid](*args, SPLIT_TAIL=False, **kwargs)


def grouped_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    b_is_nk: bool = True,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """Grouped product over row groups of ``a`` [T, Kr].

    ``b_is_nk=True``: ``b`` is [G, N, Kr] and ``out_g = a_g @ b_g^T`` (forward).
    ``b_is_nk=False``: ``b`` is [G, Kr, N] and ``out_g = a_g @ b_g`` (dgrad with the weight).
    Returns [T, N] in ``a.dtype``; rows past ``sum(group_lens)`` are left unwritten (callers
    keep the contract ``sum(group_lens) == T``).
    """
    T, Kr = a.shape
    G = b.shape[0]
    if b_is_nk:
        N, stride_bn, stride_bk = b.shape[1], b.stride(1), b.stride(2)
    else:
        N, stride_bn, stride_bk = b.shape[2], b.stride(2), b.stride(1)
    cfg = config or select("mm", "bf16", T / max(G, 1), interpreting())
    out = torch.empty((T, N), dtype=a.dtype, device=a.device)
    if T == 0 or N == 0:
        return out
    nprog = num_programs(a.device)
    launch_split_tail(
        _grouped_mm_kernel,
        (nprog,),
        cfg,
        a,
        b,
        out,
        group_lens,
        N,
        Kr,
        G,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        stride_bn,
        stride_bk,
        out.stride(0),
        out.stride(1),
        NUM_PROGS=nprog,
        G_POW2=max(triton.next_power_of_2(G), 2),
        BLOCK_M=cfg.BLOCK_M,
        BLOCK_N=cfg.BLOCK_N,
        BLOCK_K=cfg.BLOCK_K,
        GROUP_M=cfg.GROUP_M,
        EVEN_K=Kr % cfg.BLOCK_K == 0,
        EVEN_N=N % cfg.BLOCK_N == 0,
        B_N_CONTIG=stride_bn == 1,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return out


def grouped_wgrad(
    dy: torch.Tensor,
    x: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    out_dtype: torch.dtype | None = None,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """``dw[g] = dy_g^T @ x_g`` for dy [T, N], x [T, K]: returns [G, N, K] (zeros if empty)."""
    T, N = dy.shape
    K = x.shape[1]
    G = group_lens.shape[0]
    cfg = config or select("wgrad", "bf16", T / max(G, 1), interpreting())
    dw = torch.empty((G, N, K), dtype=out_dtype or x.dtype, device=x.device)
    if dw.numel() == 0:
        return dw
    grid = (G * triton.cdiv(N, cfg.BLOCK_N) * triton.cdiv(K, cfg.BLOCK_K),)
    _grouped_wgrad_kernel[grid](
        dy,
        x,
        dw,
        group_lens,
        N,
        K,
        G,
        dy.stride(0),
        dy.stride(1),
        x.stride(0),
        x.stride(1),
        dw.stride(0),
        dw.stride(1),
        dw.stride(2),
        G_POW2=max(triton.next_power_of_2(G), 2),
        BLOCK_M=cfg.BLOCK_M,
        BLOCK_N=cfg.BLOCK_N,
        BLOCK_K=cfg.BLOCK_K,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return dw


class GroupedGemmFunction(torch.autograd.Function):
    """Autograd wrapper: forward ``out_g = x_g @ w_g^T``; backward dgrad + wgrad."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
        _check(x, w, group_lens)
        x, w = x.contiguous(), w.contiguous()
        ctx.save_for_backward(x, w, group_lens)
        return grouped_mm(x, w, group_lens, b_is_nk=True)

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        x, w, group_lens = ctx.saved_tensors
        dout = dout.contiguous()
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = grouped_mm(dout, w, group_lens, b_is_nk=False)
        if ctx.needs_input_grad[1]:
            dw = grouped_wgrad(dout, x, group_lens, out_dtype=w.dtype)
        return dx, dw, None


def grouped_gemm(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
    """Differentiable grouped GEMM: x [T, K] sorted by group, w [G, N, K] -> [T, N].

    ``group_lens`` [G] int device tensor with ``sum == T``; never read on the host.
    """
    return GroupedGemmFunction.apply(x, w, group_lens)
