"""Launcher of the dense GEMM kernel (:mod:`.kernel`) and the 16-bit Linear GEMM with autograd.

:func:`matmul` checks the operands, picks the launch configuration (:func:`forced_config`'s, a
caller's, else the shape bucket's from :mod:`.configs`), decides TMA and split-K and launches
:func:`.kernel._gemm_kernel`. :func:`gemm`, :func:`gemm_backward` and :func:`linear_gemm` are a
Linear layer's three GEMMs on bf16/fp16 operands; the FP8 recipes are in :mod:`.fp8`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
import triton

from kernel_ratchet.kernels.gemm import bf16_ws_launch as bf16_ws
from kernel_ratchet.kernels.gemm import configs as _configs
from kernel_ratchet.kernels.gemm import fast_launch, launch_scratch, quick_path, streamk_launch
from kernel_ratchet.kernels.gemm import fp8_block_ws_launch as fp8_block_ws
from kernel_ratchet.kernels.gemm import wgrad_ws_launch as wgrad_ws
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK, SCALE_NONE, SCALE_ROW, _gemm_kernel
from kernel_ratchet.kernels.gemm.launch_plan import PAD_MIN_REUSE, _plan
from kernel_ratchet.kernels.gemm.operands import operand_sizes, row_major, rows
from kernel_ratchet.kernels.quant.launch import cdiv, empty_rows, interpreter_mode

_FORCED: list[GemmConfig] = []


@contextlib.contextmanager
def forced_config(config: GemmConfig) -> Iterator[None]:
    """Use ``config`` for every GEMM launched inside the block (tests, sweeps)."""
    _FORCED.append(config)
    try:
        yield
    finally:
        _FORCED.pop()


@functools.lru_cache(maxsize=8)
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def _ensure_tma_allocator() -> None:
    """Device-side descriptors need a global scratch allocator.

    Triton keeps it in a ContextVar, i.e. per thread: the autograd engine runs backward on its
    own device thread, so the allocator is set before every TMA launch (a ContextVar set).
    """
    triton.set_allocator(launch_scratch.allocate)


def _on_sm90(t: torch.Tensor) -> bool:
    """Whether ``t`` is on an sm_90 GPU (H100/H200), the warp-specialized kernel's target."""
    return t.device.type == "cuda" and torch.cuda.get_device_capability(t.device) == (9, 0)


def _tma_ok(t: torch.Tensor, strides: tuple[int, ...] | None = None) -> bool:
    """TMA needs a 16-byte aligned base and 16-byte aligned leading stride (``strides``:
    ``t.stride()`` when the caller has it)."""
    st = strides or t.stride()
    return t.data_ptr() % 16 == 0 and (st[0] * t.element_size()) % 16 == 0 and st[1] == 1


