"""The warp-specialized blockwise FP8 GEMM (Gluon, sm_90), the kernel and its launch: offline
compiles on any machine, the arguments a launch passes (recorded on the CPU) and the launches
it refuses, results on the H200 against the dequantized fp32 product (``pytest -m gpu``)."""

from __future__ import annotations

import functools

import pytest
import torch

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm import fp8_block_ws_launch as ws
from kernel_ratchet.kernels.gemm.configs import WS_CONFIGS
from kernel_ratchet.kernels.gemm.fp8_block_ws import _fp8_block_ws_kernel
from kernel_ratchet.kernels.gemm.fp8_block_ws_cols import _fp8_block_ws_cols_kernel
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES, Resources
from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128, quant_fp8_blockwise_1x128
from tests.kernels.ws_helpers import (
    LaunchRecorder,
    assert_unspilled_and_pipelined,
    compiled_in_a_fresh_process,
)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


@functools.lru_cache(maxsize=1)
def _shipped_tile_resources() -> list[Resources]:
    """Both modes of the shipped tile."""
    calls = [{"stages": 6, "mode": m} for m in (0, 1)]
    return compiled_in_a_fresh_process("kernel_ratchet.kernels.gemm.fp8_block_ws_launch", calls)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [0, 1], ids=["single", "paired"])
def test_shipped_tile_compiles_for_sm90_unspilled_and_pipelined(mode):
    res = _shipped_tile_resources()[mode]
    assert_unspilled_and_pipelined(res)
    assert SM90_SHARED_BYTES - res.shared_bytes < 8192  # six 32 KiB stages + the C staging


@pytest.mark.slow
def test_three_consumer_tile_compiles_for_sm90_unspilled_and_pipelined():
    """192-row tiles (three consumer warpgroups, one wgmma in flight each): the register file
    holds their accumulators at 152 registers a thread, four 40 KiB stages fit beside the C
    staging, and ptxas keeps the wgmmas asynchronous. (With two in flight each, MODE 1, it
    spills 1.1 KB: the tile is offered with MODE 0 only.)"""
    calls = [{"stages": 4, "mode": 0, "consumers": 3}]
    (single,) = compiled_in_a_fresh_process(
        "kernel_ratchet.kernels.gemm.fp8_block_ws_launch", calls
    )
    assert_unspilled_and_pipelined(single)


