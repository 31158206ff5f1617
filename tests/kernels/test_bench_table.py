"""The benchmark tables: a results file recorded from a bench CSV, rendered per op family with
its command, environment and geometric-mean line."""

from __future__ import annotations

import json
import math

import pytest

from kernel_ratchet.harness.csv_schema import GEMM_COLUMNS
from kernel_ratchet.kernels import bench_table as bt
from kernel_ratchet.kernels.gemm.bench import VENDOR_COLUMNS

ENV = {"GPU": "NVIDIA H200", "driver": "580", "torch": "2.11.0", "triton": "3.6.0"}


def _gemm_rows() -> list[dict[str, str]]:
    header = [*GEMM_COLUMNS, *VENDOR_COLUMNS]
    values = [
        ["a.mb1", 1, 64, 128, 256, "PASS", 600, 1, 400, 1, 0.1, 0.2, 55.6, 55.5, 55.4]
        + [480, "cublas", 500, 500, 500, 50.0, 1.2, 0.8, 0.96],
        ["b.mb1", 1, 64, 128, 512, "PASS", 150, 1, 100, 1, 0.1, 0.2, 55.6, 55.5, 55.4]
        + [120, "cublas", 100, 125, 120, 50.0, 1.5, 0.8, 1.0],
        ["c.mb1", 1, 64, 128, 512, "FAIL", 1, 1, 1, 1, 0.1, 0.2, 1, 1, 1]
        + [1, "cublas", 1, 1, 1, 1, 1, 1, 1],
    ]
    return [dict(zip(header, map(str, v), strict=True)) for v in values]


def test_a_results_file_round_trips_and_needs_rows_and_a_known_family():
    res = bt.Results("gemm_bf16", "Dense GEMM, bf16", "python -m x", ENV, _gemm_rows())
    assert bt.Results.from_dict(json.loads(json.dumps(res.to_dict()))) == res
    with pytest.raises(ValueError, match="at least one row"):
        bt.Results("gemm_bf16", "t", "c", ENV, [])
    with pytest.raises(ValueError, match="no table layout"):
        bt.Results("softmax", "t", "c", ENV, _gemm_rows())
    assert bt.layout_for("grouped_gemm_bf16") is bt.LAYOUTS["grouped_gemm_"]


def test_the_gemm_table_has_every_row_and_geomeans_over_pass_rows_only():
    res = bt.Results("gemm_bf16", "Dense GEMM, bf16", "python -m x -o a.csv", ENV, _gemm_rows())
    lines = bt.table(res).splitlines()
    assert lines[0].startswith("| shape | M | N | K | check | fwd | vendor fwd | fwd ratio |")
    assert len(lines) == 2 + 3 + 1
    assert lines[2].startswith("| a.mb1 | 64 | 128 | 256 | PASS | 600 | 500 | 1.200 | 400 |")
    assert lines[2].endswith("| 55.6/55.5/55.4 |")
    geo = [c.strip() for c in lines[-1].strip("|").split("|")]
    assert geo[0] == "**geomean** (2/3 PASS)" and geo[1:5] == ["", "", "", ""]
    assert geo[5] == "**300**" and geo[7] == f"**{math.sqrt(1.2 * 1.5):.3f}**"


def test_grouped_rows_show_the_step_and_the_ratio_to_the_same_models_uniform():
    header = [*GEMM_COLUMNS, "loop TFLOPS", "torch._grouped_mm TFLOPS", "dense TFLOPS"]
    header += ["dense bwd TFLOPS", "fwd / dense"]
    cells = {
        "m_gate_up_uniform": [565, 385],
        "m_gate_up_skewed": [417, 319],
    }
    rows = []
    for label, (fwd, bwd) in cells.items():
        v = [label, 8, 1024, 64, 32, "PASS", fwd, 0, bwd, 0, 1, 1, 55.6, 55.6, 55.6]
        rows.append(dict(zip(header, map(str, v + [500, 600, 685, 600, fwd / 685]), strict=True)))
    lines = bt.table(bt.Results("grouped_gemm_bf16", "t", "c", ENV, rows)).splitlines()
    uniform = [c.strip() for c in lines[2].strip("|").split("|")]
    skewed = [c.strip() for c in lines[3].strip("|").split("|")]
    assert uniform[8] == "431" and uniform[13] == "1.000"  # 6 / (2/565 + 4/385)
    assert skewed[13] == f"{417 / 565:.3f}"


