"""The grouped GEMM step table (``bench --step``): rows, columns, torch paths, usage errors."""

from __future__ import annotations

import math

import pytest
import torch

from kernel_ratchet.kernels.benchmarking import (
    MAX_CALLS,
    MIN_CALLS,
    back_to_back_ms,
    batch_calls,
    interleaved_medians,
)
from kernel_ratchet.kernels.grouped_gemm import bench
from kernel_ratchet.kernels.grouped_gemm import step_bench as sb
from kernel_ratchet.kernels.grouped_gemm.shapes import tiny_step

ONE = ["--step", "--dry-run", "--rounds", "1"]
#: The step table's ``--dry-run`` runs the Triton interpreter, which a GPU machine leaves off.
DRY_RUN = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter test (CPU machines)")


def _table(path) -> tuple[list[str], list[list[str]], list[str]]:
    """(header cells, body rows' cells, lines after the table) of a written table."""
    lines = path.read_text().splitlines()
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if ln.startswith("|")]
    return cells[0], cells[2:], [ln for ln in lines if ln and not ln.startswith("|")]


@DRY_RUN
def test_dry_run_table_has_every_path_and_both_snrs(tmp_path):
    md = tmp_path / "t.md"
    assert bench.main([*ONE, "-o", str(md)]) == 0
    header, rows, tail = _table(md)
    assert len(header) == 14 and header[0] == "shape" and header[-1] == "check"
    assert [r[0] for r in rows] == [s.label for s in tiny_step()]
    for r in rows:
        assert len(r) == len(header) and r[-1] == "PASS"
        assert all(math.isfinite(float(r[i])) for i in (6, 8, 10))  # three ratios
        bf16, fp8 = ([float(v) for v in r[i].split("/")] for i in (11, 12))
        assert min(bf16) >= 40 and min(fp8) >= 25
    assert tail[0].startswith("PASS 2/2; torch._grouped_mm") and "backward by" in tail[0]
    assert any(t.startswith("FP8 step / torch bf16 step: geomean") for t in tail)


@DRY_RUN
def test_the_prepared_weight_adds_its_step_and_ratio_beside_the_fp8_step(tmp_path):
    """``--prepared-weight``: the FP8 step with its weight quantized once beforehand, two more
    columns after the FP8 step's and its ratio under the table; the table without it keeps
    its 14 columns (the test above)."""
    md = tmp_path / "t.md"
    assert bench.main([*ONE, "--prepared-weight", "-o", str(md)]) == 0
    header, rows, tail = _table(md)
    assert len(header) == 16 and header[11:13] == [
        "FP8 step, weight prepared",
        "vs torch bf16 step",
    ]
    for r in rows:
        assert len(r) == 16 and r[-1] == "PASS"
        assert float(r[11]) > 0 and math.isfinite(float(r[12]))
    assert any(t.startswith("FP8 step, weight prepared / torch bf16 step: geomean") for t in tail)


def _row(label: str, ours_ms: float, ok: bool = True) -> sb.StepRow:
    """A row whose three ratios are all 1 / ours_ms (torch's paths take 1 ms)."""
    ms = {"fwd": ours_ms, "step": ours_ms, "fp8_step": ours_ms, "torch_fwd": 1.0, "torch_step": 1.0}
    snr = {f"{k}_{o}": 50.0 for k in sb.ADAPTERS for o in sb.OUTS}
    return sb.StepRow(sb.Shape(label, 128, 128, 128), ms, snr, ok)


def test_summary_gives_each_set_its_geomean_and_range_over_its_pass_rows():
    rows = [_row("a1", 0.5), _row("a2", 2.0), _row("b1", 1.25), _row("b2", 0.1, ok=False)]
    gmm = sb.TorchGmm("autograd")
    lines = sb.summary(rows, gmm, {"set_a": ["a1", "a2"], "set_b": ["b1", "b2"]})
    a = next(ln for ln in lines if ln.startswith("set_a"))
    b = next(ln for ln in lines if ln.startswith("set_b"))
    assert a.startswith("set_a (2/2 PASS)") and "bf16 fwd ours / torch 1.00 (0.50-2.00)" in a
    assert b.startswith("set_b (1/2 PASS)") and "FP8 step / torch bf16 step 0.80 (0.80-0.80)" in b
    one_set = sb.summary(rows, gmm, {"set_a": ["a1", "a2", "b1", "b2"]})
    assert not any(ln.startswith("set_a") for ln in one_set)  # the overall lines say it


