"""The warp-specialized FP8 weight gradient of the grouped GEMM (Gluon, sm_90): the offline
compile, the launch's arguments, which operands it takes, the step's routing, and results on
the GPU against the Triton weight-gradient kernel (``pytest -m gpu``)."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm import fp8 as F
from kernel_ratchet.kernels.grouped_gemm import wgrad_fp8_ws_launch as ws
from kernel_ratchet.kernels.grouped_gemm.wgrad_fp8_ws import _wgrad_fp8_ws_kernel
from kernel_ratchet.kernels.quant.launch import Fp8Quantized
from tests.kernels.ws_helpers import (
    LaunchRecorder,
    assert_unspilled_and_pipelined,
    compiled_in_a_fresh_process,
)

E4M3 = torch.float8_e4m3fn


def _cols(rows: int, chunks: int) -> Fp8Quantized:
    """A column-wise copy laid out as ``quant_fp8_dual_1x128_grouped`` writes it: ``[rows,
    chunks * 128]`` FP8, scales ``[rows, chunks]`` stored chunk-major."""
    return Fp8Quantized(torch.zeros(rows, chunks * 128, dtype=E4M3), torch.ones(chunks, rows).t())


@pytest.mark.slow
def test_the_kernel_compiles_for_sm90_unspilled_and_pipelined():
    calls = [{"stages": 4, "groups": ws.MAX_GROUPS}, {"stages": 5, "groups": ws.MAX_GROUPS}]
    for res in compiled_in_a_fresh_process(
        "kernel_ratchet.kernels.grouped_gemm.wgrad_fp8_ws_launch", calls
    ):
        assert_unspilled_and_pipelined(res)


def test_a_launch_passes_every_parameter_of_the_kernel(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_wgrad_fp8_ws_kernel", rec)
    G, N, K, chunks = 5, 256, 384, 9
    dyt, xt = _cols(N, chunks), _cols(K, chunks)
    lens = torch.tensor([0, 300, 1, 0, 500], dtype=torch.int32)
    dw = ws.grouped_wgrad_fp8_ws(dyt, xt, lens, stages=5, group_m=4, num_sms=7)
    assert dw.shape == (G, N, K) and dw.dtype == torch.bfloat16
    ((grid, args, kw),) = rec.calls
    assert grid == (7,)  # min(SMs, 5 groups x 2 n tiles x 3 k tiles)
    a_desc, b_desc, sb_desc, c_desc = args[:4]
    assert list(a_desc.shape) == [N, chunks * 128] and list(a_desc.block_shape) == [64, 128]
    assert list(b_desc.shape) == [K, chunks * 128] and list(b_desc.block_shape) == [128, 128]
    assert list(sb_desc.shape) == [chunks, K] and list(sb_desc.block_shape) == [1, 128]
    assert list(c_desc.shape) == [G * N, K] and c_desc.base.data_ptr() == dw.data_ptr()
    assert args[4] is dyt.scale and args[5] is lens and args[6:] == (G, N, K, 1, N)
    assert kw == {**ws._constexprs(G, 128, 4, 5, 7), **ws.dense.OPTIONS}
    names = _wgrad_fp8_ws_kernel.arg_names
    assert sorted(set(kw) - set(ws.dense.OPTIONS)) == sorted(names[len(args) :])


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        ({}, True),
        ({"N": 192}, False),  # a 128-row tile would reach into the next group's rows of dW
        ({"K": 260}, False),  # output rows of 520 bytes
        ({"groups": 0}, False),
        ({"groups": 257}, False),  # the schedule's vectors would spill
        ({"out": torch.float32}, False),
        ({"x_rowmajor": True}, False),  # a chunk's X scales are not one contiguous row
    ],
    ids=[
        "as-quantized",
        "n-off-128",
        "k-off-8",
        "no-groups",
        "many-groups",
        "fp32-out",
        "x-scales-rowmajor",
    ],
)
def test_the_kernel_takes_the_grouped_column_copies_and_nothing_else(change, ok):
    N, K = change.get("N", 256), change.get("K", 384)
    dyt, xt = _cols(N, 6), _cols(K, 6)
    if change.get("x_rowmajor"):
        xt = Fp8Quantized(xt.data, torch.ones(K, 6))
    groups, out = change.get("groups", 4), change.get("out", torch.bfloat16)
    assert ws.operands_ok(dyt, xt, groups, out) is ok
    assert not ws.supported(dyt, xt, groups, out)  # CPU tensors


def test_the_step_routes_the_weight_gradient_only_where_its_config_is_set(monkeypatch):
    """The WS kernel runs a weight gradient over each group's own chunks where
    ``WGRAD_FP8_WS`` is set and no config is forced; everything else the Triton kernel."""
    calls, triton_kernel = [], LaunchRecorder()
    monkeypatch.setattr(ws, "supported", lambda *a: True)
    monkeypatch.setattr(ws, "grouped_wgrad_fp8_ws", lambda *a, **kw: calls.append(kw) or "ws")
    monkeypatch.setattr(F, "_grouped_wgrad_fp8_kernel", triton_kernel)
    dyt, xt, lens = _cols(256, 4), _cols(128, 4), torch.tensor([100, 200], dtype=torch.int32)
    cfg = configs.TileConfig(128, 128, 128, GROUP_M=4, num_warps=4, num_stages=3, gluon_ws=True)
    monkeypatch.setattr(configs, "WGRAD_FP8_WS", cfg)
    assert F.grouped_wgrad_fp8(dyt, xt, lens, group_chunks=True) == "ws"
    # the persistent grid is the launchers' SM count (a census stands in for it)
    want = dict(out_dtype=torch.bfloat16, block_n=128, stages=3, group_m=4)
    assert calls == [{**want, "num_sms": F.num_programs(dyt.data.device)}]
    F.grouped_wgrad_fp8(dyt, xt, lens, group_chunks=True, config=configs.INTERP_FP8)
    F.grouped_wgrad_fp8(dyt, xt, lens, group_chunks=False)  # chunks shared by groups
    monkeypatch.setattr(configs, "WGRAD_FP8_WS", None)
    F.grouped_wgrad_fp8(dyt, xt, lens, group_chunks=True)
    assert len(calls) == 1 and len(triton_kernel.calls) == 3


@pytest.mark.gpu
@pytest.mark.parametrize(
    "lens",
    [[0, 37, 1, 0, 50], [700, 0, 129, 1024, 255, 64], [4096] * 8, [1] * 64 + [3000]],
    ids=["tiny-ragged", "ragged", "uniform", "many-small-one-large"],
)
@pytest.mark.parametrize("nk", [(256, 384), (1408, 2048), (128, 200)], ids=str)
def test_matches_the_triton_weight_gradient_on_gpu(lens, nk):
    """Empty groups, odd and even chunk counts, partial k tiles: the same quantized operands
    as the Triton kernel's, so only the accumulation order differs. The unwritten capacity
    after the last group's chunks holds NaN, as uninitialized memory may: no kernel reads it."""
    from kernel_ratchet.kernels.quant.dual_grouped import quant_fp8_dual_1x128_grouped

    N, K = nk
    G, T = len(lens), sum(lens)
    g = torch.Generator(device="cuda").manual_seed(T + N + K)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g)
    dout = torch.randn(T, N, device="cuda", dtype=torch.bfloat16, generator=g)
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    _, xt = quant_fp8_dual_1x128_grouped(x, lens_t, E4M3)
    _, dyt = quant_fp8_dual_1x128_grouped(dout, lens_t, E4M3)
    used = sum((n + 127) // 128 for n in lens)
    for cols in (xt, dyt):  # the capacity past the last group's chunks is never written
        cols.data.view(torch.uint8)[:, used * 128 :] = 0x7F  # E4M3 NaN
        cols.scale[:, used:] = float("nan")
    assert ws.supported(dyt, xt, G, torch.bfloat16)
    out = ws.grouped_wgrad_fp8_ws(dyt, xt, lens_t)
    ref = F.grouped_wgrad_fp8(
        dyt, xt, lens_t, group_chunks=True, config=configs.BUCKETS["fp8_wgrad"]
    )
    assert not out.isnan().any()
    empty = [i for i, n in enumerate(lens) if n == 0]
    assert torch.count_nonzero(out[empty]) == 0
    assert snr_db(out, ref) > 45.0


@pytest.mark.gpu
def test_repeated_calls_of_one_geometry_compute_each_calls_product_on_gpu():
    """Later calls of one geometry after the first: a new routing of the same tokens and new
    values, each call's own weight gradient."""
    from kernel_ratchet.kernels.quant.dual_grouped import quant_fp8_dual_1x128_grouped

    N, K, T = 256, 384, 2172
    g = torch.Generator(device="cuda").manual_seed(12)
    for lens in ([700, 0, 129, 1024, 255, 64], [64, 255, 1024, 129, 0, 700], [362] * 6):
        lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
        x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g)
        dout = torch.randn(T, N, device="cuda", dtype=torch.bfloat16, generator=g)
        _, xt = quant_fp8_dual_1x128_grouped(x, lens_t, E4M3)
        _, dyt = quant_fp8_dual_1x128_grouped(dout, lens_t, E4M3)
        out = ws.grouped_wgrad_fp8_ws(dyt, xt, lens_t)
        ref = F.grouped_wgrad_fp8(
            dyt, xt, lens_t, group_chunks=True, config=configs.BUCKETS["fp8_wgrad"]
        )
        assert snr_db(out, ref) > 45.0, f"routing {lens}"
