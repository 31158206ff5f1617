"""Grouped GEMM for MoE, bf16/fp16: launchers and the autograd Function.

Layout contract and schedule: :mod:`.kernel`. The launchers never read device data (no host
synchronization): the grid of the forward/dgrad kernel is one program per SM
(:func:`num_programs`), the weight-gradient grid depends on G, N and K only.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import torch
import triton
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources

from kernel_ratchet.kernels.gemm import wgrad_ws_launch as wgrad_ws
from kernel_ratchet.kernels.gemm.launch import _ensure_tma_allocator
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm import mm_ws_launch as mm_ws
from kernel_ratchet.kernels.grouped_gemm.configs import TileConfig, select
from kernel_ratchet.kernels.grouped_gemm.kernel import _grouped_mm_kernel
from kernel_ratchet.kernels.grouped_gemm.wgrad_kernel import _grouped_wgrad_kernel


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
    if w.shape[2] != x.shape[1]:
        raise ValueError(
            f"w must be [G, N, K] with K = x.shape[1] = {x.shape[1]}, got {tuple(w.shape)} (a "
            "weight stored [G, K, N], torch._grouped_mm's layout, is w.transpose(1, 2))"
        )


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
    keep the contract ``sum(group_lens) == T``). The warp-specialized kernel (:mod:`.mm_ws`)
    runs it with ``config`` (else :data:`.configs.MM_WS` or, for the dgrad,
    :data:`.configs.DGRAD_WS`, for groups of more than ``SMALL_GROUP_ROWS`` rows on average)
    where that config has ``gluon_ws`` and the kernel applies; the Triton kernel with
    ``config`` (else the bucket's) elsewhere.
    """
    T, Kr = a.shape
    G = b.shape[0]
    if b_is_nk:
        N, stride_bn, stride_bk = b.shape[1], b.stride(1), b.stride(2)
    else:
        N, stride_bn, stride_bk = b.shape[2], b.stride(2), b.stride(1)
    shipped = configs.MM_WS if b_is_nk else configs.DGRAD_WS
    ws = config or (shipped if T / max(G, 1) > configs.SMALL_GROUP_ROWS else None)
    if ws is not None and ws.gluon_ws and mm_ws.supported(a, b, b_is_nk):
        _ensure_tma_allocator()  # the kernel builds its store descriptors on the device
        return mm_ws.grouped_mm_ws(
            a,
            b,
            group_lens,
            b_is_nk=b_is_nk,
            block_n=ws.BLOCK_N,
            group_m=ws.GROUP_M,
            stages=ws.num_stages,
            num_sms=num_programs(a.device),
        )
    cfg = config or select("mm", "bf16", T / max(G, 1), interpreting())
    if cfg.flatten and cfg.tma_store:
        raise ValueError(
            f"{cfg}: the forward and dgrad take flatten or tma_store, not both (triton 3.6 "
            "cannot fuse the loops around their conditional TMA store): set one of them"
        )
    out = torch.empty((T, N), dtype=a.dtype, device=a.device)
    if T == 0 or N == 0:
        return out
    nprog = num_programs(a.device) * cfg.programs_per_sm
    tma = cfg.use_tma and tma_readable(a, b, b_is_nk, cfg.BLOCK_K)
    if tma:
        cfg = dataclasses.replace(cfg, split_tail=False)
        if a.device.type == "cuda":
            _ensure_tma_allocator()
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
        T=T,
        USE_TMA=tma,
        FLATTEN=cfg.flatten and not cfg.split_tail,
        TMA_STORE=cfg.tma_store if tma and (N * out.element_size()) % 16 == 0 else 0,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return out


def tma_readable(a: torch.Tensor, b: torch.Tensor, b_is_nk: bool, block_k: int) -> bool:
    """Whether :func:`grouped_mm`'s operands can be read through TMA descriptors: A [T, K] and
    the weight stack viewed [G * N, K] (``b_is_nk``) or [G * K, N], each contiguous along its
    last axis with a 16-byte aligned base and row stride; for [G * K, N], K a multiple of
    ``block_k`` (a k step must not read the next group's rows)."""

    def rows(t: torch.Tensor, stride: int) -> bool:
        return t.data_ptr() % 16 == 0 and (stride * t.element_size()) % 16 == 0

    if a.stride(1) != 1 or b.stride(2) != 1 or not rows(a, a.stride(0)):
        return False
    stacked = b.stride(0) == b.shape[1] * b.stride(1)
    if not (stacked and rows(b, b.stride(1))):
        return False
    return b_is_nk or b.shape[1] % block_k == 0


