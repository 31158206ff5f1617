"""Grouped GEMM, FP8 blockwise (DeepSeek-V3 recipe): Triton kernels, launchers, autograd.

Scaling: activations and output gradients in 1x128 groups along the contracted dimension,
weights in 128x128 blocks, all E4M3 with fp32 dequantization scales; accumulation in fp32, each
128-deep partial product scaled by its two scales before it is added ("promotion" per block).

Same layout contract as :mod:`kernel_ratchet.kernels.grouped_gemm.kernel` (x [T, K] sorted by
group, w [G, N, K], ``group_lens`` [G] device int tensor, no host synchronization).

Training step (all quantization in the timed forward/backward; nothing cached across calls):

* forward: ``x`` -> dual quantization (rows 1x128 for this GEMM, columns 128x1 written as xᵀ
  for the weight gradient); ``w`` -> 128x128 blocks; grouped FP8 GEMM -> out (bf16);
* backward: ``dout`` -> dual quantization; dgrad = grouped FP8 GEMM of dout rows with the same
  quantized weight read transposed (128x128 blocks are symmetric, so no requantization);
  wgrad per group = dout_gᵀ x_g over the group's tokens, walking 128-token chunks aligned to the
  global 128-row scale blocks (a chunk never straddles two scales).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernel_ratchet.kernels.grouped_gemm.configs import TileConfig, select
from kernel_ratchet.kernels.grouped_gemm.kernel import (
    _check,
    _col_offsets,
    _group_of_tile,
    interpreting,
    launch_split_tail,
    num_programs,
)
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.kernel import (
    AMAX_EPS,
    FP8_MAX,
    GROUP,
    Fp8Quantized,
    _cast_args,
    _to_fp8,
    quant_fp8_blockwise_1x128,
)

FP8 = torch.float8_e4m3fn


@triton.jit
def _mm_fp8_tile(
    a_ptr,
    sa_ptr,
    b_ptr,
    sb_ptr,
    c_ptr,
    row0,
    valid,
    pn,
    g,
    N,
    K,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_sbg,
    stride_sbn,
    stride_sbk,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    EVEN_N: tl.constexpr,
    B_N_CONTIG: tl.constexpr,
):
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    row_ok = rm < valid
    rows = tl.where(row_ok, rm, 0)
    cols, cols_ld = _col_offsets(pn, N, BLOCK_N, EVEN_N, B_N_CONTIG)
    col_ok = cols < N
    cols_s = tl.where(col_ok, cols, 0)  # scale index (never a contiguous load axis)
    a_ptrs = a_ptr + row0.to(tl.int64) * stride_am + rows[:, None] * stride_am
    a_ptrs += rk[None, :] * stride_ak
    sa_ptrs = sa_ptr + (row0 + rows).to(tl.int64) * stride_sam
    b_ptrs = b_ptr + g.to(tl.int64) * stride_bg + cols_ld[None, :] * stride_bn
    b_ptrs += rk[:, None] * stride_bk
    sb_ptrs = sb_ptr + g.to(tl.int64) * stride_sbg + (cols_s // 128) * stride_sbn
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
        sa = tl.load(sa_ptrs + k * stride_sak)
        sb = tl.load(sb_ptrs + k * stride_sbk)
        acc += tl.dot(a, b) * sa[:, None] * sb[None, :]
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + row0.to(tl.int64) * stride_cm + rm[:, None] * stride_cm
    c_ptrs += cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _grouped_mm_fp8_kernel(
    a_ptr,
    sa_ptr,
    b_ptr,
    sb_ptr,
    c_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_am,
    stride_ak,
    stride_sam,
    stride_sak,
    stride_bg,
    stride_bn,
    stride_bk,
    stride_sbg,
    stride_sbn,
    stride_sbk,
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
    """C[rows of g, n] = sum_kb (A_kb . B_kb) * sa[row, kb] * sb[g, n // 128, kb].

    BLOCK_K == 128: one k step is one scale block of both operands. Tile schedule and
    SPLIT_TAIL as in kernel._grouped_mm_kernel.
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
                _mm_fp8_tile(
                    a_ptr,
                    sa_ptr,
                    b_ptr,
                    sb_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_sam,
                    stride_sak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
                    stride_sbg,
                    stride_sbn,
                    stride_sbk,
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
                _mm_fp8_tile(
                    a_ptr,
                    sa_ptr,
                    b_ptr,
                    sb_ptr,
                    c_ptr,
                    row0,
                    valid,
                    pn,
                    g,
                    N,
                    K,
                    stride_am,
                    stride_ak,
                    stride_sam,
                    stride_sak,
                    stride_bg,
                    stride_bn,
                    stride_bk,
                    stride_sbg,
                    stride_sbn,
                    stride_sbk,
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
            _mm_fp8_tile(
                a_ptr,
                sa_ptr,
                b_ptr,
                sb_ptr,
                c_ptr,
                row0,
                valid,
                pn,
                g,
                N,
                K,
                stride_am,
                stride_ak,
                stride_sam,
                stride_sak,
                stride_bg,
                stride_bn,
                stride_bk,
                stride_sbg,
                stride_sbn,
                stride_sbk,
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
def _grouped_wgrad_fp8_kernel(
    dyt_ptr,
    sdy_ptr,
    xt_ptr,
    sx_ptr,
    dw_ptr,
    lens_ptr,
    N,
    K,
    G,
    stride_dyt,
    stride_xt,
    stride_sdyn,
    stride_sdyb,
    stride_sxk,
    stride_sxb,
    stride_wg,
    stride_wn,
    stride_wk,
    G_POW2: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """dW[g, n, k] = sum over 128-token chunks c of group g of (dYᵀ_c . Xᵀ_cᵀ) * sdy * sx.

    dYᵀ [N, T] and Xᵀ [K, T] are column-wise quantizations whose row strides are padded to a
    multiple of 128 with zeroed padding; their scales sdy[n, t // 128], sx[k, t // 128] cover
    global 128-token blocks, so chunks are aligned to multiples of 128. Chunks are loaded
    whole (no mask: 16-byte loads) and the tokens outside the group are zeroed in dYᵀ only
    (a block may hold two groups' tokens; Xᵀ is finite everywhere, so 0 * x = 0).
    """
    CHUNK: tl.constexpr = 128
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
    start = tl.sum(tl.where(sel, row_end - lens, 0))
    end = tl.sum(tl.where(sel, row_end, 0))
    first = start // CHUNK
    n_chunks = tl.where(end > start, (end - 1) // CHUNK - first + 1, 0)
    cols_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cols_k = pk * BLOCK_K + tl.arange(0, BLOCK_K)
    n_c = tl.where(cols_n < N, cols_n, 0)  # strided axes: clamping keeps the loads vectorized
    k_c = tl.where(cols_k < K, cols_k, 0)
    rt = tl.arange(0, CHUNK)
    dy_base = dyt_ptr + n_c[:, None].to(tl.int64) * stride_dyt + rt[None, :]
    x_base = xt_ptr + k_c[None, :].to(tl.int64) * stride_xt + rt[:, None]
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for c in range(0, n_chunks):
        blk = first + c
        t = blk * CHUNK + rt
        ok = (t >= start) & (t < end)
        dy = tl.load(dy_base + blk * CHUNK)
        dy = tl.where(ok[None, :], dy, tl.zeros_like(dy))
        x = tl.load(x_base + blk * CHUNK)
        sdy = tl.load(sdy_ptr + n_c * stride_sdyn + blk * stride_sdyb)
        sx = tl.load(sx_ptr + k_c * stride_sxk + blk * stride_sxb)
        acc += tl.dot(dy, x) * sdy[:, None] * sx[None, :]
    w_ptrs = dw_ptr + g.to(tl.int64) * stride_wg + cols_n[:, None] * stride_wn
    w_ptrs += cols_k[None, :] * stride_wk
    mask = (cols_n[:, None] < N) & (cols_k[None, :] < K)
    tl.store(w_ptrs, acc.to(dw_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _weight_quant_kernel(
    w_ptr,
    q_ptr,
    s_ptr,
    N,
    K,
    stride_wg,
    stride_wn,
    stride_wk,
    stride_sg,
    stride_sn,
    stride_sk,
    fp8_max,
    eps,
    BLOCK: tl.constexpr,
    MANT: tl.constexpr,
    PRE_ROUND: tl.constexpr,
):
    """One 128x128 block of one group: amax, scale, cast (same formula as kernel.py)."""
    g = tl.program_id(0)
    nb = tl.program_id(1)
    kb = tl.program_id(2)
    offs_n = nb * BLOCK + tl.arange(0, BLOCK)
    offs_k = kb * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    base = g.to(tl.int64) * stride_wg + offs_n[:, None].to(tl.int64) * stride_wn
    x = tl.load(w_ptr + base + offs_k[None, :] * stride_wk, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.max(tl.abs(x), axis=1), axis=0), eps)
    y = tl.clamp(x * (fp8_max / amax), -fp8_max, fp8_max)
    q_off = g.to(tl.int64) * N * K + offs_n[:, None].to(tl.int64) * K + offs_k[None, :]
    tl.store(q_ptr + q_off, _to_fp8(y, q_ptr.dtype.element_ty, MANT, PRE_ROUND), mask=mask)
    tl.store(s_ptr + g * stride_sg + nb * stride_sn + kb * stride_sk, amax / fp8_max)


def quant_weight_128x128(w: torch.Tensor) -> Fp8Quantized:
    """Quantize w [G, N, K] (any strides) in 128x128 blocks per group, one launch, 64-bit
    indexing (a real MoE weight, e.g. DeepSeek-V3 gate_up with 7.5e9 elements, overflows the
    int32 indexing of kernel.quant_fp8_block_128x128, whose recipe this reproduces bit for
    bit). Returns data [G, N, K] E4M3 (contiguous) and scale [G, ceil(N/128), ceil(K/128)]."""
    G, N, K = w.shape
    data = torch.empty((G, N, K), dtype=FP8, device=w.device)
    scale = torch.empty((G, -(-N // GROUP), -(-K // GROUP)), dtype=torch.float32, device=w.device)
    if data.numel():
        _weight_quant_kernel[(G, scale.shape[1], scale.shape[2])](
            w,
            data,
            scale,
            N,
            K,
            w.stride(0),
            w.stride(1),
            w.stride(2),
            scale.stride(0),
            scale.stride(1),
            scale.stride(2),
            FP8_MAX[FP8],
            AMAX_EPS,
            BLOCK=GROUP,
            num_warps=8,
            **_cast_args(FP8),
        )
    return Fp8Quantized(data, scale)


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
    out = torch.empty((T, N), dtype=out_dtype, device=bd.device)
    if T == 0 or N == 0:
        return out
    nprog = num_programs(bd.device)
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
) -> torch.Tensor:
    """``dw[g] = dy_gᵀ x_g`` from column-wise quantizations dYᵀ [N, T] and Xᵀ [K, T] (scales
    [N, ceil(T/128)], [K, ceil(T/128)]). Returns [G, N, K] (zeros for empty groups)."""
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
    cfg = config or select("wgrad", "fp8", T / max(G, 1), interpreting())
    dw = torch.empty((G, N, K), dtype=out_dtype, device=dyt.data.device)
    if dw.numel() == 0:
        return dw
    grid = (G * triton.cdiv(N, cfg.BLOCK_N) * triton.cdiv(K, cfg.BLOCK_K),)
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
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return dw


class GroupedGemmFp8Function(torch.autograd.Function):
    """Autograd wrapper of the FP8 blockwise grouped GEMM (bf16 in, bf16 out and gradients)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
        _check(x, w, group_lens)
        wq = quant_weight_128x128(w)
        if ctx.needs_input_grad[1]:
            xr, xc = quant_fp8_dual_1x128(x, FP8, pad_t_to=GROUP)
        else:
            xr, xc = quant_fp8_blockwise_1x128(x, FP8), None
        out = grouped_mm_fp8(xr, wq, group_lens, b_is_nk=True, out_dtype=x.dtype)
        ctx.x_dtype, ctx.w_dtype = x.dtype, w.dtype
        ctx.save_for_backward(
            wq.data,
            wq.scale,
            group_lens,
            *((xc.data, xc.scale) if xc is not None else ()),
        )
        return out

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        wd, ws, group_lens, *xcs = ctx.saved_tensors
        dr, dc = quant_fp8_dual_1x128(dout.contiguous(), FP8, pad_t_to=GROUP)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            wq = Fp8Quantized(wd, ws)
            dx = grouped_mm_fp8(dr, wq, group_lens, b_is_nk=False, out_dtype=ctx.x_dtype)
        if ctx.needs_input_grad[1]:
            xc = Fp8Quantized(xcs[0], xcs[1])
            dw = grouped_wgrad_fp8(dc, xc, group_lens, out_dtype=ctx.w_dtype)
        return dx, dw, None


def grouped_gemm_fp8_blockwise(
    x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor
) -> torch.Tensor:
    """Differentiable FP8-blockwise grouped GEMM: x [T, K] bf16 sorted by group, w [G, N, K]
    bf16, ``group_lens`` [G] device int tensor (never read on the host) -> [T, N] in x.dtype."""
    return GroupedGemmFp8Function.apply(x, w, group_lens)
