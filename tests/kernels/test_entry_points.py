"""What the GEMM entry points take beyond the benchmark's operands: mixed dtypes, fp32,
activations with leading dimensions, a frozen weight, a grouped weight in the wrong layout,
a strided ``group_lens``, an empty tensor to quantize. Each either works as torch's own op
would, or stops with an error that says what to pass instead."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm import fp8 as fp8_mod
from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.gemm.fp8 import fp8_linear
from kernel_ratchet.kernels.gemm.launch import linear_gemm, matmul
from kernel_ratchet.kernels.grouped_gemm.fp8 import grouped_gemm_fp8_blockwise
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_gemm
from kernel_ratchet.kernels.quant.launch import (
    AMAX_EPS,
    FP8_MAX,
    quant_fp8_rowwise,
    quant_fp8_tensorwise,
)

H = torch.float16


def _rand(*size, dtype=H, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*size, generator=g).to(device=device, dtype=dtype)


def test_operands_of_two_dtypes_stop_with_what_to_cast():
    with pytest.raises(TypeError, match=r"one dtype .*float16 and torch.float32.*b.to\(a.dtype\)"):
        matmul(_rand(8, 16), _rand(4, 16, dtype=torch.float32))
    with pytest.raises(ValueError, match="2-D operands.*leading dimensions"):
        matmul(_rand(2, 8, 16), _rand(4, 16))
    with pytest.raises(TypeError, match="floating operands, got torch.int32"):
        linear_gemm(_rand(8, 16, dtype=torch.int32), _rand(4, 16, dtype=torch.int32))


def test_the_fp8_linear_takes_mixed_operands_whichever_path_a_shape_takes(monkeypatch, device):
    a, w = _rand(64, 256).to(device), _rand(96, 256, dtype=torch.float32).to(device)
    ref = a.float() @ w.t()
    fp8 = fp8_linear(a, w)
    monkeypatch.setattr(fp8_mod, "fp8_path", lambda *args: "bf16")  # the table's 16-bit route
    routed = fp8_linear(a, w)
    assert snr_db(fp8.float(), ref) > 25 and snr_db(routed.float(), ref) > 40


def test_activations_with_leading_dimensions_keep_them_and_their_gradients(device):
    a, w = (
        _rand(2, 3, 64, device=device).requires_grad_(),
        _rand(32, 64, device=device).requires_grad_(),
    )
    out = linear_gemm(a, w)
    assert out.shape == (2, 3, 32)
    assert snr_db(out.float(), a.detach().float() @ w.detach().float().t()) > 40
    out.float().sum().backward()
    assert a.grad.shape == a.shape and w.grad.shape == w.shape
    one = linear_gemm(_rand(64, device=device), w.detach())
    assert one.shape == (32,)
    assert fp8_linear(_rand(2, 3, 256, device=device), _rand(96, 256, device=device)).shape == (
        2,
        3,
        96,
    )


def test_a_linear_that_needs_no_gradient_skips_autograd_and_keeps_its_values(device):
    a, w = _rand(16, 64, device=device), _rand(32, 64, device=device)
    ref = linear_gemm(a.clone().requires_grad_(), w).detach()
    plain = linear_gemm(a, w)
    with torch.no_grad():
        held = linear_gemm(a.clone().requires_grad_(), w.clone().requires_grad_())
    assert plain.grad_fn is None and held.grad_fn is None and not held.requires_grad
    assert torch.equal(plain, ref) and torch.equal(held, ref)
    assert linear_gemm(a, w.clone().requires_grad_()).grad_fn is not None


def test_fp32_operands_give_an_fp32_output_and_a_backward(device):
    a = _rand(16, 64, dtype=torch.float32, device=device).requires_grad_()
    w = _rand(32, 64, dtype=torch.float32, device=device).requires_grad_()
    out = linear_gemm(a, w)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert a.grad.dtype == torch.float32 and w.grad is not None


def test_a_frozen_weight_gets_no_gradient_gemm(monkeypatch, device):
    calls = []
    real = launch.matmul
    monkeypatch.setattr(
        launch, "matmul", lambda *a, **k: calls.append(k.get("kind")) or real(*a, **k)
    )
    a, w = _rand(16, 64, device=device).requires_grad_(), _rand(32, 64, device=device)
    linear_gemm(a, w).float().sum().backward()
    assert calls == ["bf16", "bf16_bwd"] and a.grad is not None  # forward, dgrad; no wgrad


def test_a_grouped_weight_in_the_other_layout_or_dtype_is_refused():
    x, lens = _rand(10, 64), torch.tensor([4, 6], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"\[G, N, K\] with K = x.shape\[1\] = 64.*transpose"):
        grouped_gemm(x, _rand(2, 64, 32), lens)
    with pytest.raises(ValueError, match="K = x.shape"):
        grouped_gemm_fp8_blockwise(x, _rand(2, 64, 32), lens)
    with pytest.raises(TypeError, match="one dtype"):
        grouped_gemm(x, _rand(2, 32, 64, dtype=torch.float32), lens)


def test_a_strided_group_lens_reads_its_own_values(device):
    x, w = _rand(45, 64, device=device), _rand(3, 32, 64, device=device)
    counts = torch.tensor([[5, 1], [0, 1], [40, 1]], dtype=torch.int32, device=device)
    lens = counts[:, 0]  # stride 2: read by offset, it was [5, 1, 0]
    assert not lens.is_contiguous()
    assert torch.equal(grouped_gemm(x, w, lens), grouped_gemm(x, w, lens.contiguous()))
    fp8 = grouped_gemm_fp8_blockwise(x, w, lens)
    assert torch.equal(fp8, grouped_gemm_fp8_blockwise(x, w, lens.contiguous()))


@pytest.mark.parametrize(
    "quant",
    [
        lambda x: quant_fp8_tensorwise(x).scale,
        lambda x: quant_fp8_rowwise(x).scale,
        lambda x: quant_fp8_rowwise(x, transpose=True).scale,
    ],
    ids=["tensorwise", "rowwise", "rowwise-t"],
)
def test_an_empty_tensor_quantizes_with_the_scale_of_zeros(quant, device):
    for shape in ((0, 16), (16, 0)):
        scale = quant(torch.zeros(shape, device=device))
        assert torch.all(scale == AMAX_EPS / FP8_MAX[torch.float8_e4m3fn]), scale
