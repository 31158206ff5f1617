"""FP8 Linear dispatch: the measured table decides where the 16-bit path runs instead."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import SNR_BF16, Shape
from kernel_ratchet.harness.correctness import assert_close
from kernel_ratchet.kernels.gemm import dispatch as dp
from kernel_ratchet.kernels.gemm import fp8
from kernel_ratchet.kernels.gemm.adapter import GemmFp8Blockwise
from kernel_ratchet.kernels.gemm.census import census_call
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.launch import forced_config

ROWS = (
    dp.Measured("blockwise", 256, 8192, 8192, fp8_step_ms=1.2, bf16_step_ms=0.2),
    dp.Measured("blockwise", 8192, 8192, 8192, fp8_step_ms=2.0, bf16_step_ms=3.0),
)


def test_nearest_measured_shape_decides_within_a_factor_of_two():
    t = dp.DispatchTable(ROWS)
    assert t.path_for("blockwise", 256, 8192, 8192) == "bf16"
    assert t.path_for("blockwise", 300, 8000, 8192) == "bf16"  # near the slow point
    assert t.path_for("blockwise", 7000, 8192, 8192) == "fp8"
    assert t.path_for("blockwise", 16, 512, 128) == "fp8"  # nothing measured near: keep FP8
    assert t.path_for("tensorwise", 256, 8192, 8192) == "fp8"  # other recipe: not measured


def test_table_round_trips_and_bad_tables_say_how_to_rewrite():
    t = dp.DispatchTable(ROWS, {"gpu": "H200"})
    assert dp.parse_table(t.to_json()) == t
    with pytest.raises(ValueError, match="--fill-dispatch"):
        dp.parse_table("[1, 2]", "x.json")
    with pytest.raises(ValueError, match="positive"):
        dp.parse_table(
            '{"rows": [{"granularity": "blockwise", "M": 0, "N": 1, "K": 1, '
            '"fp8_step_ms": 1, "bf16_step_ms": 1}]}'
        )


def test_a_table_measured_on_another_gpu_or_version_says_so_with_the_fill():
    info = {"gpu": "NVIDIA H200", "driver": "1", "torch": "2.11", "triton": "3.6"}
    table = dp.DispatchTable(ROWS, info)
    same = {"gpu": "NVIDIA H200", "driver": "2", "torch": "2.11", "triton": "3.6"}
    assert dp.measured_elsewhere(table, same, "fill it") is None  # a driver alone: same table
    note = dp.measured_elsewhere(table, same | {"gpu": "NVIDIA H100"}, "fill it")
    assert "gpu NVIDIA H200 (here NVIDIA H100)" in note and "`fill it --merge`" in note
    h100 = table.merged(dp.DispatchTable(ROWS, same | {"gpu": "NVIDIA H100"}))
    assert dp.measured_elsewhere(h100, same | {"gpu": "NVIDIA H100"}, "f") is None  # its own
    note = dp.measured_elsewhere(table, same | {"triton": "3.7"}, "fill it")
    assert "triton 3.6 (here 3.7)" in note and "gpu" not in note
    assert dp.measured_elsewhere(dp.DispatchTable((), info), {"gpu": "x"}, "f") is None
    assert dp.measured_elsewhere(table, {"torch": "9"}, "f") is None  # no GPU: nothing measured


def test_merged_runs_send_a_shape_to_fp8_only_where_it_won_every_run():
    info = {"gpu": "H200", "driver": "1", "torch": "2", "triton": "3"}
    first = dp.DispatchTable(ROWS, info)
    # the second run: FP8 loses at 8192^3, a new shape measured
    second = dp.DispatchTable(
        (
            dp.Measured("blockwise", 8192, 8192, 8192, fp8_step_ms=3.3, bf16_step_ms=3.1),
            dp.Measured("blockwise", 1024, 1024, 1024, fp8_step_ms=0.1, bf16_step_ms=0.2),
        ),
        info | {"command": "again"},
    )
    merged = first.merged(second)
    assert merged.path_for("blockwise", 8192, 8192, 8192) == "bf16"  # FP8 won one run of two
    row = merged.nearest("blockwise", 8192, 8192, 8192)
    assert (row.fp8_step_ms, row.bf16_step_ms, row.runs) == (3.3, 3.0, 2)
    assert merged.path_for("blockwise", 1024, 1024, 1024) == "fp8"
    assert len(merged.rows) == 3 and merged.info == info | {"merged": "again"}
    assert dp.parse_table(merged.to_json()) == merged
    third = merged.merged(dp.DispatchTable((), info | {"command": "once more"}))
    assert third.info == info | {"merged": "again ; once more"}  # the first run's info kept
    twice = dp.DispatchTable((*ROWS, ROWS[1]), info).merged(dp.DispatchTable((), info))
    assert len(twice.rows) == 2 and twice.nearest("blockwise", 8192, 8192, 8192).runs == 2
    with pytest.raises(ValueError, match="different driver"):
        first.merged(dp.DispatchTable(ROWS, info | {"driver": "2"}))


def test_a_run_on_another_gpu_merges_into_a_section_that_gpu_reads(monkeypatch):
    info = {"gpu": "H200", "driver": "1", "torch": "2", "triton": "3"}
    h200 = dp.DispatchTable(ROWS, info)  # FP8 slower at 256 x 8192 x 8192
    fast = dp.Measured("blockwise", 256, 8192, 8192, fp8_step_ms=0.1, bf16_step_ms=0.2)
    h100 = {"gpu": "H100", "driver": "1", "torch": "2", "triton": "3", "command": "on h100"}
    table = h200.merged(dp.DispatchTable((fast,), h100))
    assert table.rows == h200.rows and table.info == info  # the H200's own rows untouched
    assert table.for_gpu("H100").path_for("blockwise", 256, 8192, 8192) == "fp8"
    assert table.for_gpu("H200").path_for("blockwise", 256, 8192, 8192) == "bf16"
    assert table.for_gpu("A100") is table and table.for_gpu(None) is table  # no section: own
    again = table.merged(dp.DispatchTable((fast,), h100 | {"command": "again"}))
    assert again.for_gpu("H100").rows[0].runs == 2  # the section merges like a table
    assert dp.parse_table(again.to_json()) == again  # sections survive the file
    with pytest.raises(ValueError, match="different torch"):
        again.merged(dp.DispatchTable((fast,), h100 | {"torch": "9"}))
    # an empty table takes the run whole, whatever it was measured on
    assert dp.DispatchTable().merged(dp.DispatchTable((fast,), h100)).info == h100
    # the shipped lookup reads the section of the GPU it runs on
    monkeypatch.setattr(dp, "load_table", lambda path=None: table)
    monkeypatch.setattr(dp, "this_gpu", lambda: "H100")
    assert dp.fp8_path("blockwise", 256, 8192, 8192) == "fp8"
    monkeypatch.setattr(dp, "this_gpu", lambda: "H200")
    assert dp.fp8_path("blockwise", 256, 8192, 8192) == "bf16"


def test_shipped_table_parses():
    assert isinstance(dp.load_table(), dp.DispatchTable)


def test_slow_shape_runs_the_16bit_path_forward_and_backward(monkeypatch, device):
    """A shape the table marks slow launches no quantization and matches the 16-bit result."""
    shape = Shape("m50.n70.k200", M=50, N=70, K=200)
    table = dp.DispatchTable((dp.Measured("blockwise", 50, 70, 200, 2.0, 1.0),))
    monkeypatch.setattr(fp8, "fp8_path", table.path_for)
    ad = GemmFp8Blockwise()
    case = ad.make_case(shape, seed=0, device=device)
    case.a, case.b, case.dout = (t.to(torch.float16) for t in (case.a, case.b, case.dout))
    with forced_config(GemmConfig(32, 32, 128, num_warps=4, num_stages=2)):
        c = census_call(lambda: ad.outputs(case), dry=False)
        got = ad.outputs(case)
    assert c.quant_passes() == 0 and len(c.gemms()) == 3
    assert got["out"].dtype == torch.bfloat16
    assert_close(got, ad.reference(case), SNR_BF16)


def test_the_path_adapter_measures_fp8_where_the_table_sends_the_linear_to_16_bit(
    monkeypatch, device
):
    """Campaigns on the FP8 kernels over shapes the table dispatches away measure the FP8 path
    itself (GemmFp8BlockwisePath); the user-facing adapter follows the table."""
    from kernel_ratchet.kernels.gemm.adapter import GemmFp8BlockwisePath

    shape = Shape("m50.n70.k200", M=50, N=70, K=200)
    table = dp.DispatchTable((dp.Measured("blockwise", 50, 70, 200, 2.0, 1.0),))
    monkeypatch.setattr(fp8, "fp8_path", table.path_for)
    with forced_config(GemmConfig(32, 32, 128, num_warps=4, num_stages=2)):
        for adapter, quantized in ((GemmFp8BlockwisePath(), True), (GemmFp8Blockwise(), False)):
            case = adapter.make_case(shape, seed=0, device=device)
            case.a, case.b, case.dout = (t.to(torch.float16) for t in (case.a, case.b, case.dout))
            c = census_call(lambda a=adapter, k=case: a.outputs(k), dry=False)
            assert (c.quant_passes() > 0) is quantized, type(adapter).__name__


@pytest.mark.gpu
@pytest.mark.parametrize("granularity", ["tensorwise", "rowwise", "blockwise"])
def test_fp8_path_itself_on_odd_shapes_on_gpu(granularity):
    """The FP8 path with dispatch off (what the table measures) meets the FP8 thresholds on
    every odd shape, whatever the shipped table sends to the 16-bit path."""
    from kernel_ratchet.harness.correctness import check_outputs
    from kernel_ratchet.kernels.gemm.adapter import make_linear_inputs
    from kernel_ratchet.kernels.gemm.reference import linear_all_ref
    from kernel_ratchet.kernels.gemm.shapes import ODD_SHAPES

    recipe = fp8.Fp8Recipe(granularity, dispatch=False)
    for shape in ODD_SHAPES:
        case = make_linear_inputs(shape, 0, "cuda", torch.bfloat16)
        out, state = fp8.gemm_fp8_forward(case.a, case.b, recipe)
        da, db = fp8.gemm_fp8_backward(case.dout, state, recipe)
        ref = linear_all_ref(case.a, case.b, case.dout)
        res = check_outputs({"out": out, "da": da, "db": db}, ref, dict.fromkeys(ref, 25.0))
        assert res.passed, f"{shape.label}: {res.reason}; snr={res.snr}"
        del case, state, ref
        torch.cuda.empty_cache()
