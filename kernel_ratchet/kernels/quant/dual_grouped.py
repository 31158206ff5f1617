"""Dual FP8 quantization of tokens sorted by group, with each group's column chunks its own.

``quant_fp8_dual_1x128_grouped(x, group_lens)`` quantizes ``x`` [T, C] both ways in one read,
like :func:`kernel_ratchet.kernels.quant.dual.quant_fp8_dual_1x128`, with one difference in
the column-wise copy: its 128-token groups (the scale blocks along the tokens) start at each
group's first token instead of at multiples of 128 of the whole tensor. Group ``g``'s tokens
occupy chunks ``[c_g, c_g + ceil(len_g / 128))`` of ``xᵀ``, ``c_g = sum_{h<g} ceil(len_h /
128)``, its last chunk padded with zeros; so no chunk holds two groups' tokens, a consumer
(the weight gradient) needs no token mask, and no group pays for a neighbour's partial chunk.

* ``rows``: exactly ``quant_fp8_dual_1x128(x)``'s (the row-wise groups run along C).
* ``cols.data`` [C, (ceil(T/128) + G) * 128]: the capacity is known from shapes alone (every
  group adds at most one partial chunk), so nothing is read on the host; chunks past the last
  group's are never written and never meant to be read. ``cols.scale`` [C, ceil(T/128) + G].
* Group ``g``'s block equals ``quant_fp8_dual_1x128(x[start_g:end_g], pad_t_to=128)``'s
  column-wise copy, bit for bit.

One program per (chunk, 128-column tile); the chunk's group is found from ``group_lens`` on
the device. Programs past the last chunk return at once. (Persistent programs that load their
next tile before quantizing this one moved 0.51-0.97x its bytes per second on an H200, torch
2.11, triton 3.6.)
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernel_ratchet.kernels.quant.dual import _quant_tile, _tile_rows
from kernel_ratchet.kernels.quant.launch import (
    AMAX_EPS,
    GROUP,
    Fp8Quantized,
    _cast_args,
    _check,
)

#: As in :mod:`.dual`: a 128 x 128 tile, 8 warps.
NUM_WARPS = 8


def chunk_capacity(tokens: int, groups: int) -> int:
    """Chunks the column-wise copy holds for ``tokens`` rows in ``groups`` groups."""
    return triton.cdiv(tokens, GROUP) + groups


@triton.jit
def _dual_quant_grouped_kernel(
    x_ptr,
    q_ptr,
    qt_ptr,
    s_ptr,
    st_ptr,
    lens_ptr,
    G,
    C,
    stride_r,
    stride_c,
    stride_qt,
    stride_sr,
    stride_sg,
    stride_stc,
    stride_stg,
    fp8_max,
    eps,
    G_POW2: tl.constexpr,
    BLOCK: tl.constexpr,
    MANT: tl.constexpr,
    PRE_ROUND: tl.constexpr,
):
    pid_k = tl.program_id(0)  # chunk of the column-wise copy
    pid_c = tl.program_id(1)
    offs_g = tl.arange(0, G_POW2)
    lens = tl.load(lens_ptr + offs_g, mask=offs_g < G, other=0).to(tl.int32)
    chunks = (lens + BLOCK - 1) // BLOCK
    chunk_end = tl.cumsum(chunks, 0)
    if pid_k >= tl.sum(chunks):
        return
    # the chunk's group: the first whose chunks end past pid_k
    g = tl.sum((chunk_end <= pid_k).to(tl.int32))
    sel = offs_g == g
    row_end = tl.cumsum(lens, 0)
    start = tl.sum(tl.where(sel, row_end - lens, 0))
    end = tl.sum(tl.where(sel, row_end, 0))
    first = tl.sum(tl.where(sel, chunk_end - chunks, 0))
    offs_r = start + (pid_k - first) * BLOCK + _tile_rows(BLOCK, True)
    offs_c = pid_c * BLOCK + tl.arange(0, BLOCK)
    mask_r = offs_r < end
    mask = mask_r[:, None] & (offs_c < C)[None, :]
    x_ptrs = x_ptr + offs_r[:, None].to(tl.int64) * stride_r + offs_c[None, :] * stride_c
    x_in = tl.load(x_ptrs, mask=mask, other=0.0)
    # Columns over this group's chunk only; rows past the group are zeros, stored as such.
    _quant_tile(
        x_in,
        offs_r,
        mask_r,
        pid_c,
        pid_k,
        q_ptr,
        qt_ptr,
        s_ptr,
        st_ptr,
        C,
        stride_qt,
        stride_sr,
        stride_sg,
        stride_stc,
        stride_stg,
        fp8_max,
        eps,
        BLOCK,
        MANT,
        PRE_ROUND,
        False,
        True,  # xᵀ's rows, whole chunks of 128, are whole 32-bit words: stored as words
        stride_qt // 4,
    )


def quant_fp8_dual_1x128_grouped(
    x: torch.Tensor,
    group_lens: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    num_warps: int = NUM_WARPS,
) -> tuple[Fp8Quantized, Fp8Quantized]:
    """Quantize ``x`` [T, C] (rows sorted by group, ``group_lens`` [G] int32/int64 on x's
    device, summing to T; never read on the host) both ways in one pass; the column-wise
    copy in per-group chunks (module docstring). Returns ``(rows, cols)``.
    ``num_warps`` is a tuning knob (same results). One program per (chunk, 128-column) tile
    of the capacity. Raises ValueError for a non-2-D or non-float ``x`` or a ``group_lens``
    that is not 1-D."""
    fp8_max = _check(x, dtype)
    if group_lens.dim() != 1:
        raise ValueError(f"group_lens must be 1-D, got shape {tuple(group_lens.shape)}")
    T, C = x.shape
    G = group_lens.shape[0]
    cap = chunk_capacity(T, G)
    q = torch.empty((T, C), dtype=dtype, device=x.device)
    qt = torch.empty((C, cap * GROUP), dtype=dtype, device=x.device)
    ng_c = triton.cdiv(C, GROUP)
    s = torch.empty((ng_c, T), dtype=torch.float32, device=x.device).t()  # [T, ng_c]
    st = torch.empty((cap, C), dtype=torch.float32, device=x.device).t()  # [C, cap]
    args = (x, q, qt, s, st, group_lens, G, C, *x.stride(), qt.stride(0), *s.stride())
    args += (*st.stride(), fp8_max, AMAX_EPS)
    meta = {"G_POW2": max(triton.next_power_of_2(G), 2), "BLOCK": GROUP, "num_warps": num_warps}
    meta |= _cast_args(dtype)
    if T and C and G:
        _dual_quant_grouped_kernel[(cap, ng_c)](*args, **meta)
    return Fp8Quantized(q, s), Fp8Quantized(qt, st)


__all__ = ["chunk_capacity", "quant_fp8_dual_1x128_grouped"]
