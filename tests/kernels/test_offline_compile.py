"""Compiling a recorded launch for sm_90 without a GPU (:mod:`kernel_ratchet.kernels.offline`):
the variant builds, and its shared memory, registers and spills are read back."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels import offline, offline_compile
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
def test_a_small_block_fits_and_a_block_too_big_for_the_register_file_spills(monkeypatch):
    """1,024 fp32 values over 4 warps: 8 per thread. 8,192 in one warp: 256 per thread, more than
    the 255 registers a thread can have."""
    typed = Launch(
        "_typed", (1,), (("BLOCK", 64),), (F32, *[("int", False, False)] * 2, "float", "bool")
    )
    started = []
    run = offline.subprocess.run
    monkeypatch.setattr(
        offline.subprocess, "run", lambda *a, **k: started.append(a) or run(*a, **k)
    )
    small, other, big = offline.resources_by_kernel(
        [_launch(1024, 4), typed, _launch(8192, 1)], {"_scale_rows": _scale_rows, "_typed": _typed}
    )
    if not hasattr(_scale_rows, "params"):  # interpreted here (no GPU)
        assert len(started) == 1  # one fresh process compiled both kernels (ptxas ran in it)
    assert other.spill_bytes == 0  # each result in its launch's place, one batch per kernel
    assert small.fits() and small.registers is not None and small.registers < 64
    assert small.spill_bytes == 0
    assert big.spill_bytes is not None and big.spill_bytes > 0


@pytest.mark.slow
def test_model_shape_gemms_fit_the_sm_without_spills():
    """The Triton kernel's shipped configs on a model shape (bf16 forward and backward, FP8
    blockwise step), as it runs them where the warp-specialized kernels do not: every variant
    within sm_90's shared memory and without register spills."""
    a, b, d = cs.inputs(Shape("qkv", M=4096, N=12288, K=4096), torch.bfloat16, "cpu")
    variants = []
    for fn in cs.linear_paths(a, b, d).values():
        variants += cs.census_call(fn, dry=True, gluon=False).gemms()
    distinct = offline.distinct(variants)
    assert len(distinct) >= 3
    for x, r in zip(distinct, resources_of(_gemm_kernel, distinct), strict=True):
        assert r.shared_bytes <= SM90_SHARED_BYTES and r.spill_bytes == 0, (cs.tile(x), r)


@triton.jit
def _typed(x_ptr, n, big, scale, flag, BLOCK: tl.constexpr, EXTRA: tl.constexpr = 3):
    i = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + i) * scale + n + big.to(tl.float32) + EXTRA
    if flag:
        v = -v
    tl.store(x_ptr + i, v)


def test_offline_signature_types_each_argument_as_triton_does():
    spec = (F32, ("int", False, False), ("int", False, True), "float", "bool")
    x = Launch("_typed", (1,), (("BLOCK", 64),), spec, ints=(7, 2**40))
    sig, const, attrs, _ = offline_compile.signature(_typed, x)
    assert sig == {
        "x_ptr": "*fp32",
        "n": "i32",
        "big": "i64",  # past int32: Triton passes it as a 64-bit integer
        "scale": "fp32",
        "flag": "u1",
        "BLOCK": "constexpr",
        "EXTRA": "constexpr",
    }
    assert const == {"BLOCK": 64, "EXTRA": 3} and list(attrs) == [(0,), (2,)]
    with pytest.raises(ValueError, match="cannot compile a dict argument"):
        offline_compile.signature(
            _typed, Launch("_typed", (1,), (("BLOCK", 64),), (*spec[:4], "dict"))
        )


def test_distinct_keeps_one_launch_per_compiled_variant():
    a = _launch(1024, 4)
    regrid = Launch(a.kernel, (9,), a.constexprs, a.spec, (5,), 10, a.options)
    assert offline.distinct([a, regrid, _launch(1024, 8), a]) == [a, _launch(1024, 8)]