def test_the_summary_names_the_steps_whose_issue_took_most_of_their_time():
    """A step whose host issue time reaches 80% of its measured time is named with both
    times; a row of fast issue, and a dry run (no host times), add no line."""
    slow = _row("short", 1.0)
    slow.host.update({"fp8_step": 0.95, "torch_step": 0.4, "step": 0.5})
    quick = _row("long", 2.0)
    quick.host.update({"fp8_step": 0.9, "torch_step": 0.5})
    gmm = sb.TorchGmm("autograd")
    (line,) = [ln for ln in sb.summary([slow, quick], gmm) if ln.startswith("host-bound")]
    assert "short fp8_step 0.95/1.00 ms" in line
    assert "torch_step" not in line and "long" not in line
    assert not any(ln.startswith("host-bound") for ln in sb.summary([_row("a", 1.0)], gmm))


@DRY_RUN
def test_missing_torch_grouped_mm_is_a_row_note_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.delattr(torch, "_grouped_mm")
    md = tmp_path / "t.md"
    assert bench.main([*ONE, "--only", "empty_group", "-o", str(md)]) == 0
    _, (row,), tail = _table(md)
    assert row[6] == row[8] == row[10] == "n/a"
    assert math.isfinite(float(row[5].split(" / ")[0]))  # ours still measured
    assert "not available in this torch" in row[-1] and "not available" in tail[0]
    assert "bf16 step ours / torch: n/a" in tail


