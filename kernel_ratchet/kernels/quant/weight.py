"""128x128-block FP8 quantization of a grouped weight [G, N, K], both layouts in one read.

The FP8 grouped step quantizes the expert weights once per step: the forward reads them N-major
(``data`` [G, N, K]) and the dgrad K-major (``data_t`` [G, K, N], Hopper's FP8 wgmma takes
K-major operands only), one scale per 128x128 block serving both. Bytes moved per element: 2
read (bf16) + 1 or 2 written. One program per block (:func:`_weight_quant_kernel`): on an H200
(torch 2.11, triton 3.6) 0.81-0.84 of a bf16 copy's bytes per second; persistent programs that
load their next block before quantizing this one moved 0.97-1.03x of that.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernel_ratchet.kernels.quant.kernel import _to_fp8
from kernel_ratchet.kernels.quant.launch import (
    AMAX_EPS,
    FP8_MAX,
    GROUP,
    Fp8Quantized,
    _cast_args,
)

FP8 = torch.float8_e4m3fn


@triton.jit
def _weight_quant_kernel(
    w_ptr,
    q_ptr,
    qt_ptr,
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
    WRITE_T: tl.constexpr,
):
    """One 128x128 block of one group: amax, scale, cast (same formula as kernel.py).
    ``WRITE_T``: also write the block transposed into ``qt`` [G, K, N] (same scale)."""
    g = tl.program_id(0)
    nb = tl.program_id(1)
    kb = tl.program_id(2)
    offs_n = nb * BLOCK + tl.arange(0, BLOCK)
    offs_k = kb * BLOCK + tl.arange(0, BLOCK)
    mask = (offs_n[:, None] < N) & (offs_k[None, :] < K)
    base = g.to(tl.int64) * stride_wg + offs_n[:, None].to(tl.int64) * stride_wn
    x = tl.load(w_ptr + base + offs_k[None, :] * stride_wk, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.max(tl.abs(x), axis=1), axis=0), eps)
    y = x * (fp8_max / amax)  # no clamp needed: see quant/dual.py's _quant_tile
    q_off = g.to(tl.int64) * N * K + offs_n[:, None].to(tl.int64) * K + offs_k[None, :]
    q = _to_fp8(y, q_ptr.dtype.element_ty, MANT, PRE_ROUND)
    tl.store(q_ptr + q_off, q, mask=mask)
    if WRITE_T:
        qt_off = g.to(tl.int64) * N * K + offs_k[:, None].to(tl.int64) * N + offs_n[None, :]
        tl.store(qt_ptr + qt_off, tl.trans(q), mask=tl.trans(mask))
    tl.store(s_ptr + g * stride_sg + nb * stride_sn + kb * stride_sk, amax / fp8_max)


def quant_weight_128x128(
    w: torch.Tensor, *, transpose: bool = False, num_warps: int = 8
) -> Fp8Quantized:
    """Quantize w [G, N, K] (any strides) in 128x128 blocks per group, one launch, 64-bit
    indexing (a real MoE weight, e.g. DeepSeek-V3 gate_up with 7.5e9 elements, overflows the
    int32 indexing of kernel.quant_fp8_block_128x128, whose recipe this reproduces bit for
    bit). Returns data [G, N, K] E4M3 (contiguous) and scale [G, ceil(N/128), ceil(K/128)];
    ``transpose`` also returns ``data_t`` [G, K, N] (contiguous, the same values transposed)
    and ``scale_t`` (a transposed view of ``scale``: 128x128 blocks are symmetric).
    ``num_warps`` is a tuning knob (same results)."""
    G, N, K = w.shape
    data = torch.empty((G, N, K), dtype=FP8, device=w.device)
    data_t = torch.empty((G, K, N), dtype=FP8, device=w.device) if transpose else data
    scale = torch.empty((G, -(-N // GROUP), -(-K // GROUP)), dtype=torch.float32, device=w.device)
    rest = (*w.stride(), *scale.stride(), FP8_MAX[FP8], AMAX_EPS)  # strides, then the scaling
    meta = {"BLOCK": GROUP, "WRITE_T": transpose, "num_warps": num_warps, **_cast_args(FP8)}
    if data.numel():
        grid = (G, scale.shape[1], scale.shape[2])
        _weight_quant_kernel[grid](w, data, data_t, scale, N, K, *rest, **meta)
    if transpose:
        return Fp8Quantized(data, scale, data_t, scale.transpose(1, 2))
    return Fp8Quantized(data, scale)
