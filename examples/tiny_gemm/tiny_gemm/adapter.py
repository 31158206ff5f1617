"""A complete kernel-ratchet adapter: the harness calls these methods for every shape.

Copy this file as the starting point for your own op (see kernel_ratchet.harness.adapter for
the contract of each method).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernel_ratchet.harness.adapter import SNR_FP32, Adapter, Shape
from tiny_gemm.kernel import matmul_nt
from tiny_gemm.reference import matmul_nt_ref


@dataclass
class Case:
    a: torch.Tensor
    b: torch.Tensor


class TinyGemm(Adapter):
    """out = a @ b.T in float32, forward only (campaign_type compute_fwd)."""

    schema = "gemm"
    has_backward = False
    min_snr_db = {"out": SNR_FP32}

    def make_case(self, shape: Shape, seed: int, device: str) -> Case:
        g = torch.Generator(device="cpu").manual_seed(seed)
        a = torch.randn(shape.M, shape.K, generator=g).to(device)
        b = torch.randn(shape.N, shape.K, generator=g).to(device)
        return Case(a, b)

    def forward(self, case: Case) -> torch.Tensor:
        return matmul_nt(case.a, case.b)

    def training_roles(self, case: Case) -> dict[str, str]:
        """Optional: which inputs are weights and which are fresh every training step, so the
        transfer guard can replay a training step with fresh tensors (SPEC section 8)."""
        return {"a": "activation", "b": "weight"}

    def outputs(self, case: Case) -> dict[str, torch.Tensor]:
        return {"out": self.forward(case)}

    def reference(self, case: Case) -> dict[str, torch.Tensor]:
        return {"out": matmul_nt_ref(case.a, case.b)}

    def flops(self, shape: Shape) -> tuple[float, float]:
        return (2.0 * shape.M * shape.N * shape.K, 0.0)

    def bytes_moved(self, shape: Shape) -> tuple[float, float]:
        return (4.0 * (shape.M * shape.K + shape.N * shape.K + shape.M * shape.N), 0.0)
