"""Focused test of the tiny GEMM: fresh random inputs, float64 reference, every shape."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from kernel_ratchet.harness.correctness import assert_close  # noqa: E402
from tiny_gemm.kernel import matmul_nt  # noqa: E402
from tiny_gemm.reference import matmul_nt_ref  # noqa: E402
from tiny_gemm.shapes import TINY  # noqa: E402


@pytest.mark.parametrize("shape", TINY, ids=lambda s: s.label)
def test_matmul_nt_matches_reference(shape):
    g = torch.Generator().manual_seed(1234)
    a = torch.randn(shape.M, shape.K, generator=g)
    b = torch.randn(shape.N, shape.K, generator=g)
    assert_close({"out": matmul_nt(a, b)}, {"out": matmul_nt_ref(a, b)}, min_snr_db=80.0)
