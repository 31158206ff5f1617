"""The FP8 blockwise Linear with its weight quantized once by the caller (gradient
accumulation, :mod:`kernel_ratchet.kernels.gemm.prepared_weight`), on the interpreter: the same
bits as quantizing it every call, the gradient still reaching the weight, and a stale or
foreign prepared weight refused on either path the dispatch may pick."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.gemm import fp8 as F
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.fp8 import Fp8Recipe, fp8_linear
from kernel_ratchet.kernels.gemm.launch import forced_config
from kernel_ratchet.kernels.gemm.prepared_weight import prepare_weight

SMALL = GemmConfig(32, 32, 128, num_warps=4, num_stages=2)
RECIPE = Fp8Recipe("blockwise", dispatch=False)


@pytest.fixture
def linear(device):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(2, 25, 256, generator=g).to(device=device, dtype=torch.bfloat16)
    w = torch.randn(64, 256, generator=g).to(device=device, dtype=torch.bfloat16)
    dout = torch.randn(2, 25, 64, generator=g).to(device=device, dtype=torch.bfloat16)
    return a, w.requires_grad_(), dout


def _step(linear, prepared=None, recipe=RECIPE):
    a, w, dout = linear
    a = a.detach().requires_grad_()
    with forced_config(SMALL):
        out = fp8_linear(a, w, recipe, prepared=prepared)
        da, dw = torch.autograd.grad(out, (a, w), dout)
    return out, da, dw


def test_a_prepared_weight_gives_the_same_bits_and_the_weights_gradient(linear, monkeypatch):
    fresh = _step(linear)
    prepared = prepare_weight(linear[1])
    calls = []
    quantize = F.quant_weight_blockwise
    monkeypatch.setattr(F, "quant_weight_blockwise", lambda b: calls.append(b) or quantize(b))
    for micro_batch in range(2):  # one preparation serves every micro-batch
        got = _step(linear, prepared)
        for name, x, y in zip(("out", "da", "dw"), got, fresh, strict=True):
            assert torch.equal(x, y), (name, micro_batch)
    assert calls == [] and fresh[2].abs().sum() > 0  # the weight was not quantized again
    _step(linear)
    assert len(calls) == 1


def test_a_weight_updated_in_place_must_be_prepared_again(linear):
    prepared = prepare_weight(linear[1])
    with torch.no_grad():
        linear[1].mul_(0.5)  # what an optimizer step does
    with pytest.raises(ValueError, match="prepare_weight\\(w\\) again"):
        _step(linear, prepared)
    _step(linear, prepare_weight(linear[1]))  # prepared again: runs


def test_a_stale_weight_is_refused_where_the_dispatch_runs_the_16_bit_path(linear, monkeypatch):
    """Whether a shape runs FP8 or the 16-bit path must not decide whether stale copies are
    caught: the check comes before the dispatch."""
    monkeypatch.setattr(F, "fp8_path", lambda *a: "bf16")
    prepared = prepare_weight(linear[1])
    routed = Fp8Recipe("blockwise")
    _step(linear, prepared, routed)  # unused there, and current: runs
    with torch.no_grad():
        linear[1].add_(1.0)
    with pytest.raises(ValueError, match="again after each update"):
        _step(linear, prepared, routed)


def test_a_foreign_weight_a_wrong_shape_and_another_recipe_are_refused(linear):
    other = linear[1].detach().clone()
    with pytest.raises(ValueError, match="another tensor"):
        _step(linear, prepare_weight(other))
    with pytest.raises(ValueError, match=r"\[N, K\]"):
        prepare_weight(linear[1][None])
    with pytest.raises(ValueError, match="blockwise recipe"):
        _step(linear, prepare_weight(linear[1]), Fp8Recipe("rowwise", dispatch=False))
