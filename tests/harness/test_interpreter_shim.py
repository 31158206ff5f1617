"""The interpreter shim: a float scalar argument reaches a rehearsed kernel as the fp32 scalar
the compiler would make of it, and bfloat16 kernels compute on values, not bit patterns."""

from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="the shim is for the Triton interpreter"
)


@triton.jit
def _scaled_silu(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32) * scale.to(tl.float32)
    tl.store(y_ptr + offs, x * tl.sigmoid(x), mask=mask)


def _run(scale: float) -> torch.Tensor:
    x = torch.linspace(-3, 3, 37)
    y = torch.empty_like(x)
    _scaled_silu[(triton.cdiv(37, 16),)](x, y, 37, scale, BLOCK=16)
    return y


@pytest.fixture
def interp(monkeypatch):
    """The interpreter module, its argument conversion restored after the test."""
    from triton.runtime import interpreter

    monkeypatch.setattr(interpreter, "_implicit_cvt", interpreter._implicit_cvt)
    return interpreter


def test_a_float_argument_is_an_fp32_scalar_in_the_kernel(interp):
    from kernel_ratchet.harness.interpreter import install

    install()
    install()  # idempotent: the conversion is wrapped once
    assert interp._implicit_cvt.fp32_floats
    x = torch.linspace(-3, 3, 37) * 0.5
    torch.testing.assert_close(_run(0.5), x * torch.sigmoid(x))


def test_without_the_shim_the_interpreter_rejects_the_float(interp):
    """What the shim is for: the same kernel fails in the bare interpreter."""
    if getattr(interp._implicit_cvt, "fp32_floats", False):
        pytest.skip("another test of this process installed the shim")
    with pytest.raises(Exception, match="float"):
        _run(0.5)


