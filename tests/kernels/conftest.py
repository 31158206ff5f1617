"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pytest

from kernel_ratchet.kernels.grouped_gemm import shapes as S
from kernel_ratchet.kernels.grouped_gemm.adapter import make_grouped_case


@pytest.fixture
def grouped_case(device):
    """The tiny skew-routed grouped GEMM case (seed 0), its weight requiring grad."""
    (shape,) = [s for s in S.tiny_cpu() if s.label == "tiny_skewed"]
    c = make_grouped_case(shape, 0, device)
    c.w.requires_grad_()
    return c