def wgrad_tma_readable(dy: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether :func:`grouped_wgrad` can read dY [T, N] and X [T, K] through per-group TMA
    descriptors: each contiguous along its last axis, 16-byte aligned base and row stride (so
    every group's first row is aligned too)."""
    return all(
        t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0
        for t in (dy, x)
    )


def grouped_wgrad(
    dy: torch.Tensor,
    x: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    out_dtype: torch.dtype | None = None,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """``dw[g] = dy_g^T @ x_g`` for dy [T, N], x [T, K]: returns [G, N, K] (zeros if empty).

    The warp-specialized kernel (:mod:`kernel_ratchet.kernels.gemm.wgrad_ws`) runs it with
    ``config`` (else :data:`.configs.WGRAD_WS`) where that config has ``gluon_ws`` and the
    kernel applies; the Triton kernel with ``config`` (else the bucket's) elsewhere."""
    T, N = dy.shape
    K = x.shape[1]
    G = group_lens.shape[0]
    out_dtype = out_dtype or x.dtype
    ws = config or configs.WGRAD_WS
    if ws is not None and ws.gluon_ws and wgrad_ws.supported(dy, x, G, out_dtype):
        _ensure_tma_allocator()  # the kernel builds its load descriptors on the device
        return wgrad_ws.grouped_wgrad_ws(
            dy,
            x,
            group_lens,
            out_dtype=out_dtype,
            block_k=ws.BLOCK_K,
            group_n=ws.GROUP_M,
            longest_first=ws.longest_first,
            stages=ws.num_stages,
            num_sms=num_programs(x.device),
        )
    cfg = config or select("wgrad", "bf16", T / max(G, 1), interpreting())
    dw = torch.empty((G, N, K), dtype=out_dtype, device=x.device)
    if dw.numel() == 0:
        return dw
    tiles = G * triton.cdiv(N, cfg.BLOCK_N) * triton.cdiv(K, cfg.BLOCK_K)
    nprog = min(tiles, num_programs(x.device) * cfg.programs_per_sm)
    grid = (nprog if cfg.persistent else tiles,)
    tma = cfg.use_tma and wgrad_tma_readable(dy, x)
    if tma and x.device.type == "cuda":
        _ensure_tma_allocator()
    # a TMA store writes whole tiles of dW viewed [G * N, K]: N a tile multiple keeps each in
    # its group's rows
    aligned = N % cfg.BLOCK_N == 0 and (K * dw.element_size()) % 16 == 0
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
        USE_TMA=tma,
        PERSISTENT=cfg.persistent,
        NUM_PROGS=nprog if cfg.persistent else 1,  # a constexpr: no variant per grid size
        FLATTEN=cfg.flatten and cfg.persistent,
        TMA_STORE=cfg.tma_store if tma and aligned else 0,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return dw


class GroupedGemmFunction(torch.autograd.Function):
    """Autograd wrapper: forward ``out_g = x_g @ w_g^T``; backward dgrad + wgrad."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
        _check(x, w, group_lens)
        if x.dtype != w.dtype or not x.is_floating_point() or x.element_size() < 2:
            raise TypeError(
                f"grouped_gemm takes x and w of one dtype (bf16, fp16, fp32), got {x.dtype} and "
                f"{w.dtype}: cast one (w.to(x.dtype)), or use grouped_gemm_fp8_blockwise"
            )
        x, w, group_lens = x.contiguous(), w.contiguous(), group_lens.contiguous()
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

    ``group_lens`` [G] int device tensor with ``sum == T``; never read on the host, so not
    checked: rows past the sum are not written, and a sum past T writes past the output.
    """
    return GroupedGemmFunction.apply(x, w, group_lens)
