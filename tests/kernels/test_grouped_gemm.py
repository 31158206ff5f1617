"""Grouped GEMM (bf16 and FP8 blockwise): forward + backward against the fp32 reference.

CPU tests run the Triton interpreter on tiny shapes with **fp16** operands for the bf16 path:
the interpreter's ``tl.dot`` on bf16 inputs returns wrong values (fp16/fp32/fp8 are right), so
bf16 itself is only checked on the GPU. GPU tests (``-m gpu``) use the real model dimensions of
every MoE config and every token distribution, including empty groups.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import SNR_BF16, SNR_E4M3
from kernel_ratchet.harness.correctness import assert_close, snr_db
from kernel_ratchet.kernels.grouped_gemm import shapes as S
from kernel_ratchet.kernels.grouped_gemm.adapter import (
    GroupedGemmBf16Adapter,
    GroupedGemmFp8BlockwiseAdapter,
    checked_groups,
    make_grouped_case,
)
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_gemm
from kernel_ratchet.kernels.grouped_gemm.reference import grouped_gemm_ref

ADAPTERS = {
    "bf16": (GroupedGemmBf16Adapter, SNR_BF16),
    "fp8": (GroupedGemmFp8BlockwiseAdapter, SNR_E4M3),
}


def _check(kind: str, shape: S.Shape, device: str, seed: int = 0) -> None:
    cls, thr = ADAPTERS[kind]
    adapter = cls()
    case = adapter.make_case(shape, seed, device)
    got, ref = adapter.outputs(case), adapter.reference(case)
    if shape.M == 0:  # nothing to compare by SNR: shapes and an all-zero weight gradient
        assert got["out"].shape == (0, shape.N) and got["da"].shape == (0, shape.K)
        assert torch.count_nonzero(got["db"]) == 0
        return
    groups = checked_groups(case)
    groups = list(range(shape.B)) if groups is None else groups
    empty = [i for i, g in enumerate(groups) if S.lens_of(shape)[g] == 0]
    if empty:  # an empty group's weight gradient is exactly zero
        assert torch.count_nonzero(got["db"][empty]) == 0
    assert_close(got, ref, thr)


@pytest.mark.parametrize("shape", S.tiny_cpu(), ids=lambda s: s.label)
def test_bf16_path_tiny(shape, device):
    _check("bf16", shape, device)


FP8_TINY = ("tiny_skewed", "odd_empty_edges", "odd_all_small", "odd_all_empty")


@pytest.mark.parametrize(
    "shape", [s for s in S.tiny_cpu() if s.label in FP8_TINY], ids=lambda s: s.label
)
def test_fp8_blockwise_tiny(shape, device):
    _check("fp8", shape, device)


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_a_layer_checked_on_a_few_groups_passes_the_checks_of_its_timed_calls(
    kind, device, monkeypatch
):
    """A real MoE layer's weight gradient is checked on a few groups (``checked_groups``) while
    the timed backward returns all of them: the checks of the timed calls must compare the same
    few groups. Every shape of a grouped campaign's baseline on the H200 failed this (db: SNR
    -inf dB) while they compared the whole gradient with the few groups' reference."""
    from kernel_ratchet.harness.runtime import run_shape
    from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine
    from kernel_ratchet.kernels.grouped_gemm import adapter as grouped_adapter

    monkeypatch.setattr(grouped_adapter, "FULL_DW_CHECK_LIMIT", 1)  # any layer is "large"
    shape = S.explicit_shape("few_groups", [16, 0, 40, 8], N=64, K=128)
    cls, _ = ADAPTERS[kind]
    groups = checked_groups(cls().make_case(shape, 0, device))
    assert groups is not None and len(groups) < shape.B
    engine = PerfCounterEngine(warmup=1, samples=2, min_sample_ms=0.0, max_batch=1)
    r = run_shape(cls(), shape, engine, seed=0, device=device)
    assert r.passed, r.reason
    assert r.bwd is not None and set(r.snr) == {"out", "da", "db"}


def test_int64_group_lens_and_forward_only(device):
    shape = S.explicit_shape("lens64", [3, 0, 17], N=32, K=64)
    case = make_grouped_case(shape, 1, device)
    with torch.no_grad():
        out = grouped_gemm(case.x, case.w, case.group_lens.to(torch.int64))
    ref = GroupedGemmBf16Adapter().reference(case)["out"]
    assert_close({"out": out}, {"out": ref}, SNR_BF16)


def test_rejects_bad_group_lens(device):
    x = torch.zeros(4, 16, device=device)
    w = torch.zeros(2, 8, 16, device=device)
    with pytest.raises(ValueError, match="group_lens"):
        grouped_gemm(x, w, torch.tensor([4], dtype=torch.int32, device=device))
    with pytest.raises(ValueError, match="int32 or int64"):
        grouped_gemm(x, w, torch.tensor([2.0, 2.0], device=device))