@triton.jit
def _bf16_ops(a_ptr, b_ptr, w_ptr, out_ptr, red_ptr, dot_ptr, idx_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    offs = r[:, None] * BLOCK + r[None, :]
    a, b = tl.load(a_ptr + offs), tl.load(b_ptr + offs)
    y = tl.exp(a.to(tl.float32)).to(tl.bfloat16) * b + a - b / (tl.abs(a) + 1.0).to(tl.bfloat16)
    y = tl.where(a > b, y, tl.maximum(a, b))
    tl.store(out_ptr + offs, y)
    tl.store(red_ptr + r, tl.max(a, axis=1))
    tl.store(red_ptr + BLOCK + r, tl.sum(b, axis=0))
    tl.store(idx_ptr + offs, (a * 4.0).to(tl.int32))
    tl.store(dot_ptr + offs, tl.dot(a, tl.load(w_ptr + offs)))


def test_bf16_kernels_compute_on_values_with_the_shim(interp, monkeypatch):
    from kernel_ratchet.harness.interpreter import install

    builder = interp.InterpreterBuilder
    for name in (
        "binary_op",
        "unary_op",
        "ternary_op",
        "cast_impl",
        "create_fp_to_fp",
        "create_dot",
    ):
        monkeypatch.setattr(builder, name, getattr(builder, name))
    for cls, names in ((interp.ReduceOps, ("sum", "min_max")), (interp.ScanOps, ("cumsum",))):
        for name in names:
            monkeypatch.setattr(cls, name, getattr(cls, name))
    monkeypatch.setattr(builder, "get_bf16", getattr(builder, "get_bf16", None), raising=False)
    monkeypatch.setattr(builder, "_ratchet_bf16", False, raising=False)
    install()
    n, bf = 16, torch.bfloat16
    g = torch.Generator().manual_seed(0)
    a, b, w = (torch.randn(n, n, generator=g).to(bf) for _ in range(3))
    out, dot = torch.empty(n, n, dtype=bf), torch.empty(n, n)
    red, idx = torch.empty(2 * n, dtype=bf), torch.empty(n, n, dtype=torch.int32)
    _bf16_ops[(1,)](a, b, w, out, red, dot, idx, BLOCK=n)
    ref = torch.exp(a.float()).to(bf) * b + a - b / (a.abs() + 1.0)
    ref = torch.where(a > b, ref, torch.maximum(a, b))
    torch.testing.assert_close(out.float(), ref.float(), rtol=0.02, atol=0.05)
    torch.testing.assert_close(red[:n], a.max(dim=1).values)
    torch.testing.assert_close(red[n:].float(), b.float().sum(dim=0), rtol=0.02, atol=0.05)
    torch.testing.assert_close(idx, (a * 4.0).to(torch.int32))
    torch.testing.assert_close(dot, a.float() @ w.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_libdevice_functions_bound_before_the_shim_compute_with_it(dtype):
    """libdevice's tanh, erf, pow and isnan are stubs the interpreter runs as None; the kernel
    module bound them by name at its import, before the shim."""
    from kernel_ratchet.harness.interpreter import install
    from tests.harness import libdevice_kernel as k

    install()
    x = torch.linspace(-3, 3, 37).to(dtype)
    x[5] = float("nan")
    y = torch.empty_like(x)
    k.gelu_like[(triton.cdiv(37, 16),)](x, y, 37, BLOCK=16)
    xf = x.float()
    want = 0.5 * xf * (1 + torch.tanh(0.79788456 * (xf + 0.044715 * xf**3))) + torch.erf(xf)
    want[5] = 0.0
    torch.testing.assert_close(y.float(), want.to(dtype).float(), atol=1e-5, rtol=1e-2)


def test_a_scalar_index_reads_its_one_element_where_numpy_refuses_int(interp, monkeypatch):
    """numpy 2.4 raises on ``int()`` of a one-element array, which triton 3.6's interpreter
    does to use a scalar as an index (``range(0, K, BK)``): the shim reads the element."""
    import operator
    from types import SimpleNamespace

    import numpy as np

    from kernel_ratchet.harness.interpreter import NUMPY_SCALARS, install

    class Strict(np.ndarray):  # numpy 2.4's conversion, on any numpy
        def __int__(self):
            raise TypeError(NUMPY_SCALARS)

    class Tensor:
        pass

    shipped = interp._patch_lang_tensor  # the shim's, where a rehearsal already installed it
    monkeypatch.setattr(interp, "_patch_lang_tensor", getattr(shipped, "__wrapped__", shipped))
    t = Tensor()
    t.handle = SimpleNamespace(data=np.array([7]).view(Strict))
    scope = interp._LangPatchScope()
    interp._patch_lang_tensor(Tensor, scope)
    with pytest.raises(TypeError, match=NUMPY_SCALARS):
        operator.index(t)
    scope.restore()
    install()
    install()  # idempotent: one wrapper
    interp._patch_lang_tensor(Tensor, scope)
    assert operator.index(t) == 7 and range(0, 20, t)[1] == 7
    scope.restore()


@triton.jit
def _to_fp8(x_ptr, q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(q_ptr + offs, x.to(q_ptr.dtype.element_ty), mask=mask)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16])
def test_fp8_casts_round_to_nearest_even_and_saturate_as_the_gpu(fp8, src):
    """The mantissa carry (31.6 -> 32), values below the smallest normal, ties and values past
    the largest finite one (saturated, as cvt.rn.satfinite does) against torch's cast."""
    from kernel_ratchet.harness.interpreter import install

    install()
    top = torch.finfo(fp8).max
    tiny = torch.finfo(fp8).smallest_normal
    x = torch.tensor([31.6, -31.6, 0.3 * tiny, 0.55 * tiny, 1.3 * tiny, top * 1.5, -top * 3, 0.0])
    x = torch.cat([x, torch.randn(88) * 4, torch.randn(32) * tiny]).to(src)
    q = torch.empty(x.numel(), dtype=fp8)
    _to_fp8[(1,)](x, q, x.numel(), BLOCK=128)
    want = x.float().clamp(-top, top).to(fp8)
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
