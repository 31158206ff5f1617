"""FP8 quantization entry points (kernels in :mod:`.kernel`), used by the FP8 GEMMs.

Conventions shared by every function here:

* ``q`` holds FP8 values (``torch.float8_e4m3fn`` by default, ``torch.float8_e5m2`` on request);
  ``scale`` is a **dequantization** scale in fp32: ``x ≈ q.float() * scale`` with
  ``scale = max(amax, AMAX_EPS) / fp8_max`` over the scaling group. Values are clamped to
  ``[-fp8_max, fp8_max]`` before the cast (round to nearest even), so nothing saturates to NaN.
* Inputs are 2-D ``[R, C]`` tensors of bf16/fp16/fp32 (any strides); outputs are contiguous,
  or with ``align`` > 1 row-major with the row stride rounded up to a multiple of ``align``
  elements (a view of a padded buffer; the padding is never written nor read). A GEMM that
  reads the FP8 data wants 16-byte aligned rows: TMA needs them, and pointer loads are only
  vectorized when Triton can prove the stride divisible by 16.
* ``transpose=True`` quantizes ``xᵀ`` instead of ``x``: groups are taken along the rows of ``xᵀ``
  (the columns of ``x``) and the data is written as a contiguous ``[C, R]`` tensor. This is what
  a GEMM backward needs, since the FP8 tensor cores want both operands K-major.
* Work on CPU tensors too when ``TRITON_INTERPRET=1`` (tests); nothing touches CUDA at import.

Granularities (the DeepSeek-V3 recipe uses the last two):

=============================  ============================  =================================
function                       group                         scale shape / storage
=============================  ============================  =================================
quant_fp8_tensorwise           whole tensor                  ``[]`` (0-d)
quant_fp8_rowwise              one row (1 x C)               ``[R]``
quant_fp8_blockwise_1x128      1 x 128 along the row         ``[R, ceil(C/128)]``, R-major
quant_fp8_block_128x128        128 x 128 block               ``[ceil(R/128), ceil(C/128)]``
=============================  ============================  =================================

"R-major" means the scale tensor has strides ``(1, R)`` (column-major storage): a GEMM tile that
needs the scales of BLOCK_M consecutive rows for one k-group reads them contiguously.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch

from kernel_ratchet.kernels.quant.kernel import (
    _amax_kernel,
    _apply_scale_kernel,
    _group_quant_kernel,
)

#: Floor on a group's absolute maximum, so an all-zero group gets a finite scale (q = 0).
AMAX_EPS = 1e-12
#: Scaling group edge of the blockwise recipes (DeepSeek-V3: 1x128 activations, 128x128 weights).
GROUP = 128

FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
_MANTISSA_BITS = {torch.float8_e4m3fn: 3, torch.float8_e5m2: 2}


def cdiv(x: int, y: int) -> int:
    """Ceiling division on the host (``triton.cdiv`` is a jitted helper, ~4 us a call, and a
    quantization computes several per launch)."""
    return -(-x // y)


def interpreter_mode() -> bool:
    """True when Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# Tile of the elementwise passes: 64 x 128 elements (16 KB of bf16 in, 8 KB of fp8 out) keeps
# 8 KB in flight per program, enough to stream at HBM rate with 4 warps. Not swept yet.
_TILE_R = 64
_TILE_C = 128


