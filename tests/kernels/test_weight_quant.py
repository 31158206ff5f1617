"""The grouped weight's 128x128-block FP8 quantization (``quant.weight``): per
group, the bits of the 2-D quantization, straight and transposed."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128
from kernel_ratchet.kernels.quant.weight import quant_weight_128x128

from .test_quant_dual import overshooting_magnitudes


def _same(a, b) -> bool:
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.parametrize(
    "G,N,K,transpose,strided,num_warps",
    [
        (3, 200, 300, True, False, 8),  # partial blocks
        (2, 256, 128, False, False, 16),
        (4, 130, 260, True, True, 8),  # a K-major view of the weight (any strides)
        (1, 100, 72, True, True, 16),
    ],
)
def test_each_group_gets_the_2d_quantizations_bits(G, N, K, transpose, strided, num_warps, device):
    w = (torch.randn(G, K, N) if strided else torch.randn(G, N, K)) * 3
    w = w.transpose(1, 2) if strided else w
    w = w.to(device=device, dtype=torch.bfloat16)
    w[G - 1, N // 2, K // 3] = 300.0  # one large value: its block scales apart
    got = quant_weight_128x128(w, transpose=transpose, num_warps=num_warps)
    for g in range(G):
        ref = quant_fp8_block_128x128(w[g].contiguous())
        assert _same(got.data[g], ref.data) and torch.equal(got.scale[g], ref.scale)
        if transpose:
            assert _same(got.data_t[g], ref.data.t().contiguous())
            assert torch.equal(got.scale_t[g], ref.scale.t())


def test_a_block_amax_that_scales_past_the_fp8_maximum_still_lands_on_it(device):
    """No clamp before the cast: a block's largest element, scaled to 448 plus an ulp, rounds
    to 448 (never NaN), the bits of the clamping 2-D quantization, straight and transposed."""
    a = overshooting_magnitudes()
    j = torch.arange(256 * 128)
    w = (a[(j * 13) % a.numel()] * (1.0 - 2.0 * (j % 2))).reshape(2, 128, 128)
    w = w.to(device=device, dtype=torch.bfloat16)
    got = quant_weight_128x128(w, transpose=True)
    for g in range(2):
        ref = quant_fp8_block_128x128(w[g])
        assert _same(got.data[g], ref.data) and torch.equal(got.scale[g], ref.scale)
        assert _same(got.data_t[g], ref.data.t())
    assert got.data.float().abs().amax() == 448.0


@pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"]
)
def test_the_transposed_copy_holds_the_straight_ones_bytes_for_every_input_dtype(dtype, device):
    """fp32 master weights too: the dgrad reads the transposed copy. Whole blocks (the GPU's
    vectorized path) and a block scaled apart; the codes against torch's own cast."""
    from kernel_ratchet.kernels.quant.reference import block_128x128_ref

    w = (torch.randn(2, 256, 384, generator=torch.Generator().manual_seed(7)) * 3).to(dtype)
    w[1, 200, 300] = 300.0
    got = quant_weight_128x128(w.to(device), transpose=True)
    for g in range(2):
        assert _same(got.data_t[g], got.data[g].t().contiguous()), f"group {g}"
        codes = block_128x128_ref(w[g])["q"]
        assert (got.data[g].float().cpu() != codes).float().mean() < 1e-3
