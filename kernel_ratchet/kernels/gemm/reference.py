"""Plain-PyTorch references of the Linear GEMM and its gradients, in higher precision.

The references take the unquantized (bf16/fp16) inputs and compute in fp32 with TF32 off, on
whatever device the inputs live on. For the FP8 ops this is the exact product, so the SNR
measures the whole quantization error of the recipe, which is what SPEC section 5 thresholds.
"""

from __future__ import annotations

import torch


def _fp32_mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return x.float() @ y.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def linear_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [M, K] @ b [N, K]ᵀ`` in fp32."""
    return _fp32_mm(a, b.t())


def linear_backward_ref(
    dout: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(da, db) = (dout @ b, doutᵀ @ a)`` in fp32."""
    return _fp32_mm(dout, b), _fp32_mm(dout.t(), a)


def linear_all_ref(a: torch.Tensor, b: torch.Tensor, dout: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"out", "da", "db"}`` of a Linear layer without bias, fp32."""
    da, db = linear_backward_ref(dout, a, b)
    return {"out": linear_ref(a, b), "da": da, "db": db}
