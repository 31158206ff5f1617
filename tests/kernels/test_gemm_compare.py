"""The side-by-side table (``bench --set``) and the dispatch table it writes."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from kernel_ratchet.kernels import benchmarking
from kernel_ratchet.kernels.gemm import bench, bench_set
from kernel_ratchet.kernels.gemm import dispatch as dp
from kernel_ratchet.kernels.gemm.shapes import ODD_SHAPES


def test_odd_set_covers_what_the_dispatch_must_serve():
    assert len(ODD_SHAPES) >= 12
    ms = {s.M for s in ODD_SHAPES}
    assert min(ms) == 1 and sum(1 < m <= 512 for m in ms) >= 6
    assert sum(bool(s.N % 16 or s.K % 16) for s in ODD_SHAPES) >= 4
    assert sum(any(x % 128 for x in (s.M, s.N, s.K)) for s in ODD_SHAPES) >= 12
    assert any(8 * max(s.M, 1) <= s.K and s.K >= 12000 for s in ODD_SHAPES)


def test_set_prints_the_table_and_fills_the_dispatch_table(tmp_path, capsys):
    table, md = tmp_path / "d.json", tmp_path / "t.md"
    argv = ["--set", "cpu", "--limit", "1", "--min-run-time", "0.001"]
    rc = bench.main([*argv, "-o", str(md), "--fill-dispatch", str(table)])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = [line for line in md.read_text().splitlines() if line.startswith("| m")]
    assert len(rows) == 1 and rows[0].rstrip().endswith("PASS |")
    got = dp.parse_table(table.read_text())
    (m,) = got.rows
    assert (m.M, m.N, m.K, m.granularity) == (32, 32, 128, "blockwise")
    assert m.fp8_step_ms > 0 and m.bf16_step_ms > 0
    # the written table, not the shipped one, decides the rendered dispatched column
    assert f"| {m.faster} |" in rows[0]
    command = json.loads(table.read_text())["info"]["command"]
    assert "--set cpu" in command and str(md) not in command  # the output path is not kept
    assert command.endswith(f"--rounds {bench.FILL_ROUNDS}")  # the default, said
    # a second run merged in: one row, two runs, the slower FP8 and faster 16-bit times kept
    assert bench.main([*argv, "--fill-dispatch", str(table), "--merge"]) == 0
    (merged,) = dp.parse_table(table.read_text()).rows
    assert merged.runs == 2
    assert merged.fp8_step_ms >= m.fp8_step_ms and merged.bf16_step_ms <= m.bf16_step_ms


def test_the_table_says_when_the_shipped_dispatch_was_measured_on_another_gpu(
    tmp_path, capsys, monkeypatch
):
    shipped = tmp_path / "shipped.json"
    row = dp.Measured("blockwise", 32, 32, 128, fp8_step_ms=2.0, bf16_step_ms=1.0)
    shipped.write_text(dp.DispatchTable((row,), {"gpu": "GPU A"}).to_json())
    monkeypatch.setattr(dp, "TABLE_PATH", shipped)
    dp.load_table.cache_clear()
    monkeypatch.setattr(bench_set.cmp, "versions", lambda: {"gpu": "NVIDIA H100"})
    argv = ["--set", "cpu", "--limit", "1", "--min-run-time", "0.001"]
    try:
        assert bench.main(argv) == 0
        out = capsys.readouterr().out
        assert "gpu GPU A (here NVIDIA H100)" in out and "--fill-dispatch PATH" in out
        assert bench.main([*argv, "--fill-dispatch", str(tmp_path / "new.json")]) == 0
        assert "here NVIDIA H100" not in capsys.readouterr().out  # its own table decided
    finally:
        dp.load_table.cache_clear()


def test_output_paths_get_their_folders_before_anything_is_measured(tmp_path, capsys):
    """A table or sweep written after minutes of measurement must not die at its first write:
    the folders are made when the arguments are read, and one that cannot be made is a usage
    error naming it."""
    table = tmp_path / "new" / "dispatch" / "d.json"
    args = bench.parse_args(["--set", "cpu", "--fill-dispatch", str(table)])
    assert table.parent.is_dir() and args.fill_dispatch == str(table)
    assert benchmarking.output_dir(str(tmp_path / "sweeps" / "a")) == str(tmp_path / "sweeps" / "a")
    assert (tmp_path / "sweeps" / "a").is_dir()
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(SystemExit):
        bench.parse_args(["--dtype", "bf16", "-o", str(blocker / "out.csv")])
    assert "cannot make the output folder" in capsys.readouterr().err


def test_a_dispatch_fill_times_each_path_in_interleaved_rounds_unless_told():
    """A table that decides paths is filled from medians of rounds; an explicit --rounds
    stands, and the tables that decide nothing keep one timing per call."""
    fill = ["--set", "cpu", "--fill-dispatch", "d.json"]
    assert bench.parse_args(fill).rounds == bench.FILL_ROUNDS > 1
    assert bench.parse_args([*fill, "--rounds", "1"]).rounds == 1
    assert bench.parse_args(["--set", "cpu"]).rounds == 1
    assert bench.parse_args(["--dtype", "bf16"]).rounds == 1


def test_the_console_line_keeps_four_significant_digits():
    """A shape's printed line tells 789.8 from 800 and a 0.9264 ratio from 0.9."""
    row = ["a.mb1", 1, 64, 128, 256, "PASS", 789.807, 7.30219, 856.998, 35.67, 0.52, 0.96]
    row += [28.6525, 28.65, 28.78, 833.365, "cublas", 852.579, 888.714, 876.334, 28.65]
    cells = bench._line([*row, 0.926374, 0.964312, 0.950968]).split()
    assert cells[:5] == ["a.mb1", "PASS", "789.8", "7.302", "857"]
    assert cells[8:] == ["833.4", "cublas", "852.6", "888.7", "876.3", "28.65", "0.9264"] + [
        "0.9643",
        "0.951",
    ]


