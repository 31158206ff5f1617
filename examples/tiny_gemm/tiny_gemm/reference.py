"""The naive truth: a @ b.T in float64 with plain PyTorch."""

from __future__ import annotations

import torch


def matmul_nt_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.double() @ b.double().T).to(torch.float32)
