"""Every bundled adapter names its training roles, so the fresh-tensor simulation can run on it."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.training_sim import TRAINING_ROLES
from kernel_ratchet.kernels.gemm.adapter import GemmBf16, GemmFp8Blockwise
from kernel_ratchet.kernels.grouped_gemm import shapes as grouped_shapes
from kernel_ratchet.kernels.grouped_gemm.adapter import GroupedGemmBf16Adapter
from kernel_ratchet.kernels.quant import shapes as quant_shapes
from kernel_ratchet.kernels.quant.adapter import QuantFp8DualAdapter


@pytest.mark.parametrize(
    ("adapter", "shape", "weight"),
    [
        (GemmBf16(), Shape("g", 32, 48, 64), "b"),
        (GemmFp8Blockwise(), Shape("g8", 32, 128, 128), "b"),
        (GroupedGemmBf16Adapter(), grouped_shapes.tiny_cpu()[0], "w"),
        (QuantFp8DualAdapter(), quant_shapes.tiny_cpu()[0], None),
    ],
    ids=["gemm_bf16", "gemm_fp8_blockwise", "grouped_bf16", "quant_dual"],
)
def test_training_roles_name_real_tensor_fields(adapter, shape, weight):
    case = adapter.make_case(shape, 0, "cpu")
    roles = adapter.training_roles(case)
    assert set(roles.values()) <= set(TRAINING_ROLES)
    for field_name in roles:
        assert isinstance(getattr(case, field_name), torch.Tensor), field_name
    weights = [f for f, r in roles.items() if r == "weight"]
    assert weights == ([weight] if weight else [])
    assert "activation" in roles.values()