def _aligned_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with 16-byte aligned rows (TMA-readable)."""
    out = empty_rows(t.shape[0], t.shape[1], t.dtype, t.device, max(1, 16 // t.element_size()))
    return out.copy_(t)


def _tma_ready(t: torch.Tensor, reuse: int) -> torch.Tensor:
    """``t`` itself, or :func:`_aligned_copy` of it when TMA cannot read ``t`` and ``reuse``
    (outputs per element) is at least :data:`PAD_MIN_REUSE`."""
    return t if _tma_ok(t) or reuse < PAD_MIN_REUSE else _aligned_copy(t)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    a_kmajor: bool = True,
    b_kmajor: bool = True,
    out_dtype: torch.dtype | None = None,
    scale_mode: int = SCALE_NONE,
    a_scale: torch.Tensor | None = None,
    b_scale: torch.Tensor | None = None,
    b_scale_group_n: int = 128,
    kind: str = "bf16",
    config: GemmConfig | None = None,
) -> torch.Tensor:
    """``C = A @ Bᵀ`` in the kernel's terms (see the module docstring for the layouts).

    ``a`` is ``[M, K]`` when ``a_kmajor`` else ``[K, M]``; ``b`` is ``[N, K]`` when ``b_kmajor``
    else ``[K, N]``; both are made row-major if they are not. Scales (fp32) by ``scale_mode``:
    tensor: 0-d/1-element each; row: ``a_scale [M]``, ``b_scale [N]``; block: ``a_scale
    [M, ceil(K/128)]`` and ``b_scale [ceil(N/b_scale_group_n), ceil(K/128)]`` (any strides).
    Returns a new ``[M, N]`` tensor of ``out_dtype`` (default: ``a``'s dtype for 16-bit, bf16
    for FP8). The config is :func:`forced_config`'s, else ``config``, else the bucket's.
    """
    quick = scale_mode == SCALE_NONE and config is None and not _FORCED
    if quick:
        qkey = quick_path.key(a, b, a_kmajor, b_kmajor, out_dtype, kind)
        hit = quick_path.get(qkey)
        if hit is not None:
            return hit(a, b)
    given = (a, b)
    a, b, M, N, K = operand_sizes(a, b, a_kmajor, b_kmajor, kind)
    a_st, b_st, a_es = a.stride(), b.stride(), a.element_size()
    if out_dtype is None:
        out_dtype = a.dtype if a_es > 1 else torch.bfloat16
    num_sms = _num_sms(a.device)
    explicit = _FORCED[-1] if _FORCED else config
    geom = (a_st[0], _tma_ok(a, a_st), a_kmajor, b_st[0], _tma_ok(b, b_st), b_kmajor)
    fp8 = a_es == 1 and b.element_size() == 1
    ws_group = b_scale_group_n if scale_mode == SCALE_BLOCK and fp8 and _on_sm90(a) else 0
    if ws_group == 1 and not fp8_block_ws.col_scales_ok(b_scale):  # type: ignore[arg-type]
        ws_group = 0  # column scales the kernel cannot load by TMA: the Triton kernel
    interp = interpreter_mode()
    ws16 = not fp8 and scale_mode == SCALE_NONE and bf16_ws.supported_dtypes(a, b, out_dtype)
    plan = _plan(
        kind, explicit, M, N, K, geom, scale_mode, num_sms, interp, ws_group, out_dtype, ws16
    )
    if M == 0 or N == 0:
        return torch.empty((M, N), dtype=out_dtype, device=a.device)
    if K == 0:
        return torch.zeros((M, N), dtype=out_dtype, device=a.device)
    if plan.ws is not None:
        ws = plan.ws
        return fp8_block_ws.matmul_fp8_block_ws(
            a,
            b,
            a_scale,  # type: ignore[arg-type]
            b_scale,  # type: ignore[arg-type]
            b_scale_group_n=b_scale_group_n,
            out_dtype=out_dtype,
            block_n=ws.block_n,
            stages=ws.num_stages,
            group_m=ws.group_m,
            mode=_configs.ws_mode(ws),
            num_sms=num_sms,
            consumers=ws.block_m // fp8_block_ws.ROWS,
        )
    if plan.ws16 is not None:
        plain = quick and given[0] is a and given[1] is b  # no copies: a quick path's call
        return bf16_ws.run(a, b, b_kmajor, plan.ws16, num_sms, plan.runners, plain and qkey)
    if plan.copy_a:
        a = _aligned_copy(a)
        a_st = a.stride()
    if plan.copy_b:
        b = _aligned_copy(b)
        b_st = b.stride()
    if plan.use_tma:
        _ensure_tma_allocator()
    if plan.stream_k:
        am_ak, bn_bk = (a_st if a_kmajor else a_st[::-1]), (b_st if b_kmajor else b_st[::-1])
        c = torch.empty((M, N), dtype=out_dtype, device=a.device)
        args = (a, b, c, (M, N, K, *am_ak, *bn_bk))
        streamk_launch.run(plan.kwargs, plan.grid, args, plan.runners, interp)
        return c
    if plan.split_k == 1 or plan.slots:
        c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    else:
        c = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    sa = a_scale if a_scale is not None else c
    sb = b_scale if b_scale is not None else c
    if plan.slots:  # the split's tiles finish themselves: no scales, their slots and counts
        sa, sb = launch_scratch.split_slots(a.device, *plan.slots)
    am, ak = a_st if a_kmajor else a_st[::-1]
    bn, bk = b_st if b_kmajor else b_st[::-1]
    args = (a, b, c, sa, sb, M, N, K, am, ak, bn, bk, N, 1)  # c: a new row-major [M, N]
    args += (*_scale_strides(sa, scale_mode), *_scale_strides(sb, scale_mode))
    kwargs = {"SB_GROUP_N": b_scale_group_n, **plan.kwargs}
    if scale_mode == SCALE_NONE and not interp:
        fast_launch.launch(_gemm_kernel, plan.runners, plan.grid, args, kwargs, 5)
        plain = given[0] is a and given[1] is b  # no copies
        if quick and plain and a.dtype is b.dtype and a_es == 2:
            runner = plan.runners.get(fast_launch.signature(args[:5]))
            quick_path.remember(qkey, M, N, out_dtype, plan.grid[0], runner, slots=plan.slots)
    else:
        _gemm_kernel[plan.grid](*args, **kwargs)
    return c if plan.split_k == 1 or plan.slots else c.to(out_dtype)


def _scale_strides(s: torch.Tensor, scale_mode: int) -> tuple[int, int]:
    if scale_mode == SCALE_BLOCK:
        return s.stride(0), s.stride(1)
    if scale_mode == SCALE_ROW:
        return s.stride(0), 0
    return 0, 0


# --------------------------------------------------------------------------------------------
# 16-bit Linear GEMM with autograd
# --------------------------------------------------------------------------------------------


def gemm(a: torch.Tensor, b: torch.Tensor, config: GemmConfig | None = None) -> torch.Tensor:
    """Linear-layer forward ``a @ bᵀ``: ``a [M, K]``, ``b [N, K]`` (bf16/fp16) -> ``[M, N]``."""
    return matmul(a, b, kind="bf16", config=config)


def gemm_backward(
    dout: torch.Tensor, a: torch.Tensor, b: torch.Tensor, need: tuple[bool, bool] = (True, True)
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Gradients of ``a @ bᵀ``: ``da = dout @ b [M, K]`` and ``db = doutᵀ @ a [N, K]``, each
    where ``need`` asks for it (None else: a frozen weight's gradient is not computed)."""
    if not interpreter_mode():  # one aligned copy of dout (if any) serves both GEMMs
        dout = _tma_ready(row_major(dout), a.shape[1])
    da = matmul(dout, b, b_kmajor=False, kind="bf16_bwd") if need[0] else None
    db = few_rows_wgrad(dout, a) if need[1] else None
    if db is None and need[1]:
        db = matmul(dout, a, a_kmajor=False, b_kmajor=False, kind="bf16_bwd")
    return da, db


