"""The FP8 grouped step with its weight quantized once by the caller (gradient accumulation,
:mod:`kernel_ratchet.kernels.grouped_gemm.prepared_weight`), on the interpreter: the same
bits as quantizing it every call, the gradient still reaching the weight, and a stale or
foreign prepared weight refused."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.grouped_gemm.fp8 import grouped_gemm_fp8_blockwise
from kernel_ratchet.kernels.grouped_gemm.prepared_weight import prepare_weight


def _step(case, prepared=None):
    x = case.x.detach().requires_grad_()
    w = case.w
    out = grouped_gemm_fp8_blockwise(x, w, case.group_lens, prepared=prepared)
    dx, dw = torch.autograd.grad(out, (x, w), case.dout)
    return out, dx, dw


@pytest.fixture
def case(grouped_case):
    return grouped_case


def test_a_prepared_weight_gives_the_same_bits_and_the_weights_gradient(case):
    fresh = _step(case)
    prepared = prepare_weight(case.w)
    for micro_batch in range(2):  # one preparation serves every micro-batch
        got = _step(case, prepared)
        for name, a, b in zip(("out", "dx", "dw"), got, fresh, strict=True):
            assert torch.equal(a, b), (name, micro_batch)


def test_a_weight_updated_in_place_must_be_prepared_again(case):
    prepared = prepare_weight(case.w)
    with torch.no_grad():
        case.w.mul_(0.5)  # what an optimizer step does
    with pytest.raises(ValueError, match="prepare_weight\\(w\\) again"):
        _step(case, prepared)
    _step(case, prepare_weight(case.w))  # prepared again: runs


def test_a_weight_prepared_from_another_tensor_is_refused(case):
    other = case.w.detach().clone()
    with pytest.raises(ValueError, match="another tensor"):
        _step(case, prepare_weight(other))
    with pytest.raises(ValueError, match=r"\[G, N, K\]"):
        prepare_weight(case.w[0])
