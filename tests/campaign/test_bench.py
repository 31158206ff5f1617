"""``ratchet bench``: the project's benchmark command run (exit code, time limit, log) and
shown next to the harness's numbers of the same op, each labelled with its source."""

from __future__ import annotations

from pathlib import Path

import yaml

from kernel_ratchet.harness.csv_schema import read_csv
from tests.campaign.conftest import campaign_dir, make_project
from tests.cli_inprocess import run_cli

LINE = "tiny bench: 42 TFLOPS"


def _set_benchmark(root: Path, command: str | None) -> Path:
    path = root / "ratchet.yaml"
    data = yaml.safe_load(path.read_text())
    if command is None:
        data["ops"]["tiny_gemm"].pop("benchmark")
    else:
        data["ops"]["tiny_gemm"]["benchmark"] = command
    path.write_text(yaml.safe_dump(data))
    return path


def test_bench_shows_the_output_and_says_no_harness_numbers_yet(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj")
    profile = _set_benchmark(root, f"python -c 'print(\"{LINE}\")'")
    rc, text = run_cli(capsys, monkeypatch, "bench", "--profile", str(profile))
    assert rc == 0, text
    assert f"| {LINE}" in text and "exit code 0" in text
    assert "no measurement of tiny_gemm yet" in text
    (log,) = (root / ".ratchet" / "bench-logs" / "tiny_gemm").iterdir()
    assert LINE in log.read_text()


def test_bench_shows_the_incumbents_harness_numbers(project, capsys, monkeypatch):
    profile = _set_benchmark(project, "echo own-bench-ran")
    rc, text = run_cli(capsys, monkeypatch, "bench", "--op", "tiny_gemm", "--profile", str(profile))
    assert rc == 0, text
    cdir = campaign_dir(project)
    assert f"campaign {cdir.name}, incumbent round 1" in text and "own-bench-ran" in text
    table = read_csv(cdir / "rounds" / "round-1" / "artifacts" / "benchmark.csv")
    assert table.schema.fwd_metric in text
    for row in table.rows:
        assert row.label in text and f"{row.fwd:.4g}" in text


def test_a_failing_or_slow_benchmark_is_reported_and_exits_1(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj")
    profile = _set_benchmark(root, "echo partial; exit 3")
    rc, text = run_cli(capsys, monkeypatch, "bench", "--profile", str(profile))
    assert rc == 1 and "exit code 3" in text and "partial" in text
    _set_benchmark(root, "python -c 'import time; time.sleep(60)'")
    rc, text = run_cli(capsys, monkeypatch, "bench", "--timeout", "0.5", "--profile", str(profile))
    assert rc == 1 and "timed out" in text


def test_an_op_without_a_benchmark_is_a_usage_error(tmp_path, capsys, monkeypatch):
    root = make_project(tmp_path / "proj")
    profile = _set_benchmark(root, None)
    for args in ((), ("--op", "tiny_gemm")):
        rc, text = run_cli(capsys, monkeypatch, "bench", *args, "--profile", str(profile))
        assert rc == 2 and "benchmark" in text and "Fix:" in text
