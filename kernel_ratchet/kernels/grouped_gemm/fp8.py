"""Grouped GEMM, FP8 blockwise (DeepSeek-V3 recipe): launchers and autograd; kernels in
:mod:`.fp8_kernel`.

Scaling: activations and output gradients in 1x128 groups along the contracted dimension,
weights in 128x128 blocks, all E4M3 with fp32 dequantization scales; accumulation in fp32, each
128-deep partial product scaled by its two scales before it is added ("promotion" per block).

Same layout contract as :mod:`kernel_ratchet.kernels.grouped_gemm.kernel` (x [T, K] sorted by
group, w [G, N, K], ``group_lens`` [G] device int tensor, no host synchronization).

Training step (all quantization in the timed forward/backward; nothing cached across calls,
unless the caller passes the weight quantized once per update, :mod:`.prepared_weight`):

* forward: ``x`` -> dual quantization (rows 1x128 for this GEMM, columns 128x1 written as xᵀ
  for the weight gradient); ``w`` -> 128x128 blocks; grouped FP8 GEMM -> out (bf16);
* backward: ``dout`` -> dual quantization; dgrad = grouped FP8 GEMM of dout rows with the
  quantized weight's transposed copy [G, K, N], written by the forward's weight pass (128x128
  blocks are symmetric, so the same scales serve it; no requantization);
  wgrad per group = dout_gᵀ x_g over the group's tokens, walking 128-token chunks aligned to the
  global 128-row scale blocks (a chunk never straddles two scales).
"""

from __future__ import annotations

import dataclasses

import torch
import triton

from kernel_ratchet.kernels.grouped_gemm import configs as _configs
from kernel_ratchet.kernels.grouped_gemm import dispatch as _dispatch
from kernel_ratchet.kernels.grouped_gemm import fp8_ws_launch as ws_launch
from kernel_ratchet.kernels.grouped_gemm import wgrad_fp8_ws_launch as wgrad_ws
from kernel_ratchet.kernels.grouped_gemm.configs import TileConfig, select
from kernel_ratchet.kernels.grouped_gemm.fp8_kernel import (
    _grouped_mm_fp8_kernel,
    _grouped_wgrad_fp8_kernel,
)
from kernel_ratchet.kernels.grouped_gemm.launch import (
    _check,
    _ensure_tma_allocator,
    grouped_gemm,
    interpreting,
    launch_split_tail,
    num_programs,
    tma_readable,
)
from kernel_ratchet.kernels.grouped_gemm.prepared_weight import PreparedWeight
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.dual_grouped import quant_fp8_dual_1x128_grouped
from kernel_ratchet.kernels.quant.launch import (
    GROUP,
    Fp8Quantized,
    quant_fp8_blockwise_1x128,
)
from kernel_ratchet.kernels.quant.weight import quant_weight_128x128

FP8 = torch.float8_e4m3fn