def test_a_reference_in_the_operands_precision_stays_far_above_the_bf16_threshold():
    """The GPU spot checks' reference (the same per-group products in bf16, fp32 accumulation)
    against the fp32 one on ragged groups with an empty one: each output at least 10 dB above
    the bf16 threshold, so a correct result passes against either."""
    g = torch.Generator().manual_seed(5)
    lens = torch.tensor([0, 40, 3, 85], dtype=torch.int32)
    T, N, K = int(lens.sum()), 96, 200
    x = torch.randn(T, K, generator=g).to(torch.bfloat16)
    w = (torch.randn(4, N, K, generator=g) / K**0.5).to(torch.bfloat16)
    dout = torch.randn(T, N, generator=g).to(torch.bfloat16)
    exact = grouped_gemm_ref(x, w, lens, dout, dw_groups=[1, 3])
    low = grouped_gemm_ref(x, w, lens, dout, dtype=torch.bfloat16, dw_groups=[1, 3])
    for name in ("out", "dx", "dw"):
        assert low[name].dtype == torch.bfloat16 and low[name].shape == exact[name].shape
        assert snr_db(low[name].float(), exact[name]) >= SNR_BF16 + 10, name


# ---------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.gpu_memory  # DeepSeek-V3's layer, with fp32 references
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_the_spot_reference_judges_a_layer_as_the_reference_does(kind):
    """On the GPU the spot checks compare with products in bf16: within 45 dB of the fp32
    reference on a real layer (few checked groups of the weight gradient), and the kernel's
    outputs pass its threshold against both."""
    shape = [s for s in S.moe_test_gpu() if s.label == "dsv3_gate_up_skewed"][0]
    cls, thr = ADAPTERS[kind]
    adapter = cls()
    case = adapter.make_case(shape, 0, "cuda")
    got = adapter.outputs(case)  # the weight gradient on the checked groups
    ref, spot = adapter.reference(case), adapter.spot_reference(case)
    for name in ("out", "da", "db"):
        assert spot[name].dtype == torch.bfloat16 and spot[name].shape == ref[name].shape
        assert snr_db(spot[name].float(), ref[name]) >= 45.0, name
    assert_close(got, spot, thr)
    assert_close(got, ref, thr)


@pytest.mark.gpu
@pytest.mark.gpu_memory  # DeepSeek-V3's layer: tens of GB with its gradients
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
@pytest.mark.parametrize("shape", S.moe_test_gpu() + S.odd_shapes(), ids=lambda s: s.label)
def test_moe_shapes_gpu(kind, shape, device):
    _check(kind, shape, device)


@pytest.mark.gpu
@pytest.mark.gpu_memory  # a 14 GB case
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_no_host_sync_in_forward(kind):
    """The forward hot path never synchronizes with the host (no .item()/.tolist()/nonzero)."""
    shape = [s for s in S.moe_test_gpu() if s.label == "dsv3_gate_up_skewed"][0]
    cls, _ = ADAPTERS[kind]
    adapter = cls()
    case = adapter.make_case(shape, 0, "cuda")
    # compile outside the checked region, and let the caching allocator hold the backward's
    # blocks too: a fresh allocation that finds the GPU's memory held (by other processes of
    # the test run) frees cached blocks first, which synchronizes
    adapter.forward(case)
    adapter.backward(case)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.no_grad():
            for _ in range(2):
                adapter.op(case.x, case.w, case.group_lens)
        adapter.forward(case)
        adapter.backward(case)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_weight_quant_matches_kernel_py_per_group(device):
    """The 3-D, 64-bit-indexed 128x128 weight quantization = quant.launch's 2-D one per group."""
    from kernel_ratchet.kernels.grouped_gemm.fp8 import quant_weight_128x128
    from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128

    w = (torch.randn(3, 200, 300, device=device) * 4).to(torch.bfloat16)
    q = quant_weight_128x128(w)
    assert q.scale.shape == (3, 2, 3)
    for g in range(3):
        ref = quant_fp8_block_128x128(w[g])
        assert torch.equal(q.data[g].view(torch.uint8), ref.data.view(torch.uint8))
        assert torch.equal(q.scale[g], ref.scale)


def test_split_tail_falls_back_when_it_does_not_fit():
    """A split-tail variant that runs out of shared memory is relaunched without it, once."""
    from triton.runtime.errors import OutOfResources

    from kernel_ratchet.kernels.grouped_gemm import launch as K
    from kernel_ratchet.kernels.grouped_gemm.configs import TileConfig

    calls = []

    class FakeKernel:
        __name__ = "fake_kernel"

        def __getitem__(self, grid):
            def launch(*args, SPLIT_TAIL, **kwargs):
                calls.append(SPLIT_TAIL)
                if SPLIT_TAIL:
                    raise OutOfResources(300000, 232448, "shared memory")

            return launch

    cfg = TileConfig(128, 256, 64, split_tail=True)
    with pytest.warns(RuntimeWarning, match="split-tail"):
        K.launch_split_tail(FakeKernel(), (1,), cfg)
    K.launch_split_tail(FakeKernel(), (1,), cfg)
    assert calls == [True, False, False]
