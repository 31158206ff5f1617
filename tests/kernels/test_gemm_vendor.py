"""The vendor baselines of the benchmark: scale layouts for cuBLAS's blockwise FP8 and the
quantization that feeds it (CPU), and on the H200 that torch's blockwise ``scaled_mm`` runs and
matches the fp32 reference."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm import vendor as vd
from kernel_ratchet.kernels.gemm.adapter import make_linear_inputs
from kernel_ratchet.kernels.gemm.reference import linear_all_ref
from kernel_ratchet.kernels.gemm.vendor import blockwise_vendor, cublas_blocks, outer_major


@pytest.mark.parametrize("L", [5, 8])
def test_block_scales_are_padded_to_four_groups_and_stored_group_major(L):
    s = torch.arange(3 * L, dtype=torch.float32).reshape(3, L)  # [outer blocks, L]
    got = cublas_blocks(s)
    L4 = -(-L // 4) * 4
    assert got.shape == (L4, 3) and got.stride() == (1, L4)
    assert torch.equal(got[:L].t(), s) and not got[L:].any()
    assert torch.equal(cublas_blocks(s.t().contiguous().t()), got)  # any input strides


def test_row_scales_are_stored_outer_dim_major():
    s = torch.arange(12, dtype=torch.float32).reshape(4, 3)  # [outer, L], row-major
    got = outer_major(s)
    assert got.stride() == (1, 4) and torch.equal(got, s)
    assert outer_major(got) is got  # already outer-dim-major: read in place


def _dequant(q: torch.Tensor, s: torch.Tensor, blocks: bool) -> torch.Tensor:
    """``q`` [R, C] times its scales: 1x128 row groups ``s [R, C/128]`` or 128x128 blocks."""
    R, C = q.shape
    s = s.repeat_interleave(128, dim=1)[:, :C]
    return q.float() * (s.repeat_interleave(128, dim=0)[:R] if blocks else s)


@pytest.mark.parametrize("K,N,dual", [(256, 64, True), (200, 72, False)], ids=["dual", "single"])
def test_blockwise_vendor_is_fed_as_our_recipe_quantizes(K, N, dual, monkeypatch, device):
    """The vendor column quantizes a and dout as the FP8 Linear does (both ways in one read
    where their FP8 rows are 16-byte aligned, one pass per layout elsewhere), and hands each
    GEMM the operands and scales of its product: with cuBLAS replaced by a dequantizing
    matmul, out, da and db meet the E4M3 threshold against the fp32 reference."""
    calls: list[str] = []

    def counted(name, fn):
        def wrap(*args, **kw):
            calls.append(name)
            return fn(*args, **kw)

        monkeypatch.setattr(vd, name, wrap)

    counted("quant_fp8_dual_1x128", vd.quant_fp8_dual_1x128)
    counted("quant_fp8_blockwise_1x128", vd.quant_fp8_blockwise_1x128)

    def block_smm(x, sx, yt, syt, y_blocks):
        return (_dequant(x, sx, False) @ _dequant(yt, syt, y_blocks).t()).to(torch.bfloat16)

    monkeypatch.setattr(vd, "_block_smm", block_smm)
    case = make_linear_inputs(Shape("v", M=96, N=N, K=K), 0, device, torch.bfloat16)
    fwd, bwd = blockwise_vendor(case, torch.float8_e4m3fn)
    calls.clear()
    out = fwd()
    da, db = bwd()
    want = ["quant_fp8_dual_1x128"] * 2 if dual else ["quant_fp8_blockwise_1x128"] * 4
    assert calls == want
    ref = linear_all_ref(case.a, case.b, case.dout)
    for name, got in (("out", out), ("da", da), ("db", db)):
        assert snr_db(got.float(), ref[name].float()) >= 25.0, name


@pytest.mark.gpu
@pytest.mark.parametrize("mnk", [(1024, 1536, 2048), (512, 384, 640)], ids=str)
def test_torch_blockwise_scaled_mm_runs_and_matches_the_reference(mnk):
    """The benchmark's vendor column for blockwise FP8 exists on the H200 (K = 640: 5 k-groups,
    padded to 8 in the 128x128 scales) and meets the E4M3 threshold on output and gradients."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("torch's blockwise FP8 scaled_mm runs on sm_90 only")
    M, N, K = mnk
    case = make_linear_inputs(Shape("v", M=M, N=N, K=K), 0, "cuda", torch.bfloat16)
    fns = blockwise_vendor(case, torch.float8_e4m3fn)
    assert fns is not None, "torch's blockwise scaled_mm was probed and raised"
    fwd, bwd = fns
    out = fwd()
    da, db = bwd()
    ref = linear_all_ref(case.a, case.b, case.dout)
    for name, got in (("out", out), ("da", da), ("db", db)):
        assert snr_db(got.float(), ref[name].float()) >= 25.0, name