def grouped_mm_fp8(
    a: Fp8Quantized,
    b: Fp8Quantized,
    group_lens: torch.Tensor,
    *,
    b_is_nk: bool = True,
    out_dtype: torch.dtype = torch.bfloat16,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """Grouped FP8 product. ``a``: data [T, Kr] with 1x128 scales [T, ceil(Kr/128)];
    ``b``: 128x128-block weight, data [G, N, Kr] (``b_is_nk``) or [G, Kr, N], scales by block.
    Returns [T, N] in ``out_dtype``."""
    T, Kr = a.data.shape
    bd, bs = b.data, b.scale
    G = bd.shape[0]
    if b_is_nk:
        N = bd.shape[1]
        sbn, sbk, ssn, ssk = bd.stride(1), bd.stride(2), bs.stride(1), bs.stride(2)
    else:
        N = bd.shape[2]
        sbn, sbk, ssn, ssk = bd.stride(2), bd.stride(1), bs.stride(2), bs.stride(1)
    cfg = config or select("mm", "fp8", T / max(G, 1), interpreting())
    if cfg.BLOCK_K != GROUP:
        raise ValueError(f"FP8 tiles need BLOCK_K == {GROUP}, got {cfg}")
    if cfg.gluon_ws and b_is_nk and ws_launch.supported(a.data, bd, cfg.BLOCK_N):
        return ws_launch.grouped_mm_fp8_ws(
            a.data,
            a.scale,
            bd,
            bs,
            group_lens,
            out_dtype=out_dtype,
            block_n=cfg.BLOCK_N,
            stages=cfg.num_stages,
            group_m=cfg.GROUP_M,
            num_sms=num_programs(bd.device),
            tma_store=cfg.tma_store > 0,
        )
    out = torch.empty((T, N), dtype=out_dtype, device=bd.device)
    if T == 0 or N == 0:
        return out
    nprog = num_programs(bd.device) * cfg.programs_per_sm
    tma = cfg.use_tma and b_is_nk and tma_readable(a.data, bd, True, cfg.BLOCK_K)
    if tma:
        cfg = dataclasses.replace(cfg, split_tail=False)
        if bd.device.type == "cuda":
            _ensure_tma_allocator()
    launch_split_tail(
        _grouped_mm_fp8_kernel,
        (nprog,),
        cfg,
        a.data,
        a.scale,
        bd,
        bs,
        out,
        group_lens,
        N,
        Kr,
        G,
        a.data.stride(0),
        a.data.stride(1),
        a.scale.stride(0),
        a.scale.stride(1),
        bd.stride(0),
        sbn,
        sbk,
        bs.stride(0),
        ssn,
        ssk,
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
        B_N_CONTIG=sbn == 1,
        T=T,
        USE_TMA=tma,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return out


def grouped_wgrad_fp8(
    dyt: Fp8Quantized,
    xt: Fp8Quantized,
    group_lens: torch.Tensor,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    config: TileConfig | None = None,
    group_chunks: bool = False,
) -> torch.Tensor:
    """``dw[g] = dy_gᵀ x_g`` from column-wise quantizations dYᵀ [N, T] and Xᵀ [K, T] (scales
    [N, ceil(T/128)], [K, ceil(T/128)]). Returns [G, N, K] (zeros for empty groups).
    ``group_chunks``: both come from ``quant_fp8_dual_1x128_grouped`` (each group its own
    chunks) instead of ``quant_fp8_dual_1x128(..., pad_t_to=128)``; then, where
    ``configs.WGRAD_FP8_WS`` is set and no ``config`` is given, the warp-specialized kernel
    runs it where it applies (:mod:`.wgrad_fp8_ws_launch`)."""
    N, T = dyt.data.shape
    K = xt.data.shape[0]
    for t in (dyt.data, xt.data) if T else ():  # T == 0: nothing is read, dw is all zeros
        if (
            t.stride(1) != 1
            or t.stride(0) % GROUP
            or t.untyped_storage().nbytes() < t.stride(0) * t.shape[0]
        ):
            raise ValueError(
                "wgrad operands must come from quant_fp8_dual_1x128(..., pad_t_to=128)"
            )
    G = group_lens.shape[0]
    ws = _configs.WGRAD_FP8_WS
    if (
        ws is not None
        and config is None
        and group_chunks
        and wgrad_ws.supported(dyt, xt, G, out_dtype)
    ):
        return wgrad_ws.grouped_wgrad_fp8_ws(
            dyt, xt, group_lens, out_dtype=out_dtype, block_n=ws.BLOCK_N,
            stages=ws.num_stages, group_m=ws.GROUP_M, num_sms=num_programs(dyt.data.device),
        )  # fmt: skip
    cfg = config or select("wgrad", "fp8", T / max(G, 1), interpreting())
    dw = torch.empty((G, N, K), dtype=out_dtype, device=dyt.data.device)
    if dw.numel() == 0:
        return dw
    grid = (G * triton.cdiv(N, cfg.BLOCK_N) * triton.cdiv(K, cfg.BLOCK_K),)
    # T == 0: a zero row stride, which no descriptor takes; nothing is read anyway
    tma = cfg.use_tma and T > 0 and all(t.data_ptr() % 16 == 0 for t in (dyt.data, xt.data))
    if tma and dw.device.type == "cuda":
        _ensure_tma_allocator()
    _grouped_wgrad_fp8_kernel[grid](
        dyt.data,
        dyt.scale,
        xt.data,
        xt.scale,
        dw,
        group_lens,
        N,
        K,
        G,
        dyt.data.stride(0),
        xt.data.stride(0),
        dyt.scale.stride(0),
        dyt.scale.stride(1),
        xt.scale.stride(0),
        xt.scale.stride(1),
        dw.stride(0),
        dw.stride(1),
        dw.stride(2),
        G_POW2=max(triton.next_power_of_2(G), 2),
        BLOCK_N=cfg.BLOCK_N,
        BLOCK_K=cfg.BLOCK_K,
        USE_TMA=tma,
        GROUP_CHUNKS=group_chunks,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return dw


def _dual(t: torch.Tensor, group_lens: torch.Tensor, group_chunks: bool):
    """Rows and columns of ``t`` for the step: columns in the wgrad's chunk layout."""
    if group_chunks:
        return quant_fp8_dual_1x128_grouped(t, group_lens, FP8)
    return quant_fp8_dual_1x128(t, FP8, pad_t_to=GROUP)


class GroupedGemmFp8Function(torch.autograd.Function):
    """Autograd wrapper of the FP8 blockwise grouped GEMM (bf16 in, bf16 out and gradients)."""

    @staticmethod
    def forward(
        ctx,
        x: torch.Tensor,
        w: torch.Tensor,
        group_lens: torch.Tensor,
        prepared: PreparedWeight | None = None,
    ) -> torch.Tensor:
        _check(x, w, group_lens)
        group_lens = group_lens.contiguous()  # the kernels read it by offset
        # dgrad contracts over N: it reads the K-major transposed copy (FP8 wgmma wants both
        # operands K-major), written by the same pass; the forward's copy is not kept.
        if prepared is not None:  # quantized once by the caller for this version of w
            wq = prepared.for_weight(w)
        else:
            wq = quant_weight_128x128(w, transpose=ctx.needs_input_grad[0])
        T, G = x.shape[0], group_lens.shape[0]
        ctx.group_chunks = select("wgrad", "fp8", T / max(G, 1), interpreting()).group_chunks
        if ctx.needs_input_grad[1]:
            xr, xc = _dual(x, group_lens, ctx.group_chunks)
        else:
            xr, xc = quant_fp8_blockwise_1x128(x, FP8), None
        out = grouped_mm_fp8(xr, wq, group_lens, b_is_nk=True, out_dtype=x.dtype)
        ctx.x_dtype, ctx.w_dtype = x.dtype, w.dtype
        ctx.save_for_backward(
            wq.data_t if wq.data_t is not None else wq.data,
            wq.scale_t if wq.scale_t is not None else wq.scale,
            group_lens,
            *((xc.data, xc.scale) if xc is not None else ()),
        )
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        wd, ws, group_lens, *xcs = ctx.saved_tensors
        dr, dc = _dual(dout.contiguous(), group_lens, ctx.group_chunks)
        dx = dw = None
        if ctx.needs_input_grad[0]:  # wd: [G, K, N], the weight transposed (see forward)
            wq = Fp8Quantized(wd, ws)
            dx = grouped_mm_fp8(dr, wq, group_lens, b_is_nk=True, out_dtype=ctx.x_dtype)
        if ctx.needs_input_grad[1]:
            xc = Fp8Quantized(xcs[0], xcs[1])
            dw = grouped_wgrad_fp8(
                dc, xc, group_lens, out_dtype=ctx.w_dtype, group_chunks=ctx.group_chunks
            )
        return dx, dw, None, None


def grouped_gemm_fp8_blockwise(
    x: torch.Tensor,
    w: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    prepared: PreparedWeight | None = None,
    dispatch: bool = True,
) -> torch.Tensor:
    """Differentiable FP8-blockwise grouped GEMM: x [T, K] bf16 sorted by group, w [G, N, K]
    bf16, ``group_lens`` [G] device int tensor (never read on the host) -> [T, N] in x.dtype.
    ``prepared``: ``w`` quantized by :func:`.prepared_weight.prepare_weight` since its last
    change, used instead of quantizing it again (gradient accumulation); the gradient still
    flows to ``w``. ``dispatch``: where the measured table (:mod:`.dispatch`) found our FP8
    step slower than our bf16 step on the nearest measured layer, the bf16 grouped GEMM runs
    instead (more precise; a stale ``prepared`` still raises); False: FP8 always."""
    if dispatch and w.dim() == 3:
        G, N, K = w.shape
        if _dispatch.fp8_path(x.shape[0], G, N, K, prepared is not None) == "bf16":
            if prepared is not None:
                prepared.for_weight(w)  # the same error for a stale weight on either path
            return grouped_gemm(x, w, group_lens)
    return GroupedGemmFp8Function.apply(x, w, group_lens, prepared)
