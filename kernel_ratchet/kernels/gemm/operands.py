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


def rows(a: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``a`` as ``[rows, K]`` and its leading dimensions (a 1-D ``a`` is one row)."""
    if a.dim() == 0:
        raise ValueError("a Linear takes an activation of at least one dimension, got a scalar")
    lead = tuple(a.shape[:-1])
    return (a if a.dim() == 2 else a.reshape(-1, a.shape[-1])), lead
