"""The grouped GEMM's sweep (``python -m kernel_ratchet.kernels.grouped_gemm.tune``) on any
machine: which candidates it takes, and that its CSV keeps what a run measured before it was
cut short. The timings themselves need the GPU."""

from __future__ import annotations

import csv

import pytest

from kernel_ratchet.kernels.grouped_gemm import configs, tune, tune_fp8
from kernel_ratchet.kernels.grouped_gemm.tune_rows import pick


def test_only_keeps_the_shipped_configs_and_the_named_candidates():
    got = pick(tune_fp8.FP8_WGRAD, ("ws_128x128_s5",))
    assert "f8wg_ws_128x128_s5" in got and "f8wg_ws_128x128_s4" not in got
    assert {k for k in got if k.startswith("shipped:")} == {
        k for k in tune_fp8.FP8_WGRAD if k.startswith("shipped:")
    }
    assert pick(tune_fp8.FP8_WGRAD, ()) == tune_fp8.FP8_WGRAD


def test_the_fp8_sweep_names_the_weight_gradient_the_step_runs():
    shipped = {k: v for k, v in tune_fp8.FP8_WGRAD.items() if k.startswith("shipped:")}
    assert shipped["shipped:fp8_wgrad"] is configs.BUCKETS["fp8_wgrad"]
    assert ("shipped:WGRAD_FP8_WS" in shipped) == (configs.WGRAD_FP8_WS is not None)


def test_the_csv_holds_each_shape_as_soon_as_it_is_measured(tmp_path, monkeypatch):
    """``--fp8 --only ws`` hands ``only`` to the FP8 sweep; a sweep that dies on its second
    shape leaves the first shape's rows in sweep.csv."""
    calls = []

    def fake(label, s, mrt, only=()):
        calls.append((label, only))
        if len(calls) == 2:
            raise RuntimeError("the run was cut short")
        return [(label, "f8wg_ws_128x128_s5", 1.5, 640.0)]

    monkeypatch.setattr(tune, "sweep_fp8", fake)
    shapes = "qwen3_235b_gate_up_uniform,olmoe_1b_7b_gate_up_onehot_heavy"
    argv = ["--fp8", "--only", "ws", "--shapes", shapes, "--out", str(tmp_path)]
    with pytest.raises(RuntimeError, match="cut short"):
        tune.main(argv)
    assert calls == [
        ("qwen3_235b_gate_up_uniform", ("ws",)),
        ("olmoe_1b_7b_gate_up_onehot_heavy", ("ws",)),
    ]
    rows = list(csv.reader((tmp_path / "sweep.csv").open()))
    assert rows == [
        ["shape", "config", "ms", "TFLOPS"],
        ["qwen3_235b_gate_up_uniform", "f8wg_ws_128x128_s5", "1.5", "640.0"],
    ]


def test_the_sweep_makes_its_output_folder_and_prints_each_rows_unit(tmp_path, monkeypatch, capsys):
    """``--out`` may name a folder that does not exist yet; a pass's row prints GB/s, a GEMM's
    TFLOPS."""
    rows = [("s", "pass_dual_x (GB/s)", 0.46, 2334.9), ("s", "gemm_fwd", 1.82, 906.0)]
    monkeypatch.setattr(tune, "sweep_fp8", lambda label, s, mrt, only=(): rows)
    out = tmp_path / "new" / "sweep"
    assert tune.main(["--fp8", "--shapes", "qwen3_235b_gate_up_uniform", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2].endswith("2334.9 GB/s") and printed[-1].endswith("906.0 TFLOPS")
    assert len(list(csv.reader((out / "sweep.csv").open()))) == 3