def empty_rows(
    rows: int, cols: int, dtype: torch.dtype, device: torch.device, align: int = 1
) -> torch.Tensor:
    """Uninitialised ``[rows, cols]`` with unit column stride and the row stride ``cols``
    rounded up to a multiple of ``align`` (a view of a ``[rows, stride]`` buffer)."""
    stride = -(-cols // align) * align if align > 1 else cols
    buf = torch.empty((rows, stride), dtype=dtype, device=device)
    return buf if stride == cols else buf[:, :cols]


class Fp8Quantized(NamedTuple):
    """Result of a quantization. ``data_t``/``scale_t`` are only set by ``with_transpose``."""

    data: torch.Tensor
    scale: torch.Tensor
    data_t: torch.Tensor | None = None
    scale_t: torch.Tensor | None = None


def _check(x: torch.Tensor, dtype: torch.dtype) -> float:
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    if dtype not in FP8_MAX:
        raise ValueError(f"fp8 dtype must be one of {list(FP8_MAX)}, got {dtype}")
    if not x.is_floating_point() or x.dtype in FP8_MAX:
        raise ValueError(f"input must be bf16/fp16/fp32, got {x.dtype}")
    return FP8_MAX[dtype]


def _cast_args(dtype: torch.dtype) -> dict[str, object]:
    return {"MANT": _MANTISSA_BITS[dtype], "PRE_ROUND": interpreter_mode()}


def _amax(x: torch.Tensor, axis: int) -> torch.Tensor:
    R, C = x.shape
    n = R if axis == 0 else (C if axis == 1 else 1)
    amax = torch.zeros(n, dtype=torch.float32, device=x.device)
    grid = (cdiv(R, _TILE_R), cdiv(C, _TILE_C))
    _amax_kernel[grid](
        x, amax, R, C, x.stride(0), x.stride(1), AXIS=axis, BLOCK_R=_TILE_R, BLOCK_C=_TILE_C
    )
    return amax


def _apply(
    x: torch.Tensor,
    amax: torch.Tensor,
    axis: int,
    dtype: torch.dtype,
    write_q: bool,
    write_qt: bool,
    align: int = 1,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor]:
    R, C = x.shape
    q = empty_rows(R, C, dtype, x.device, align) if write_q else None
    qt = empty_rows(C, R, dtype, x.device, align) if write_qt else None
    scale = torch.empty(amax.shape if axis != 2 else (), dtype=torch.float32, device=x.device)
    if x.numel() == 0:  # no program runs: the scale of an all-zero group, not uninitialised
        return q, qt, scale.fill_(AMAX_EPS / FP8_MAX[dtype])
    grid = (cdiv(R, _TILE_R), cdiv(C, _TILE_C))
    _apply_scale_kernel[grid](
        x,
        amax,
        q if write_q else qt,
        qt if write_qt else q,
        scale,
        R,
        C,
        x.stride(0),
        x.stride(1),
        q.stride(0) if q is not None else 0,
        qt.stride(0) if qt is not None else 0,
        FP8_MAX[dtype],
        AMAX_EPS,
        AXIS=axis,
        WRITE_Q=write_q,
        WRITE_QT=write_qt,
        **_cast_args(dtype),
        BLOCK_R=_TILE_R,
        BLOCK_C=_TILE_C,
    )
    return q, qt, scale


def quant_fp8_tensorwise(
    x: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    with_transpose: bool = False,
    align: int = 1,
) -> Fp8Quantized:
    """One fp32 scale for the whole tensor.

    Returns ``Fp8Quantized(data [R, C], scale [] fp32, data_t, scale_t)``; with
    ``with_transpose`` the same quantized values are also written as a contiguous ``[C, R]``
    ``data_t`` (one read of ``x``, two writes) and ``scale_t`` is ``scale``.
    Two launches: a tile-wise amax with an atomic max, then the scaling pass.
    """
    _check(x, dtype)
    amax = _amax(x, axis=2)
    q, qt, scale = _apply(x, amax, 2, dtype, True, with_transpose, align)
    assert q is not None
    return Fp8Quantized(q, scale, qt, scale if with_transpose else None)


def quant_fp8_rowwise(
    x: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    transpose: bool = False,
    align: int = 1,
) -> Fp8Quantized:
    """One fp32 scale per row of ``x`` (``transpose=False``) or per row of ``xᵀ``.

    ``transpose=False``: ``data [R, C]``, ``scale [R]``. ``transpose=True``: the column-wise
    quantization of ``x`` written as ``data [C, R]`` (contiguous) with ``scale [C]``: what the
    backward GEMMs need (contraction over the rows of ``x``).
    """
    _check(x, dtype)
    axis = 1 if transpose else 0
    amax = _amax(x, axis=axis)
    q, qt, scale = _apply(x, amax, axis, dtype, not transpose, transpose, align)
    data = qt if transpose else q
    assert data is not None
    return Fp8Quantized(data, scale)


def quant_fp8_blockwise_1x128(
    x: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    transpose: bool = False,
    align: int = 1,
) -> Fp8Quantized:
    """Per-token groups of 1 x 128 (DeepSeek-V3 activations and gradients), one pass.

    ``transpose=False``: groups of 128 consecutive elements of a row of ``x``;
    ``data [R, C]`` contiguous, ``scale [R, ceil(C/128)]`` stored R-major (strides ``(1, R)``).
    ``transpose=True``: the same for ``xᵀ`` (groups of 128 consecutive rows of ``x`` in one
    column): ``data [C, R]`` contiguous, ``scale [C, ceil(R/128)]`` with strides ``(1, C)``.
    A ragged last group is scaled by the amax of its valid elements.
    """
    _check(x, dtype)
    R, C = x.shape
    if not transpose:
        q = empty_rows(R, C, dtype, x.device, align)
        ng = cdiv(C, GROUP)
        scale = torch.empty((ng, R), dtype=torch.float32, device=x.device).t()
        grid = (cdiv(R, _TILE_R), ng)
        _group_quant_kernel[grid](
            x,
            q,
            q,
            scale,
            R,
            C,
            x.stride(0),
            x.stride(1),
            q.stride(0),
            0,
            scale.stride(0),
            scale.stride(1),
            FP8_MAX[dtype],
            AMAX_EPS,
            GROUP_R=1,
            GROUP_C=GROUP,
            WRITE_Q=True,
            WRITE_QT=False,
            **_cast_args(dtype),
            BLOCK_R=_TILE_R,
            BLOCK_C=GROUP,
        )
        return Fp8Quantized(q, scale)
    qt = empty_rows(C, R, dtype, x.device, align)
    ng = cdiv(R, GROUP)
    scale_t = torch.empty((ng, C), dtype=torch.float32, device=x.device)  # [group of rows, col]
    grid = (ng, cdiv(C, _TILE_R))
    _group_quant_kernel[grid](
        x,
        qt,
        qt,
        scale_t,
        R,
        C,
        x.stride(0),
        x.stride(1),
        0,
        qt.stride(0),
        scale_t.stride(0),
        scale_t.stride(1),
        FP8_MAX[dtype],
        AMAX_EPS,
        GROUP_R=GROUP,
        GROUP_C=1,
        WRITE_Q=False,
        WRITE_QT=True,
        **_cast_args(dtype),
        BLOCK_R=GROUP,
        BLOCK_C=_TILE_R,
    )
    # scale_t[g, c] is the scale of data[c, g*128 : (g+1)*128]; .t() gives [C, ng], strides (1, C).
    return Fp8Quantized(qt, scale_t.t())


def quant_fp8_block_128x128(
    x: torch.Tensor,
    dtype: torch.dtype = torch.float8_e4m3fn,
    *,
    with_transpose: bool = False,
    align: int = 1,
) -> Fp8Quantized:
    """128 x 128 blocks (DeepSeek-V3 weights), one pass.

    Returns ``data [R, C]`` and ``scale [ceil(R/128), ceil(C/128)]`` (row-major). With
    ``with_transpose`` also ``data_t [C, R]`` (the same values transposed, contiguous) and
    ``scale_t = scale.t()`` — the weight operand of the ``dout @ w`` backward GEMM.
    """
    _check(x, dtype)
    R, C = x.shape
    q = empty_rows(R, C, dtype, x.device, align)
    qt = empty_rows(C, R, dtype, x.device, align) if with_transpose else q
    scale = torch.empty((cdiv(R, GROUP), cdiv(C, GROUP)), dtype=torch.float32, device=x.device)
    grid = (cdiv(R, GROUP), cdiv(C, GROUP))
    _group_quant_kernel[grid](
        x,
        q,
        qt,
        scale,
        R,
        C,
        x.stride(0),
        x.stride(1),
        q.stride(0),
        qt.stride(0),
        scale.stride(0),
        scale.stride(1),
        FP8_MAX[dtype],
        AMAX_EPS,
        GROUP_R=GROUP,
        GROUP_C=GROUP,
        WRITE_Q=True,
        WRITE_QT=with_transpose,
        **_cast_args(dtype),
        BLOCK_R=GROUP,
        BLOCK_C=GROUP,
    )
    if with_transpose:
        return Fp8Quantized(q, scale, qt, scale.t())
    return Fp8Quantized(q, scale)


def dequant_fp8(
    q: Fp8Quantized | torch.Tensor,
    scale: torch.Tensor | None = None,
    group: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Plain-PyTorch dequantization to fp32 (tests and references).

    ``group`` is the (rows, cols) edge of a scaling group for 2-D scales: ``(1, 128)`` for
    1x128 and ``(128, 128)`` for blocks; 0-d and 1-D (per-row) scales need no ``group``.
    """
    if isinstance(q, Fp8Quantized):
        q, scale = q.data, q.scale
    assert scale is not None
    x = q.float()
    if scale.dim() == 0:
        return x * scale
    if scale.dim() == 1:
        return x * scale[:, None]
    gr, gc = group or (1, GROUP)
    s = scale.repeat_interleave(gr, dim=0)[: x.shape[0]]
    s = s.repeat_interleave(gc, dim=1)[:, : x.shape[1]]
    return x * s