def few_rows_wgrad(
    dout: torch.Tensor, a: torch.Tensor, config: _configs.FewRowsWgrad | None = None
) -> torch.Tensor | None:
    """``doutᵀ @ a`` [N, K] on the warp-specialized weight gradient with one group where
    ``config`` (else :data:`.configs.FEW_ROWS_WGRAD`) takes it: at most ``max_rows`` rows, at
    least ``min_tiles`` output tiles, operands the kernel takes on an sm_90 GPU; else None."""
    cfg = config or _configs.FEW_ROWS_WGRAD
    if cfg is None or interpreter_mode():
        return None
    (M, N), K = dout.shape, a.shape[1]
    if cfg.max_rows < M or (N // 128) * cdiv(K, cfg.block_k) < cfg.min_tiles:
        return None
    if not wgrad_ws.supported(dout, a, 1, a.dtype):
        return None
    _ensure_tma_allocator()  # the kernel builds its load descriptors on the device
    dw = wgrad_ws.grouped_wgrad_ws(
        dout,
        a,
        _one_group(M, dout.device),
        block_k=cfg.block_k,
        group_n=cfg.group_n,
        stages=cfg.stages,
        num_sms=_num_sms(dout.device),
        runners=_FEW_ROWS_RUNNERS,
    )
    return dw[0]


#: The few-row weight gradient's direct launches, one per geometry (:mod:`.descriptor_launch`).
_FEW_ROWS_RUNNERS: dict = {}


def _one_group(rows: int, device: torch.device) -> torch.Tensor:
    """The ``group_lens`` of one group of ``rows`` rows, made once per size and device; under
    CUDA graph capture, made for the graph (memory of its pool must not outlive it here)."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.full((1,), rows, dtype=torch.int32, device=device)
    return _one_group_kept(rows, device)


@functools.lru_cache(maxsize=64)
def _one_group_kept(rows: int, device: torch.device) -> torch.Tensor:
    return torch.full((1,), rows, dtype=torch.int32, device=device)


class GemmFunction(torch.autograd.Function):
    """``out = a @ bᵀ`` with the Triton kernel in forward and both backward GEMMs."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(a, b)
        return gemm(a, b)

    @staticmethod
    def backward(ctx, dout: torch.Tensor):  # type: ignore[override]
        a, b = ctx.saved_tensors
        return gemm_backward(dout.contiguous(), a, b, tuple(ctx.needs_input_grad[:2]))


def linear_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Autograd entry point: ``a @ bᵀ`` (a Linear layer without bias); ``a`` may have
    leading dimensions (``[B, S, K]`` -> ``[B, S, N]``)."""
    a2, lead = rows(a)
    grad = torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)
    out = GemmFunction.apply(a2, b) if grad else gemm(a2, b)  # no graph: no Function's cost
    return out if a.dim() == 2 else out.reshape(*lead, out.shape[-1])
