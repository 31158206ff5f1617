"""What the dense GEMM entry points take, checked on the host before any launch.

Operands of two dtypes reach ``tl.dot`` as a compile error deep in Triton ("Both operands must
be same dtype"), and a 3-D activation as an unpacking error: :func:`check_pair` says what was
passed and what to do instead, and :func:`rows` lets the Linear entry points take activations
with leading dimensions (``[B, S, K]``), as ``torch.nn.functional.linear`` does.
"""

from __future__ import annotations

import torch


def check_pair(a: torch.Tensor, b: torch.Tensor, kind: str) -> None:
    """Raise for operands the kernel cannot multiply: not 2-D, or dtypes it does not pair
    (16-bit kinds: one dtype, bf16, fp16 or fp32; FP8 kinds: 1-byte floats, E4M3 or E5M2)."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(
            f"the GEMM takes 2-D operands, got {list(a.shape)} and {list(b.shape)} (the "
            "Linear entry points take leading dimensions: linear_gemm, fp8_linear)"
        )
    if not (a.is_floating_point() and b.is_floating_point()):
        raise TypeError(f"the GEMM takes floating operands, got {a.dtype} and {b.dtype}")
    if kind.startswith("fp8"):
        if a.element_size() != 1 or b.element_size() != 1:
            raise TypeError(f"an FP8 GEMM takes FP8 operands, got {a.dtype} and {b.dtype}")
    elif a.dtype != b.dtype or a.element_size() == 1:
        raise TypeError(
            f"the GEMM takes operands of one dtype (bf16, fp16, fp32), got {a.dtype} and "
            f"{b.dtype}: cast one (b.to(a.dtype)); FP8 operands go through fp8_linear"
        )


def row_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself where its rows are contiguous, else a contiguous copy."""
    st = t.stride()
    return t if st[-1] == 1 and st[0] >= t.shape[1] else t.contiguous()


def operand_sizes(
    a: torch.Tensor, b: torch.Tensor, a_kmajor: bool, b_kmajor: bool, kind: str
) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """``(a, b, M, N, K)``: the operands row-major and the GEMM's sizes; the checks of
    :func:`check_pair` run only where something is off (a launch-bound GEMM's time is the
    host's: the operands it takes cost two lookups)."""
    try:
        a, b = row_major(a), row_major(b)
        M, K = a.shape if a_kmajor else a.shape[::-1]
        N, Kb = b.shape if b_kmajor else b.shape[::-1]
    except (ValueError, IndexError):
        check_pair(a, b, kind)  # says what was passed
        raise
    mixed = a.dtype is not b.dtype and a.element_size() + b.element_size() != 2  # FP8s pair
    if mixed or not a.is_floating_point():  # integers stop here, not inside Triton
        check_pair(a, b, kind)
    if Kb != K:
        raise ValueError(f"contraction mismatch: A has K={K}, B has K={Kb}")
    return a, b, M, N, K


def stride_align(use_tma: bool, row_stride: int) -> int:
    """The ``A_ALIGN`` / ``B_ALIGN`` constexpr of one operand: the largest power of two below
    16 dividing its row stride, when the pointer path reads it and the stride is not a
    multiple of 16 (Triton proves 16-divisibility by itself and nothing less); else 1, which
    leaves the kernel as it was and compiles no needless variant."""
    if use_tma or row_stride % 16 == 0:
        return 1
    align = 8
    while row_stride % align:
        align //= 2
    return align


def rows(a: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``a`` as ``[rows, K]`` and its leading dimensions (a 1-D ``a`` is one row)."""
    if a.dim() == 0:
        raise ValueError("a Linear takes an activation of at least one dimension, got a scalar")
    lead = tuple(a.shape[:-1])
    return (a if a.dim() == 2 else a.reshape(-1, a.shape[-1])), lead