def test_rounds_time_every_call_once_a_round_starting_one_later_each_time():
    blocks: list[str] = []

    def call(name):
        def fn():
            if not blocks or blocks[-1] != name:
                blocks.append(name)  # the start of a new block of this call

        return fn

    got = benchmarking.time_rounds({n: call(n) for n in "abc"}, 0.001, rounds=3)
    assert set(got) == {"a", "b", "c"} and all(v > 0 for v in got.values())
    # two warm-up calls each, then rounds a-b-c, b-c-a, c-a-b (a block may repeat a name)
    timed = [n for i, n in enumerate(blocks[3:]) if i == 0 or n != blocks[3:][i - 1]]
    assert blocks[:3] == ["a", "b", "c"] and timed == list("abcbcacab")
    with pytest.raises(ValueError, match="at least 1"):
        benchmarking.time_rounds({"a": call("a")}, 0.001, rounds=0)


def test_set_takes_the_median_over_interleaved_rounds(tmp_path, capsys):
    md = tmp_path / "t.md"
    argv = ["--set", "cpu", "--limit", "1", "--min-run-time", "0.001", "--rounds", "2"]
    assert bench.main([*argv, "-o", str(md)]) == 0, capsys.readouterr().out
    (row,) = [ln for ln in md.read_text().splitlines() if ln.startswith("| m")]
    assert row.rstrip().endswith("PASS |")


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "cpu", "--rounds", "0"],
        [],
        ["--dtype", "bf16", "--set", "odd"],
        ["--dtype", "bf16", "--fill-dispatch", "x"],
        ["--set", "odd", "--merge"],
        ["--dtype", "bf16", "--timing", "graph"],
        ["--set", "odd", "--timing", "gpu"],
    ],
)
def test_bad_option_combinations_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2 and "--" in capsys.readouterr().err


def test_dispatch_set_reaches_every_scale_within_a_factor_of_two():
    """Decode rows to M = 4096 on model widths: a Linear of those widths lies within
    ``MAX_DISTANCE`` of a measured shape."""
    from kernel_ratchet.kernels.gemm.shapes import dispatch_shapes

    got = dispatch_shapes()
    assert got[: len(ODD_SHAPES)] == ODD_SHAPES
    assert len({(s.M, s.N, s.K) for s in got}) == len(got)  # each problem measured once
    measured = dp.DispatchTable(
        tuple(dp.Measured("blockwise", s.M, s.N, s.K, 1.0, 2.0) for s in got)
    )
    for M in (1, 3, 7, 24, 100, 500, 1500, 3000, 6000):
        for N, K in ((4096, 4096), (14336, 4096), (4096, 14336)):
            assert measured.nearest("blockwise", M, N, K) is not None, (M, N, K)


