"""FP8 Linear GEMM (tensorwise, rowwise, blockwise; E4M3/E5M2 gradients) on the interpreter.

FP8 ``tl.dot`` is exact in the Triton interpreter, so these run the real recipe end to end
(quantization kernels + GEMM kernel + autograd) on tiny shapes with small forced blocks and
check the SPEC section 5 thresholds against the fp32 reference of the unquantized inputs.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.correctness import assert_close, check_outputs
from kernel_ratchet.kernels.gemm import adapter as ad
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.fp8 import Fp8Recipe
from kernel_ratchet.kernels.gemm.launch import forced_config
from kernel_ratchet.kernels.gemm.shapes import CPU_SHAPES

SMALL = GemmConfig(32, 32, 128, num_warps=4, num_stages=2)
SPLIT_PERSISTENT = GemmConfig(32, 64, 128, num_warps=4, num_stages=2, persistent=True, split_k=2)
UNROLL2 = GemmConfig(32, 32, 128, num_warps=4, num_stages=2, k_unroll=2)
ADAPTERS = {
    "tensorwise-e4m3": ad.GemmFp8Tensorwise,
    "rowwise-e4m3": ad.GemmFp8Rowwise,
    "blockwise-e4m3": ad.GemmFp8Blockwise,
    "tensorwise-e5m2": ad.GemmFp8TensorwiseE5M2,
    "rowwise-e5m2": ad.GemmFp8RowwiseE5M2,
    "blockwise-e5m2": ad.GemmFp8BlockwiseE5M2,
}
SHAPES = {s.label: s for s in CPU_SHAPES[1:]}  # 50x70x200 (ragged groups), 1x48x130 (M = 1)


def _check(adapter: ad._GemmAdapter, case: ad.GemmCase) -> None:
    got = adapter.outputs(case)
    ref = adapter.reference(case)
    res = check_outputs(got, ref, {k: adapter.threshold(k) for k in ref})
    assert res.passed, f"{res.reason}; snr={res.snr}"


@pytest.mark.parametrize("label", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("name", list(ADAPTERS), ids=list(ADAPTERS))
def test_fp8_recipe_forward_backward(name, label, device):
    adapter = ADAPTERS[name]()
    case = adapter.make_case(SHAPES[label], seed=0, device=device)
    with forced_config(SMALL):
        _check(adapter, case)


@pytest.mark.parametrize("name", ["tensorwise-e4m3", "blockwise-e4m3"])
def test_fp8_split_k_persistent(name, device):
    adapter = ADAPTERS[name]()
    case = adapter.make_case(SHAPES["m50.n70.k200"], seed=1, device=device)
    with forced_config(SPLIT_PERSISTENT):
        _check(adapter, case)


@pytest.mark.parametrize("split_k", [1, 2], ids=["whole-k", "splitk2"])
@pytest.mark.slow
def test_blockwise_two_groups_per_iteration(split_k, device):
    """k_unroll=2 with an odd number of 128-groups (K = 520 -> 5 groups; 3 + 2 when split)."""
    adapter = ad.GemmFp8Blockwise()
    case = adapter.make_case(Shape("m33.n40.k520", M=33, N=40, K=520), seed=3, device=device)
    with forced_config(UNROLL2.with_(split_k=split_k)):
        _check(adapter, case)


@pytest.mark.slow
def test_timed_path_matches_autograd_path(device):
    """forward()/backward() (what the harness times) compute what outputs() checks."""
    adapter = ad.GemmFp8Blockwise()
    case = adapter.make_case(SHAPES["m50.n70.k200"], seed=2, device=device)
    with forced_config(SMALL):
        out = adapter.forward(case)
        da, db = adapter.backward(case)
        got = adapter.outputs(case)
    assert_close({"out": out, "da": da, "db": db}, got, 80.0)


def test_blockwise_rejects_other_k_tiles(device):
    adapter = ad.GemmFp8Blockwise()
    case = adapter.make_case(SHAPES["m50.n70.k200"], seed=0, device=device)
    with forced_config(GemmConfig(32, 32, 64)), pytest.raises(ValueError, match="BLOCK_K"):
        adapter.forward(case)


def test_recipe_validation():
    with pytest.raises(ValueError, match="granularity"):
        Fp8Recipe("channelwise")
    with pytest.raises(ValueError, match="grad_dtype"):
        Fp8Recipe("rowwise", torch.bfloat16)


@pytest.mark.parametrize("grad", [torch.float8_e4m3fn, torch.float8_e5m2], ids=["e4m3", "e5m2"])
def test_blockwise_dual_quantization_changes_no_bit(grad, monkeypatch, device):
    """Where a and dout have 16-byte FP8 rows, the forward and backward quantize them both ways
    in one read and keep FP8 aᵀ instead of a: the output and both gradients are bit for bit
    those of the single-direction passes, and the state holds no 16-bit activation."""
    from kernel_ratchet.kernels.gemm import fp8 as F

    g = torch.Generator().manual_seed(5)
    a = torch.randn(50, 256, generator=g).to(device=device, dtype=torch.bfloat16)
    b = torch.randn(64, 256, generator=g).to(device=device, dtype=torch.bfloat16)
    dout = torch.randn(50, 64, generator=g).to(device=device, dtype=torch.bfloat16)
    recipe = Fp8Recipe("blockwise", grad, dispatch=False)

    def step():
        with forced_config(SMALL):
            out, state = F.gemm_fp8_forward(a, b, recipe)
            return (out, *F.gemm_fp8_backward(dout, state, recipe)), state

    dual, state = step()
    assert {"at", "sat"} <= set(state) and "a" not in state
    assert state["at"].dtype == torch.float8_e4m3fn
    monkeypatch.setattr(F, "dual_ok", lambda t: False)
    single, state = step()
    assert "a" in state and "at" not in state
    for name, x, y in zip(("out", "da", "db"), dual, single, strict=True):
        assert torch.equal(x, y), name


@pytest.mark.parametrize(
    ("n", "k", "dtype"),
    [(256, 384, torch.bfloat16), (208, 160, torch.float32), (200, 136, torch.bfloat16),
     (130, 260, torch.float16), (64, 90, torch.bfloat16)],
    ids=["full-blocks", "aligned-partial", "n-off-16", "both-off-16", "k-off-16"],
)  # fmt: skip
def test_the_blockwise_weight_quantization_writes_the_2d_passs_bits(n, k, dtype, device):
    """Whatever kernel quantizes the Linear's weight, both copies hold the bits of the 2-D
    128x128 pass with 16-byte rows, and the scales are its scales, laid out as its are."""
    from kernel_ratchet.kernels.gemm.fp8 import ALIGN, E4M3, quant_weight_blockwise
    from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128

    g = torch.Generator().manual_seed(n * k)
    w = (torch.randn(n, k, generator=g) * 3).to(device=device, dtype=dtype)
    w[n // 2, k // 3] = 500.0
    got = quant_weight_blockwise(w)
    ref = quant_fp8_block_128x128(w, E4M3, with_transpose=True, align=ALIGN)
    for a, b in ((got.data, ref.data), (got.data_t, ref.data_t)):
        assert a.shape == b.shape and a.stride(0) % ALIGN == 0
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    for a, b in ((got.scale, ref.scale), (got.scale_t, ref.scale_t)):
        assert a.shape == b.shape and a.stride() == b.stride() and torch.equal(a, b)
