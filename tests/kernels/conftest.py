"""Fixtures shared by the kernel tests."""

from __future__ import annotations

import pytest

from kernel_ratchet.kernels.gemm.dispatch import load_table
from kernel_ratchet.kernels.grouped_gemm import dispatch
from kernel_ratchet.kernels.grouped_gemm import shapes as S
from kernel_ratchet.kernels.grouped_gemm.adapter import make_grouped_case


@pytest.fixture
def grouped_case(device):
    """The tiny skew-routed grouped GEMM case (seed 0), its weight requiring grad."""
    (shape,) = [s for s in S.tiny_cpu() if s.label == "tiny_skewed"]
    c = make_grouped_case(shape, 0, device)
    c.w.requires_grad_()
    return c


@pytest.fixture
def grouped_dispatch_table(tmp_path, monkeypatch):
    """Writes the FP8 grouped dispatch table the shipped-table lookups read: called with
    measured layers ``(tokens, experts, N, K, ms)``, none for an empty table."""
    path = tmp_path / "fp8_dispatch.json"
    monkeypatch.setattr(dispatch, "TABLE_PATH", path)

    def write(*layers):
        dispatch.write_table(path, dispatch.measured_rows(layers), {"gpu": "test"}, merge=False)
        load_table.cache_clear()

    yield write
    load_table.cache_clear()