def test_mixed_set_adds_model_guards_to_the_odd_shapes():
    from kernel_ratchet.kernels.gemm.shapes import GUARD_MODEL_SHAPES, mixed_shapes

    got = mixed_shapes()
    assert got[: len(ODD_SHAPES)] == ODD_SHAPES
    assert {s.label for s in got[len(ODD_SHAPES) :]} == set(GUARD_MODEL_SHAPES)


def test_the_table_says_how_its_times_were_taken(tmp_path, capsys):
    md = tmp_path / "t.md"
    argv = ["--set", "cpu", "--limit", "1", "--min-run-time", "0.001"]
    assert bench.main([*argv, "-o", str(md)]) == 0, capsys.readouterr().out
    notes = [p.strip() for p in md.read_text().split("\n\n")]  # a GPU's dispatch note may follow
    assert bench_set.TIMING["wall"] in notes[-2:]
    if not torch.cuda.is_available():  # no GPU: graph timing says so, and what to use
        with pytest.raises(RuntimeError, match="needs a CUDA GPU.*host's clock"):
            benchmarking.graph_rounds({"a": lambda: None}, 0.001)


@pytest.mark.gpu
def test_graph_timing_leaves_the_host_out_and_refuses_a_host_sync():
    """A tiny matmul launches slower than it runs: on the host's clock each call costs its
    launch, in graph replays only its GPU time. A call that reads device data on the host
    cannot be captured, and the error names it."""
    a = torch.randn(64, 64, device="cuda")
    fns = {"mm": lambda: a @ a}
    wall = benchmarking.time_rounds(fns, 0.05)["mm"]
    graph = benchmarking.graph_rounds(fns, 0.05, rounds=2)["mm"]
    assert 0 < graph < wall / 2, (graph, wall)
    with pytest.raises(RuntimeError, match="sync cannot be captured in a CUDA graph"):
        benchmarking.graph_rounds({"sync": lambda: (a @ a).sum().item()}, 0.01)


def test_the_dispatched_fp8_linear_is_also_compared_with_cublass_bf16_step():
    """The issue a user brings is a bf16 Linear on cuBLAS: the table says what switching it to
    our FP8 Linear, as dispatched, gains on the step, row by row and over the set."""
    from kernel_ratchet.harness.adapter import Shape
    from kernel_ratchet.kernels.gemm import compare as cmp

    shape = Shape("m64.n64.k64", M=64, N=64, K=64)
    fp8 = cmp.Row(shape, 1.0, 1.0, 2.0, 3.0, 1.5, "fp8", True)
    bf16 = cmp.Row(shape, 1.0, 1.0, 2.0, 3.0, 4.0, "bf16", True)
    cells = [c.strip() for c in fp8.markdown().strip("|\n ").split("|")]
    assert len(cells) == cmp.HEADER.count("|") - 1
    assert cells[-4:] == ["fp8", "1.33", "2.00", "PASS"]  # 2 / 1.5 and 3 / 1.5
    assert [c.strip() for c in bf16.markdown().split("|")][-3] == "1.50"  # 3 / 2
    assert "vs cuBLAS's bf16 step: min 1.50 geomean 1.73" in cmp.summary([fp8, bf16])


def test_the_per_op_bench_takes_its_cells_from_interleaved_rounds(tmp_path, monkeypatch):
    """``--rounds 3`` times ours and the vendor's forward and backward together, interleaved,
    and a row's times are those rounds' medians and spread, not one block each."""
    seen = []

    def spy(fns, min_run_time, rounds):
        seen.append((list(fns), rounds))
        got = benchmarking.timed_rounds(fns, min_run_time, rounds)
        return got | {"fwd": benchmarking.Timed(2.0, 0.5)}  # a value the row must carry

    monkeypatch.setattr(bench, "timed_rounds", spy)
    out = tmp_path / "b.csv"
    argv = ["--dtype", "fp16", "--shapes", "cpu", "--limit", "1", "--min-run-time", "0.001"]
    bench.main([*argv, "--rounds", "3", "-o", str(out)])
    assert seen == [(["fwd", "bwd", "vfwd", "vbwd"], 3)]
    (row,) = list(csv.DictReader(out.open()))
    assert float(row["Forward Time (ms)"]) == 2.0
    assert row["vendor"] == "cublas" and float(row["Vendor Step TFLOPS"]) > 0
    seen.clear()
    bench.main([*argv, "-o", str(out)])  # one round: one blocked_autorange per call
    assert seen == []
