"""Compiling a recorded launch for sm_90 without a GPU (:mod:`kernel_ratchet.kernels.offline`):
the variant builds, and its shared memory, registers and spills are read back."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels.census import Launch
from kernel_ratchet.kernels.gemm import census as cs
from kernel_ratchet.kernels.gemm.kernel import _gemm_kernel
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES, resources_of

F32 = ("ptr", "torch.float32", True)


@triton.jit
def _scale_rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = x / sum(x) over one block: ``x`` stays live across the reduction."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0.0)
    tl.store(y_ptr + i, x / tl.sum(x), mask=i < n)


def _launch(block: int, warps: int) -> Launch:
    spec = (F32, F32, ("int", False, True))
    return Launch("_scale_rows", (1,), (("BLOCK", block),), spec, options=(("num_warps", warps),))


@pytest.mark.slow
def test_a_small_block_fits_and_a_block_too_big_for_the_register_file_spills():
    """1,024 fp32 values over 4 warps: 8 per thread. 8,192 in one warp: 256 per thread, more than
    the 255 registers a thread can have."""
    small, big = resources_of(_scale_rows, [_launch(1024, 4), _launch(8192, 1)])
    assert small.fits() and small.registers is not None and small.registers < 64
    assert small.spill_bytes == 0
    assert big.spill_bytes is not None and big.spill_bytes > 0


@pytest.mark.slow
def test_model_shape_gemms_fit_the_sm_without_spills():
    """The shipped configs on a model shape (bf16 forward and backward, FP8 blockwise step):
    every variant within sm_90's shared memory and without register spills."""
    a, b, d = cs._inputs(Shape("qkv", M=4096, N=12288, K=4096), torch.bfloat16, "cpu")
    variants = []
    for fn in cs.linear_paths(a, b, d).values():
        variants += cs.census_call(fn, dry=True).gemms()
    distinct = list(dict.fromkeys(variants))
    assert len(distinct) >= 3
    for x, r in zip(distinct, resources_of(_gemm_kernel, distinct), strict=True):
        assert r.shared_bytes <= SM90_SHARED_BYTES and r.spill_bytes == 0, (cs.tile(x), r)