def test_composed_torch_step_matches_autograd(monkeypatch):
    real = torch._grouped_mm

    def no_autograd(*a, **k):
        with torch.no_grad():
            return real(*a, **k)

    monkeypatch.setattr(torch, "_grouped_mm", no_autograd)
    assert sb.probe_torch("cpu").mode == "composed"
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(24, 32, generator=gen, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(3, 16, 32, generator=gen, dtype=torch.bfloat16, requires_grad=True)
    d = torch.randn(24, 16, generator=gen, dtype=torch.bfloat16)
    offs = torch.tensor([8, 8, 24], dtype=torch.int32)
    out, dx, dw = sb._torch_step(x, w, d, offs, "composed")()
    monkeypatch.setattr(torch, "_grouped_mm", real)
    ref = real(x, w.transpose(-2, -1), offs=offs)
    rdx, rdw = torch.autograd.grad(ref, (x, w), d)
    assert torch.equal(out, ref.detach()) and torch.allclose(dx, rdx) and torch.allclose(dw, rdw)


def test_interleaved_medians_alternate_the_paths():
    calls: list[str] = []

    def timer(fn):
        calls.append(fn())
        return {"a": [3.0, 1.0, 2.0], "b": [5.0, 5.0, 9.0]}[calls[-1]][calls.count(calls[-1]) - 1]

    got = interleaved_medians({"a": lambda: "a", "b": lambda: "b"}, timer, rounds=3)
    assert calls == ["a", "b", "b", "a", "a", "b"] and got == {"a": 2.0, "b": 5.0}


def test_interleaved_rounds_put_every_path_in_every_position():
    calls: list[str] = []
    fns = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    interleaved_medians(fns, lambda fn: fn() or 1.0, rounds=3)
    rounds = [calls[i : i + 3] for i in range(0, 9, 3)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert [r[0] for r in rounds] == ["a", "b", "c"] and [r[2] for r in rounds] == ["c", "a", "b"]


@pytest.mark.parametrize(
    "argv, env, says",
    [
        (ONE, "0", "TRITON_INTERPRET=1"),
        ([*ONE, "--shapes", "no_such_set"], "1", "no_such_set"),
        ([*ONE, "--shapes", "tiny_step,tiny_step"], "1", "repeat a label"),
    ],
)
def test_usage_errors_exit_2_with_the_fix(argv, env, says, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_INTERPRET", env)
    assert bench.main(argv) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["-o", "x.md"], ["--flush-l2"], ["--prepared-weight"]])
def test_step_options_without_step_are_a_usage_error(flag, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(flag)
    assert e.value.code == 2 and "--step" in capsys.readouterr().err


@pytest.mark.parametrize(
    "one_ms, rep_ms, calls",
    [
        (1.0, 50.0, 50),
        (0.3, 50.0, 167),
        (20.0, 50.0, MIN_CALLS),
        (0.01, 50.0, MAX_CALLS),
        (0.0, 50.0, MAX_CALLS),
        (float("nan"), 50.0, MAX_CALLS),
        (7.0, 50.0, 8),
    ],
)
def test_a_batch_holds_about_rep_ms_of_calls_within_bounds(one_ms, rep_ms, calls):
    assert batch_calls(one_ms, rep_ms) == calls


@pytest.mark.gpu
@pytest.mark.gpu_alone  # a ratio of two timings: no other test's kernels between them
def test_back_to_back_time_is_per_call_and_follows_the_work():
    """Twice the work per call reads about twice the time per call (not per batch)."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    timer = back_to_back_ms()
    one = min(timer(lambda: a @ a) for _ in range(3))
    two = min(timer(lambda: (a @ a, a @ a)) for _ in range(3))
    assert 0.05 < one < 5.0 and 1.7 < two / one < 2.3


@pytest.mark.gpu
@pytest.mark.gpu_memory  # DeepSeek-V3's layers: tens of GB with their gradients and FP8 copies
def test_step_table_on_moe_targets_and_offlist(tmp_path):
    """The committed benchmark on the H200 (docs/grouped-gemm.md): every shape PASS, torch's
    grouped GEMM measured on every shape."""
    md = tmp_path / "grouped_step.md"
    rc = bench.main(["--step", "--shapes", "moe_target,moe_offlist", "-o", str(md)])
    _, rows, tail = _table(md)
    assert len(rows) == 50 and rc == 0, "\n".join(tail)
    assert all(math.isfinite(float(r[i])) for r in rows for i in (6, 8, 10))


def test_the_summary_gives_the_fp8_step_as_the_shipped_table_routes_it(
    grouped_dispatch_table, monkeypatch
):
    """Where the dispatch table sends a layer to the bf16 path, the dispatched line takes that
    layer's bf16 step in place of its FP8 step; with no layer sent there, no such line."""
    slow_fp8 = _row("weights", 0.5)
    slow_fp8.ms["fp8_step"] = 2.0  # bf16 step 0.5 ms, FP8 step 2 ms, torch's 1 ms
    fast_fp8 = sb.StepRow(sb.Shape("tokens", 4096, 128, 128), dict(_row("t", 0.5).ms), ok=True)
    fast_fp8.ms["fp8_step"] = 0.25
    fast_fp8.snr.update(slow_fp8.snr)
    grouped_dispatch_table((128, 1, 128, 128, {"step": 0.5, "fp8_step": 2.0}))
    same = {"gpu": "test"}  # this run on the GPU the table names
    monkeypatch.setattr("kernel_ratchet.kernels.gemm.compare.versions", lambda: same)
    gmm = sb.TorchGmm("autograd")
    (line,) = [ln for ln in sb.summary([slow_fp8, fast_fp8], gmm) if "as dispatched" in ln]
    # the weight-heavy layer at 1 / 0.5 on bf16, the other (32x the tokens) at 1 / 0.25 on FP8
    assert line == (
        "FP8 step as dispatched (1 of 2 layers on the bf16 path) / torch bf16 step: "
        "geomean 2.83, min 2.00"
    )
    assert not any("measured with" in ln for ln in sb.summary([slow_fp8, fast_fp8], gmm))
    # the table written by the fixture names the GPU "test"; on another one the summary says so
    here = {"gpu": "NVIDIA H100", "torch": torch.__version__}
    monkeypatch.setattr("kernel_ratchet.kernels.gemm.compare.versions", lambda: here)
    (note,) = [ln for ln in sb.summary([slow_fp8, fast_fp8], gmm) if "measured with" in ln]
    assert "gpu test (here NVIDIA H100)" in note and "--fill-dispatch" in note
    grouped_dispatch_table()  # empty
    assert not any("as dispatched" in ln for ln in sb.summary([slow_fp8, fast_fp8], gmm))
