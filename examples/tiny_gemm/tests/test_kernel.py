"""Focused test of the tiny GEMM: fresh random inputs, float64 reference, every shape."""

import os

import torch

if not torch.cuda.is_available():  # CPU: Triton kernels run in the interpreter
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from tiny_gemm.kernel import matmul_nt  # noqa: E402
from tiny_gemm.reference import matmul_nt_ref  # noqa: E402
from tiny_gemm.shapes import TINY  # noqa: E402

from kernel_ratchet.harness.correctness import assert_close  # noqa: E402


@pytest.mark.parametrize("shape", TINY, ids=lambda s: s.label)
def test_matmul_nt_matches_reference(shape):
    g = torch.Generator().manual_seed(1234)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a = torch.randn(shape.M, shape.K, generator=g).to(device)
    b = torch.randn(shape.N, shape.K, generator=g).to(device)
    assert_close({"out": matmul_nt(a, b)}, {"out": matmul_nt_ref(a, b)}, min_snr_db=80.0)