def test_record_reads_the_csv_and_render_states_command_and_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(bt, "environment", lambda: dict(ENV))
    path = tmp_path / "bench.csv"
    rows = _gemm_rows()
    path.write_text(",".join(rows[0]) + "\n" + "\n".join(",".join(r.values()) for r in rows))
    out = tmp_path / "gemm_bf16.json"
    code = bt.main(
        ["record", "--op", "gemm_bf16", "--csv", str(path), "--command", "python -m bench -o b.csv"]
        + ["--title", "Dense GEMM, bf16", "--note", "one cell per Timer run", "-o", str(out)]
    )
    assert code == 0
    res = bt.Results.from_dict(json.loads(out.read_text()))
    assert res.rows == rows and res.environment == ENV and res.notes == ("one cell per Timer run",)
    (tmp_path / "pre.md").write_text("# Benchmarks\n")
    page = tmp_path / "page.md"
    assert (
        bt.main(["render", str(out), "--preamble", str(tmp_path / "pre.md"), "-o", str(page)]) == 0
    )
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\n### Dense GEMM, bf16 (`gemm_bf16`)\n")
    assert "Environment: GPU NVIDIA H200, driver 580, torch 2.11.0, triton 3.6.0." in text
    assert "```\npython -m bench -o b.csv\n```" in text and "- one cell per Timer run" in text


def test_record_takes_the_measuring_machines_environment_and_refuses_half_of_one(tmp_path):
    path = tmp_path / "bench.csv"
    rows = _gemm_rows()
    path.write_text(",".join(rows[0]) + "\n" + "\n".join(",".join(r.values()) for r in rows))
    out = tmp_path / "gemm_bf16.json"
    base = ["record", "--op", "gemm_bf16", "--csv", str(path), "--command", "c", "-o", str(out)]
    full = {**ENV, "Python": "3.12.3"}
    env = [f"--env={k}={v}" for k, v in full.items()]
    assert bt.main(base + env) == 0
    assert bt.Results.from_dict(json.loads(out.read_text())).environment == full
    out.unlink()
    with pytest.raises(SystemExit, match="missing .*Python"):
        bt.main(base + [e for e in env if "Python" not in e])
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        bt.main([*base, "--env", "GPU"])
    assert not out.exists()


def test_the_committed_page_is_the_render_of_the_committed_results():
    """docs/benchmarks.md is generated: a note edited in the page alone is lost at the next
    render, so the page must be what its documented render command writes."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    order = ["gemm_bf16", "gemm_fp8_tensorwise", "gemm_fp8_rowwise", "gemm_fp8_blockwise"]
    order += ["grouped_gemm_bf16", "grouped_gemm_fp8_blockwise"]
    order += ["quant_fp8_dual", "quant_fp8_blockwise", "quant_fp8_rowwise"]
    results = [
        bt.Results.from_dict(json.loads((docs / "benchmarks" / f"{n}.json").read_text()))
        for n in order
    ]
    page = bt.render(results, (docs / "benchmarks" / "preamble.md").read_text())
    assert (docs / "benchmarks.md").read_text() == page, (
        "docs/benchmarks.md differs from the render of docs/benchmarks/*.json: edit the results "
        "file (its notes) and render the page with the command at its top"
    )


def test_measuring_again_keeps_the_sections_title_and_notes(tmp_path, monkeypatch):
    """A results file recorded again from a new CSV keeps the text that explains its table
    unless the command gives new text; another op's file gives none of its own."""
    monkeypatch.setattr(bt, "environment", lambda: dict(ENV))
    path = tmp_path / "bench.csv"
    rows = _gemm_rows()
    path.write_text(",".join(rows[0]) + "\n" + "\n".join(",".join(r.values()) for r in rows))
    out = tmp_path / "r.json"
    base = ["record", "--csv", str(path), "--command", "c", "-o", str(out)]

    def recorded(*extra: str) -> bt.Results:
        assert bt.main([*base, *extra]) == 0
        return bt.Results.from_dict(json.loads(out.read_text()))

    first = recorded("--op", "gemm_bf16", "--title", "Dense GEMM", "--note", "GB/s = bytes / t")
    again = recorded("--op", "gemm_bf16")
    assert (
        (again.title, again.notes)
        == (first.title, first.notes)
        == (
            "Dense GEMM",
            ("GB/s = bytes / t",),
        )
    )
    assert recorded("--op", "gemm_bf16", "--note", "new").notes == ("new",)
    other = recorded("--op", "quant_fp8_dual")
    assert (other.title, other.notes) == ("quant_fp8_dual", ())
