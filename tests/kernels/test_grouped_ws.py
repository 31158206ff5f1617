"""The warp-specialized grouped FP8 GEMM (Gluon, sm_90): offline compiles on any machine, the
launch's arguments against the kernel's signature, the routing, and results on the H200 against
the Triton grouped kernel (``pytest -m gpu``)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from triton.experimental.gluon import language as gl

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm import fp8 as F
from kernel_ratchet.kernels.grouped_gemm import fp8_ws_launch as ws
from kernel_ratchet.kernels.grouped_gemm.fp8_ws import _grouped_fp8_ws_kernel
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES, Resources
from kernel_ratchet.kernels.quant.launch import quant_fp8_blockwise_1x128
from tests.kernels.ws_helpers import (
    LaunchRecorder,
    assert_unspilled_and_pipelined,
    compiled_in_a_fresh_process,
)

E4M3 = torch.float8_e4m3fn


@functools.lru_cache(maxsize=1)
def _resources() -> list[Resources]:
    """Both modes, then the paired mode with TMA stores on 4 and 5 stages, compiled natively
    in a process of their own."""
    calls = [{"mode": m} for m in (0, 1)]
    calls += [{"mode": 1, "stages": s, "tma_store": True} for s in (4, 5)]
    return compiled_in_a_fresh_process("kernel_ratchet.kernels.grouped_gemm.fp8_ws_launch", calls)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [0, 1], ids=["single", "paired"])
def test_the_kernel_compiles_for_sm90_unspilled_and_pipelined(mode):
    res = _resources()[mode]
    assert_unspilled_and_pipelined(res)
    assert res.shared_bytes >= 6 * (128 + 128) * 128  # six stages of A and B
    assert SM90_SHARED_BYTES - res.shared_bytes > 0


@pytest.mark.slow
@pytest.mark.parametrize("stages", [4, 5])
def test_the_tma_store_variant_compiles_for_sm90_with_its_staging(stages):
    """Two 64 x 128 bf16 staging buffers (32 KiB) beside the ring, no spill, wgmmas async."""
    res = _resources()[2 + (stages - 4)]
    assert_unspilled_and_pipelined(res)
    assert res.shared_bytes >= stages * (128 + 128) * 128 + 2 * 64 * 128 * 2


def test_a_launch_passes_every_parameter_of_the_kernel(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_fp8_ws_kernel", rec)
    T, G, N, K = 300, 5, 256, 384
    a, b = torch.zeros(T, K, dtype=E4M3), torch.zeros(G, N, K, dtype=E4M3)
    sa, sb = torch.ones(3, T).t(), torch.ones(G, 2, 3)
    lens = torch.tensor([0, 100, 1, 0, 199], dtype=torch.int32)
    out = ws.grouped_mm_fp8_ws(a, sa, b, sb, lens, stages=5, group_m=4, mode=0, num_sms=7)
    assert out.shape == (T, N) and out.dtype == torch.bfloat16
    ((grid, args, kw),) = rec.calls
    assert grid == (7,)
    assert args[5] is lens and args[6:] == (G, N, K, N, 1, T, 6, 3, 1)
    assert kw == {**ws._constexprs(8, 128, 4, 5, 7, 0), **ws.OPTIONS}
    names = _grouped_fp8_ws_kernel.arg_names
    assert len(args) + len(set(kw) - set(ws.OPTIONS)) == len(names)
    assert sorted(set(kw) - set(ws.OPTIONS)) == sorted(names[len(args) :])


@pytest.mark.parametrize(
    ("N", "stored_by_tma"), [(256, True), (200, True), (100, False)], ids=["n256", "n200", "n100"]
)
def test_a_tma_store_launch_takes_the_staging_where_the_output_rows_allow(
    monkeypatch, N, stored_by_tma
):
    """Rows of 16-byte multiples get the TMA store's constexprs (its staging layout in the
    output's dtype); other rows keep the masked stores, the same kernel as without it."""
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_fp8_ws_kernel", rec)
    T, G, K = 300, 5, 384
    a, b = torch.zeros(T, K, dtype=E4M3), torch.zeros(G, N, K, dtype=E4M3)
    sa, sb = torch.ones(3, T).t(), torch.ones(G, 2, 3)
    lens = torch.tensor([0, 100, 1, 0, 199], dtype=torch.int32)
    ws.grouped_mm_fp8_ws(a, sa, b, sb, lens, num_sms=7, tma_store=True)
    ((_, _, kw),) = rec.calls
    assert kw["TMA_STORE"] is stored_by_tma
    if stored_by_tma:
        assert kw["C_LAYOUT"] == gl.NVMMASharedLayout.get_default_for([64, 128], gl.bfloat16)
    else:
        assert kw == {**ws._constexprs(8, 128, 8, 6, 7, 1), **ws.OPTIONS}


def test_a_tma_store_bucket_asks_the_launcher_for_it(monkeypatch, device):
    """``TileConfig.tma_store`` on a ``gluon_ws`` bucket reaches the warp-specialized launch."""
    seen = {}
    monkeypatch.setattr(ws, "supported", lambda *a: True)
    monkeypatch.setattr(ws, "grouped_mm_fp8_ws", lambda *a, **kw: seen.update(kw))
    lens = torch.tensor([3, 5], dtype=torch.int32, device=device)
    x = quant_fp8_blockwise_1x128(torch.randn(8, 128, device=device))
    w = F.quant_weight_128x128(torch.randn(2, 128, 128, device=device))
    for store in (0, 1):
        cfg = dataclasses.replace(configs.BUCKETS["fp8_mm_large"], gluon_ws=True, tma_store=store)
        F.grouped_mm_fp8(x, w, lens, config=cfg)
        assert seen["tma_store"] is bool(store)