def test_a_launch_passes_the_constexprs_and_options_the_offline_compile_checks(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_fp8_block_ws_kernel", rec)
    M, N, K = 384, 256, 640
    a, b = torch.zeros(M, K, dtype=E4M3), torch.zeros(N, K, dtype=E4M3)
    sa, sb = torch.ones(5, M).t(), torch.ones(2, 5)
    out = ws.matmul_fp8_block_ws(
        a, b, sa, sb, b_scale_group_n=128, stages=5, group_m=4, mode=0, num_sms=2
    )
    assert out.shape == (M, N) and out.dtype == torch.bfloat16
    ((grid, args, kw),) = rec.calls
    assert grid == (2,)  # min(SMs, 3 x 2 tiles of 128 x 128)
    assert args[5:] == (M, N, K, 1, M, 5, 1)
    assert kw == {**ws._constexprs(128, 128, 4, 5, 2, 232, 0), **ws.OPTIONS}
    # every keyword but the options is one of the kernel's constexpr parameters, all of them
    names = _fp8_block_ws_kernel.arg_names
    assert sorted(set(kw) - set(ws.OPTIONS)) == sorted(names[names.index("SB_GROUP_N") :])


def test_a_three_consumer_launch_tiles_192_rows_and_gives_each_warpgroup_152_registers(
    monkeypatch,
):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_fp8_block_ws_kernel", rec)
    M, N, K = 400, 256, 640
    a, b = torch.zeros(M, K, dtype=E4M3), torch.zeros(N, K, dtype=E4M3)
    sa, sb = torch.ones(5, M).t(), torch.ones(2, 5)
    ws.matmul_fp8_block_ws(a, b, sa, sb, b_scale_group_n=128, mode=0, num_sms=8, consumers=3)
    ((grid, _args, kw),) = rec.calls
    assert grid == (6,)  # 3 row tiles of 192 (400 rows) x 2 column tiles of 128
    assert kw["CONSUMERS"] == 3 and kw["CONSUMER_REGS"] == 152 and kw["maxnreg"] == 128
    # the register file: three consumer warpgroups and the producer's, padded to a warpgroup
    assert 3 * 128 * kw["CONSUMER_REGS"] + 128 * 40 <= 65536 == 4 * 128 * kw["maxnreg"]


@pytest.mark.parametrize(
    ("sb", "mode", "cols"),
    [
        (torch.ones(5, 256).t(), 1, True),  # as the 1x128 quantization stores them
        (torch.ones(256, 5), 1, False),  # row-major: a k-group's scales are not contiguous
        (torch.ones(5, 256).t(), 0, False),  # one k-group at a time: the register path
    ],
    ids=["kgroup-major", "row-major", "single"],
)
def test_column_scales_go_through_tma_only_where_a_stage_can_carry_them(
    monkeypatch, sb, mode, cols
):
    """1x128 B scales (the weight gradient): a launch that can load each k-group's row of them
    by TMA runs the column-scale kernel with a descriptor over ``sbᵀ``; any other, the kernel
    that loads them from global memory."""
    plain, with_cols = LaunchRecorder(), LaunchRecorder()
    monkeypatch.setattr(ws, "_fp8_block_ws_kernel", plain)
    monkeypatch.setattr(ws, "_fp8_block_ws_cols_kernel", with_cols)
    M, N, K = 384, 256, 640
    a, b = torch.zeros(M, K, dtype=E4M3), torch.zeros(N, K, dtype=E4M3)
    sa = torch.ones(5, M).t()
    ws.matmul_fp8_block_ws(a, b, sa, sb, b_scale_group_n=1, stages=5, mode=mode, num_sms=4)
    assert (len(with_cols.calls), len(plain.calls)) == ((1, 0) if cols else (0, 1))
    if cols:
        ((grid, args, kw),) = with_cols.calls
        sb_desc = args[2]
        assert list(sb_desc.shape) == [5, N] and list(sb_desc.block_shape) == [1, 128]
        assert sb_desc.base.data_ptr() == sb.data_ptr()
        assert grid == (4,) and args[4] is sa and args[5:] == (M, N, K, 1, M)
        assert kw == {**ws._cols_constexprs(128, 8, 5, 4, 232), **ws.OPTIONS}
        names = _fp8_block_ws_cols_kernel.arg_names  # every constexpr parameter, no other
        assert sorted(set(kw) - set(ws.OPTIONS)) == sorted(names[names.index("BLOCK_N") :])


def test_column_scale_stages_that_overflow_shared_memory_are_refused_with_the_most_that_fit():
    a, b = torch.zeros(256, 256, dtype=E4M3), torch.zeros(256, 256, dtype=E4M3)
    sa, sb = torch.ones(2, 256).t(), torch.ones(2, 256).t()
    with pytest.raises(ValueError, match="use at most 5"):
        ws.matmul_fp8_block_ws(a, b, sa, sb, b_scale_group_n=1, stages=6, mode=1, num_sms=2)


@pytest.mark.slow
def test_the_column_scale_kernel_compiles_for_sm90_unspilled_and_pipelined():
    """Five stages carrying each k-group's row of B scales fit beside the C staging, and the
    consumers hold one k-group's 32 column scales at a time: no spill (the register path of
    paired k-groups held 64 and spilled), wgmmas kept asynchronous."""
    calls = [{"stages": 5, "mode": 1, "b_scale_group_n": 1}]
    (res,) = compiled_in_a_fresh_process("kernel_ratchet.kernels.gemm.fp8_block_ws_launch", calls)
    assert_unspilled_and_pipelined(res)


def test_every_shipped_column_scale_entry_is_a_launch_the_kernel_takes():
    """The column-scale kernel runs paired k-groups on two consumers and fits five stages of
    128 x 128: a ``_cols`` entry outside that would fail at launch or run another kernel."""
    from kernel_ratchet.kernels.gemm.configs import ws_mode

    cols = {k: v for k, v in WS_CONFIGS.items() if k.endswith("_cols")}
    assert cols  # the weight gradient's entries ship
    for buckets in cols.values():
        for cfg in buckets.values():
            assert ws_mode(cfg) == 1 and cfg.block_m == 2 * ws.ROWS, cfg
            ws._check_cols_smem(cfg.block_n, cfg.num_stages)
            assert ws.scales_by_tma(torch.ones(3, 256).t(), 1, ws_mode(cfg), 2)


def test_column_scales_load_by_tma_only_when_stored_kgroup_major_and_16_byte_aligned():
    ok = ws.col_scales_ok
    assert ok(torch.ones(3, 264).t())  # rows of 1056 bytes
    assert not ok(torch.ones(3, 262).t())  # rows of 1048 bytes
    assert not ok(torch.ones(264, 3))  # row-major
    assert not ok(torch.ones(3, 264, dtype=torch.float64).t())
    assert not ok(torch.ones(3 * 264 + 1)[1:].view(3, 264).t())  # 4-byte aligned base


def test_supported_needs_an_sm90_gpu_and_aligned_fp8_rows():
    a = torch.zeros(256, 256, dtype=E4M3)
    assert not ws.supported(a, a, torch.bfloat16)  # a CPU tensor


def _dequant(q: torch.Tensor, s: torch.Tensor, rows_per_scale: int) -> torch.Tensor:
    K = q.shape[1]
    s = s.repeat_interleave(rows_per_scale, 0)[: q.shape[0]].repeat_interleave(128, 1)[:, :K]
    return q.float() * s


def _stages(consumers: int, group_n: int, mode: int) -> int:
    """The most stages of 128 x 128 that fit: 6 on two consumers, 5 where each also carries a
    row of column scales (paired k-groups, 1x128 B scales), 4 on three consumers."""
    if consumers == 3:
        return 4
    return 5 if group_n == 1 and mode == 1 else 6


@pytest.mark.gpu
@pytest.mark.parametrize(
    "mnk",
    [(128, 128, 128), (300, 264, 1000), (4097, 3000, 2000), (1000, 5120, 1000), (4096, 6144, 4096)],
    ids=lambda s: "m{}.n{}.k{}".format(*s),
)
@pytest.mark.parametrize("group_n", [128, 1], ids=["b128x128", "b1x128"])
@pytest.mark.parametrize("mode", [0, 1], ids=["single", "paired"])
@pytest.mark.parametrize("a_dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("consumers", [2, 3], ids=["128rows", "192rows"])
def test_matches_the_dequantized_product_on_gpu(mnk, group_n, mode, a_dtype, consumers):
    if consumers == 3 and mode == 1:
        pytest.skip("the 192-row tile runs one wgmma in flight per warpgroup (MODE 0)")
    M, N, K = mnk
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g)
    qa = quant_fp8_blockwise_1x128(a, a_dtype, align=16)
    if group_n == 128:
        qb = quant_fp8_block_128x128(b, E4M3, align=16)
    else:
        qb = quant_fp8_blockwise_1x128(b, E4M3, align=16)
    assert ws.supported(qa.data, qb.data, torch.bfloat16)
    ref = _dequant(qa.data, qa.scale, 1) @ _dequant(qb.data, qb.scale, group_n).t()
    out = ws.matmul_fp8_block_ws(
        qa.data,
        qb.data,
        qa.scale,
        qb.scale,
        b_scale_group_n=group_n,
        mode=mode,
        stages=_stages(consumers, group_n, mode),
        consumers=consumers,
    )
    assert not out.isnan().any()
    assert snr_db(out, ref) > 45.0  # bf16 rounding of the output: about 55 dB


@pytest.mark.gpu
@pytest.mark.parametrize("group_n", [128, 1], ids=["b128x128", "b1x128"])
def test_repeated_calls_of_one_geometry_compute_each_calls_product_on_gpu(group_n):
    """Whatever the launcher keeps from a geometry's first call, later calls compute their own
    product: new values at new addresses, and new values written into the same tensors."""
    M, N, K = 1000, 5120, 1000
    g = torch.Generator(device="cuda").manual_seed(group_n)

    def quantized():
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g)
        qa = quant_fp8_blockwise_1x128(a, E4M3, align=16)
        if group_n == 128:
            return qa, quant_fp8_block_128x128(b, E4M3, align=16)
        return qa, quant_fp8_blockwise_1x128(b, E4M3, align=16)

    qa, qb = quantized()
    for i in range(4):
        if i == 2:  # new values, same tensors
            na, nb = quantized()
            for old, new in ((qa, na), (qb, nb)):
                old.data.copy_(new.data)
                old.scale.copy_(new.scale)
        elif i == 3:
            qa, qb = quantized()  # new values at new addresses
        ref = _dequant(qa.data, qa.scale, 1) @ _dequant(qb.data, qb.scale, group_n).t()
        out = ws.matmul_fp8_block_ws(qa.data, qb.data, qa.scale, qb.scale, b_scale_group_n=group_n)
        assert snr_db(out, ref) > 45.0, f"call {i}"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "mnk",
    [(128, 128, 128), (300, 264, 1000), (4097, 3000, 2000), (4096, 6144, 4096)],
    ids=lambda s: "m{}.n{}.k{}".format(*s),
)
@pytest.mark.parametrize("mode", [2, 3], ids=["quarters-paired", "quarters"])
def test_wide_tiles_in_column_parts_match_the_dequantized_product_on_gpu(mnk, mode):
    """256-column tiles taken as quarters, each half with its own B scale: partial
    column tiles, the parts past N and an odd number of k-groups (K 1000) included."""
    M, N, K = mnk
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g)
    qa = quant_fp8_blockwise_1x128(a, E4M3, align=16)
    qb = quant_fp8_block_128x128(b, E4M3, align=16)
    ref = _dequant(qa.data, qa.scale, 1) @ _dequant(qb.data, qb.scale, 128).t()
    out = ws.matmul_fp8_block_ws(
        qa.data, qb.data, qa.scale, qb.scale, b_scale_group_n=128, block_n=256, stages=4, mode=mode
    )
    assert not out.isnan().any()
    assert snr_db(out, ref) > 45.0


@pytest.mark.parametrize(
    "kw",
    [
        dict(mode=2, block_n=256, b_scale_group_n=1),  # per-column B scales: not one per part
        dict(mode=2, block_n=192, b_scale_group_n=128),  # halves of 96 span two scale blocks
        dict(mode=2, block_n=256, b_scale_group_n=128, consumers=3),
        dict(mode=4, block_n=256, b_scale_group_n=128),
    ],
    ids=["column-scales", "parts-across-blocks", "three-consumers", "unknown-mode"],
)
def test_a_launch_the_kernel_does_not_take_is_refused_with_what_to_use(kw):
    a, b = torch.zeros(256, 256, dtype=E4M3), torch.zeros(256, 256, dtype=E4M3)
    sa, sb = torch.ones(256, 2), torch.ones(256, 2)
    with pytest.raises(ValueError, match="mode"):
        ws.matmul_fp8_block_ws(a, b, sa, sb, **kw)
