"""The grouped weight's 128x128-block FP8 quantization (``grouped_gemm.weight_quant``): the
persistent prefetching launch writes what one program per block writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from kernel_ratchet.kernels.grouped_gemm.weight_quant import quant_weight_128x128
from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128

from .test_quant_dual import overshooting_magnitudes


def _same(a, b) -> bool:
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.parametrize(
    "G,N,K,per_sm,transpose,strided",
    [
        (3, 200, 300, 1, True, False),  # 3 x 2 x 3 blocks over 2 programs, partial blocks
        (2, 256, 128, 2, False, False),
        (1, 100, 72, 3, True, False),  # one block: nothing to prefetch
        (4, 130, 260, 1, True, True),  # a K-major view of the weight (any strides)
    ],
)
def test_prefetching_programs_give_the_per_block_kernels_bits(
    G, N, K, per_sm, transpose, strided, device
):
    w = (torch.randn(G, K, N) if strided else torch.randn(G, N, K)) * 3
    w = w.transpose(1, 2) if strided else w
    w = w.to(device=device, dtype=torch.bfloat16)
    w[G - 1, N // 2, K // 3] = 300.0  # one large value: its block scales apart
    want = quant_weight_128x128(w, transpose=transpose)
    got = quant_weight_128x128(w, transpose=transpose, programs_per_sm=per_sm)
    assert _same(got.data, want.data) and torch.equal(got.scale, want.scale)
    if transpose:
        assert _same(got.data_t, want.data_t) and got.data_t.shape == (G, K, N)
        assert torch.equal(got.scale_t, want.scale_t)


def test_a_negative_program_count_is_refused(device):
    with pytest.raises(ValueError, match="programs_per_sm"):
        quant_weight_128x128(torch.ones(1, 8, 8, device=device), programs_per_sm=-1)


_COMPILE = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_ratchet.kernels.grouped_gemm.weight_quant import _weight_quant_prefetch_kernel as fn
from kernel_ratchet.kernels.offline import resources
consts = dict(BLOCK=128, MANT=3, PRE_ROUND=False, WRITE_T=True, stride_wk=1)
types = {"w_ptr": "*bf16", "q_ptr": "*fp8e4nv", "qt_ptr": "*fp8e4nv", "s_ptr": "*fp32"}
types |= {"fp8_max": "fp32", "eps": "fp32"}
sig = {a: "constexpr" if a in consts else types.get(a, "i32") for a in fn.arg_names}
at = {(fn.arg_names.index(k),): v for k, v in consts.items()}
aligned = ("N", "K", "stride_wg", "stride_wn")
div = [i for i, a in enumerate(fn.arg_names) if a.endswith("_ptr") or a in aligned]
src = ASTSource(fn, sig, at, {(i,): [["tt.divisibility", 16]] for i in div})
r = resources(triton.compile(src, GPUTarget("cuda", 90, 32), {"num_warps": 8}))
print(json.dumps([r.spill_bytes, r.registers]))
"""


@pytest.mark.slow
def test_the_prefetching_kernel_compiles_for_sm90_without_spills():
    """This block and the next (loading) fit 8 warps' registers on sm_90 without spilling."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", _COMPILE], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    spill, regs = json.loads(out.stdout.strip().splitlines()[-1])
    assert spill == 0 and regs <= 255


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