def test_supported_needs_an_sm90_gpu():
    a, b = torch.zeros(256, 256, dtype=E4M3), torch.zeros(4, 256, 256, dtype=E4M3)
    assert not ws.supported(a, b, 128)  # CPU tensors


def test_a_ws_bucket_where_the_kernel_does_not_apply_runs_the_triton_kernel(device):
    """On the CPU (and anywhere ``supported`` says no) a bucket asking for the WS kernel gets
    the Triton kernel with its tile, bit for bit."""
    g = torch.Generator().manual_seed(5)
    lens = torch.tensor([0, 37, 1, 0, 50], dtype=torch.int32, device=device)
    x = torch.randn(88, 48, generator=g).to(device)
    w = torch.randn(5, 160, 48, generator=g).to(device)
    xq, wq = quant_fp8_blockwise_1x128(x), F.quant_weight_128x128(w)
    base = configs.INTERP_FP8
    if device == "cuda":
        pytest.skip("on a GPU the WS kernel applies: see the GPU test")
    same = F.grouped_mm_fp8(xq, wq, lens, config=dataclasses.replace(base, gluon_ws=True))
    assert torch.equal(same, F.grouped_mm_fp8(xq, wq, lens, config=base))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "lens",
    [[0, 37, 1, 0, 50], [700, 0, 129, 1024, 255, 64], [4096] * 8, [1] * 64 + [3000]],
    ids=["tiny-ragged", "ragged", "uniform", "many-small-one-large"],
)
@pytest.mark.parametrize("nk", [(256, 384), (160, 256), (1408, 2048)], ids=str)
@pytest.mark.parametrize(
    ("mode", "tma_store"), [(0, False), (1, False), (1, True)], ids=["single", "paired", "tma-st"]
)
def test_matches_the_triton_kernel_forward_and_dgrad_on_gpu(lens, nk, mode, tma_store):
    N, K = nk
    G, T = len(lens), sum(lens)
    g = torch.Generator(device="cuda").manual_seed(T + N + K)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g)
    dout = torch.randn(T, N, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16, generator=g) / K**0.5
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    wq = F.quant_weight_128x128(w, transpose=True)
    xq = quant_fp8_blockwise_1x128(x, E4M3, align=16)
    dq = quant_fp8_blockwise_1x128(dout, E4M3, align=16)
    triton_cfg = dataclasses.replace(configs.BUCKETS["fp8_mm_large"], gluon_ws=False)
    for a, b in ((xq, wq), (dq, F.Fp8Quantized(wq.data_t, wq.scale_t))):
        if not ws.supported(a.data, b.data, 128):
            pytest.skip("rows not 16-byte aligned: the Triton kernel runs this shape")
        out = ws.grouped_mm_fp8_ws(
            a.data, a.scale, b.data, b.scale, lens_t, mode=mode, tma_store=tma_store
        )
        ref = F.grouped_mm_fp8(a, b, lens_t, config=triton_cfg)
        assert not out.isnan().any()
        assert snr_db(out, ref) > 45.0  # the same quantized operands: accumulation order only
    routed = F.grouped_mm_fp8(xq, wq, lens_t, config=dataclasses.replace(triton_cfg, gluon_ws=True))
    assert snr_db(routed, F.grouped_mm_fp8(xq, wq, lens_t, config=triton_cfg)) > 45.0


@pytest.mark.gpu
@pytest.mark.parametrize("tma_store", [False, True], ids=["masked-st", "tma-st"])
def test_repeated_fp8_calls_of_one_geometry_compute_each_calls_product_on_gpu(tma_store):
    """Whatever the launcher keeps from a geometry's first call, later calls compute their own
    product: new routing over the same tokens (group_lens), new values at new addresses, and
    new values written into the same tensors."""
    G, N, K, T = 6, 256, 384, 2172
    g = torch.Generator(device="cuda").manual_seed(11)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16, generator=g) / K**0.5
    wq = F.quant_weight_128x128(w, transpose=True)
    triton_cfg = dataclasses.replace(configs.BUCKETS["fp8_mm_large"], gluon_ws=False)
    xq = quant_fp8_blockwise_1x128(
        torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g), E4M3, align=16
    )
    routings = [[700, 0, 129, 1024, 255, 64], [64, 255, 1024, 129, 0, 700], [362] * 6]
    for i, lens in enumerate(routings):
        lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
        if i == 2:  # new values, same tensors
            fresh = quant_fp8_blockwise_1x128(
                torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g), E4M3, align=16
            )
            xq.data.copy_(fresh.data)
            xq.scale.copy_(fresh.scale)
        out = ws.grouped_mm_fp8_ws(
            xq.data, xq.scale, wq.data, wq.scale, lens_t, tma_store=tma_store
        )
        ref = F.grouped_mm_fp8(xq, wq, lens_t, config=triton_cfg)
        assert snr_db(out, ref) > 45.0, f"call {i} (routing {lens})"
        if i == 0:  # new values at new addresses for the next call
            xq = quant_fp8_blockwise_1x128(
                torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g), E4M3, align=16
            )
