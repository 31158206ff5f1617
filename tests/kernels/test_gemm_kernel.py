"""Dense 16-bit GEMM: kernel, autograd wrapper, configs and shape sets (CPU interpreter).

The Triton 3.6 interpreter computes ``tl.dot`` of **bf16** operands wrongly (garbage), while
fp16, fp32 and fp8 are right, so the CPU tests of the 16-bit path run fp16; the GPU tests in
``test_gemm_gpu.py`` run bf16. Block sizes are forced small (``forced_config``) to keep the
interpreter fast.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import SNR_BF16, Shape
from kernel_ratchet.harness.correctness import assert_close
from kernel_ratchet.kernels.gemm import configs, shapes
from kernel_ratchet.kernels.gemm.adapter import GemmFp16
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.launch import (
    forced_config,
    gemm,
    gemm_backward,
    matmul,
)
from kernel_ratchet.kernels.gemm.operands import stride_align
from kernel_ratchet.kernels.gemm.reference import linear_all_ref

SMALL = {
    "plain": GemmConfig(32, 32, 32, num_warps=4, num_stages=2),
    "persistent": GemmConfig(32, 32, 32, num_warps=4, num_stages=2, persistent=True),
    "splitk2": GemmConfig(16, 32, 32, group_m=1, num_warps=4, num_stages=2, split_k=2),
}
CPU_SHAPES = {s.label: s for s in shapes.CPU_SHAPES}


@pytest.mark.parametrize("cfg", list(SMALL), ids=list(SMALL))
@pytest.mark.parametrize("label", list(CPU_SHAPES), ids=list(CPU_SHAPES))
def test_fp16_forward_backward(label, cfg, device):
    shape = CPU_SHAPES[label]
    ad = GemmFp16()
    case = ad.make_case(shape, seed=1, device=device)
    with forced_config(SMALL[cfg]):
        out = gemm(case.a, case.b)
        da, db = gemm_backward(case.dout, case.a, case.b)
    assert out.dtype == torch.float16 and out.shape == (shape.M, shape.N)
    assert_close({"out": out, "da": da, "db": db}, ad.reference(case), SNR_BF16)


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter test (CPU machines)")
def test_warp_specialized_loop_computes_the_same_in_the_interpreter():
    """``warp_specialize`` only annotates the k-loop: same results (interpreter only; on a
    GPU it is measured with ``tune --only probes`` before any shipped config uses it, so the
    campaigns' focused tests do not depend on how Triton lowers it)."""
    shape = CPU_SHAPES["m50.n70.k200"]
    ad = GemmFp16()
    case = ad.make_case(shape, seed=4, device="cpu")
    got = {}
    for ws in (False, True):
        with forced_config(SMALL["plain"].with_(warp_specialize=ws)):
            got[ws] = (gemm(case.a, case.b), *gemm_backward(case.dout, case.a, case.b))
    for plain, spec in zip(got[False], got[True], strict=True):
        assert torch.equal(plain, spec)


def test_autograd_function_through_adapter(device):
    """The adapter's outputs() runs GemmFunction forward + backward (the training path)."""
    ad = GemmFp16()
    case = ad.make_case(CPU_SHAPES["m50.n70.k200"], seed=2, device=device)
    with forced_config(SMALL["plain"]):
        got = ad.outputs(case)
    assert_close(got, ad.reference(case), ad.threshold("out"))


def test_fp32_operands(device):
    """fp32 inputs go through the same kernel (tl.dot uses TF32 on the GPU: 16-bit accuracy)."""
    g = torch.Generator(device="cpu").manual_seed(3)
    a = torch.randn(40, 96, generator=g).to(device)
    b = torch.randn(24, 96, generator=g).to(device)
    with forced_config(SMALL["plain"]):
        out = matmul(a, b, out_dtype=torch.float32)
    d = torch.randn(40, 24, generator=g).to(device)
    assert_close({"out": out}, {"out": linear_all_ref(a, b, d)["out"]}, SNR_BF16)


def test_contraction_mismatch_is_an_error():
    with pytest.raises(ValueError, match="contraction mismatch"):
        matmul(torch.zeros(4, 8), torch.zeros(4, 16))


@pytest.mark.parametrize(
    "mnk,bucket",
    [
        ((16384, 59136, 8192), "large"),
        ((1, 4096, 4096), "tiny"),
        ((128, 128, 16384), "long_k"),
        ((257, 4608, 3584), "medium"),
        ((100, 8192, 1000), "skinny"),
        ((7, 3584, 3584), "tiny"),
        ((1000, 1000, 2000), "medium"),
        ((4097, 3000, 2000), "large"),
        ((4096, 6144, 4096), "large"),
    ],
    ids=["model", "m1", "longk", "m257", "m100", "m7", "m1000", "m4097", "grid"],
)
def test_bucket_for(mnk, bucket):
    assert configs.bucket_for(*mnk) == bucket


def test_config_table_is_complete():
    buckets = {"tiny", "skinny", "long_k", "medium", "large"}
    for kind, table in configs.CONFIGS.items():
        assert set(table) == buckets, kind
    assert all(c.block_k == 128 for c in configs.CONFIGS["fp8_block"].values())
    with pytest.raises(KeyError, match="known"):
        configs.config_for("fp4", 1, 1, 1)


def test_an_unsplit_config_replaces_the_bucket_config_only_where_it_would_split_k(monkeypatch):
    small = GemmConfig(64, 64, 128, num_warps=4, num_stages=4, use_tma=True)
    monkeypatch.setitem(configs.UNSPLIT_INSTEAD, "bf16", {"skinny": small})
    monkeypatch.setitem(configs.UNSPLIT_INSTEAD, "bf16_bwd", {"skinny": small})
    monkeypatch.setitem(configs.UNSPLIT_MAX_K, "bf16", {})
    monkeypatch.setitem(configs.UNSPLIT_MAX_K, "bf16_bwd", {"skinny": 8192})
    skinny = configs.CONFIGS["bf16"]["skinny"]
    assert skinny.split_k > 1 and configs.bucket_for(64, 4096, 4096) == "skinny"
    # 32 tiles of 64 x 128 on 132 SMs would split K; 112 tiles (N = 14336) would not
    assert configs.config_for("bf16", 64, 4096, 4096) == small
    assert configs.config_for("bf16", 64, 4096, 14336) == small  # no bound on K
    assert configs.config_for("bf16", 64, 14336, 4096) == skinny
    # bounded: K of 4096 takes it, a K of 14336 keeps the split
    bwd = configs.CONFIGS["bf16_bwd"]["skinny"]
    assert configs.config_for("bf16_bwd", 64, 4096, 4096) == small
    assert configs.config_for("bf16_bwd", 64, 4096, 14336) == bwd
    assert configs.config_for("bf16", 4096, 6144, 4096) == configs.CONFIGS["bf16"]["large"]


def test_a_few_rows_config_replaces_the_bucket_config_up_to_its_row_bound(monkeypatch):
    rows16 = GemmConfig(16, 64, 128, num_warps=4, num_stages=6, use_tma=True)
    monkeypatch.setitem(configs.FEW_ROWS_INSTEAD, "bf16", {"tiny": rows16})
    monkeypatch.setitem(configs.FEW_ROWS_MAX_M, "bf16", {"tiny": 32})
    monkeypatch.setitem(configs.FEW_ROWS_INSTEAD, "bf16_bwd", {})
    tiny = configs.CONFIGS["bf16"]["tiny"]
    assert configs.config_for("bf16", 1, 4096, 4096) == rows16
    assert configs.config_for("bf16", 32, 4100, 1000) == rows16
    assert configs.config_for("bf16", 33, 4100, 1000) == tiny  # three 16-row tiles: not it
    assert configs.config_for("bf16", 100, 1000, 1000) == tiny
    assert configs.config_for("bf16_bwd", 1, 4096, 4096) == configs.CONFIGS["bf16_bwd"]["tiny"]
    assert configs.config_for("bf16", 16, 4096, 14336) == rows16  # any K in the bucket


def test_the_search_optimizer_sees_the_configs_that_run_instead():
    from pathlib import Path

    from kernel_ratchet.knobs.tunables import parse_tunables

    entries = parse_tunables(Path(configs.__file__).read_text()).entries
    for table in ("SPLIT_K_INSTEAD", "UNSPLIT_INSTEAD", "FEW_ROWS_INSTEAD"):
        for kind, by_bucket in getattr(configs, table).items():
            assert {f"{table}/{kind}/{b}" for b in by_bucket} <= set(entries)


def test_model_shapes_are_generated_and_deduplicated():
    got = shapes.model_shapes()
    keys = [(s.M, s.N, s.K) for s in got]
    assert len(keys) == len(set(keys)) == 51  # 17 distinct (N, K) x micro-batch {1, 2, 4}
    assert len({s.label for s in got}) == len(got)
    assert {s.M for s in got} == {4096, 8192, 16384}
    by_label = {s.label: s for s in got}
    assert by_label["llama3.1-8b.qkv.mb1"] == Shape("llama3.1-8b.qkv.mb1", 4096, 6144, 4096)
    assert by_label["qwen2.5-72b.gate_up.mb4"].N == 2 * 29568
    assert "mistral-7b.qkv.mb1" not in by_label  # identical to Llama-3.1-8B's
    assert all(s.M >= 8192 for s in shapes.model_shapes_large_m())


def test_odd_shapes_are_odd():
    assert any(s.M == 1 for s in shapes.ODD_SHAPES)
    assert any(s.K % 16 for s in shapes.ODD_SHAPES)
    assert any(s.N % 128 and s.M % 16 for s in shapes.ODD_SHAPES)


@pytest.mark.parametrize(
    "tma,stride,want",
    [
        (True, 1000, 1),
        (False, 4096, 1),
        (False, 1000, 8),
        (False, 4100, 4),
        (False, 4097, 1),
        (False, 70, 2),
        (False, 0, 1),
    ],
)
def test_stride_align_is_the_largest_power_of_two_below_16(tma, stride, want):
    assert stride_align(tma, stride) == want


@pytest.mark.parametrize(
    "tiles,k_tiles,want",
    [(128, 80, 1), (2, 256, 32), (64, 64, 2), (8, 8, 2), (40, 1000, 3), (70, 100, 1)],
    ids=["fills", "longk", "half", "short-k", "third", "over-half"],
)
def test_split_k_fills_one_wave_at_most(tiles, k_tiles, want):
    """Split only a grid under half the SMs, into slices that fit one wave of 132."""
    cfg = GemmConfig(split_k=32)
    assert configs.split_for(cfg, tiles, k_tiles, 132) == want
    assert configs.split_for(cfg.with_(split_k=1), tiles, k_tiles, 132) == 1


def test_launch_plan_is_computed_once_per_geometry(device):
    """The second call of one geometry reuses the plan; a forced config is its own geometry."""
    from kernel_ratchet.kernels.gemm import launch

    g = torch.Generator(device="cpu").manual_seed(7)
    a = torch.randn(24, 130, generator=g).to(device, torch.float16)
    b = torch.randn(40, 130, generator=g).to(device, torch.float16)
    launch._plan.cache_clear()
    with forced_config(SMALL["plain"]):
        first = matmul(a, b)
        again = matmul(a.clone(), b.clone())
    info = launch._plan.cache_info()
    assert (info.misses, info.hits) == (1, 1) and torch.equal(first, again)
    with forced_config(SMALL["splitk2"]):
        split = matmul(a, b)
    assert launch._plan.cache_info().misses == 2
    assert_close({"out": split}, {"out": first.float()}, SNR_BF16)
