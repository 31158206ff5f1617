"""Rendering quick_test_bench.py (kernel_ratchet.harness.generate) and running the result."""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernel_ratchet.campaign.rounds.paired import gpu_paired_timing
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.csv_schema import SCHEMAS, read_csv
from kernel_ratchet.harness.generate import render_quick_bench
from kernel_ratchet.harness.level_timing import (
    MEMORY_TIMING,
    QUICK_SAMPLES,
    level_params,
    quick_timing,
)

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "examples" / "tiny_gemm"

SHAPES = [Shape("m16_n16_k16", M=16, N=16, K=16).to_dict()]
TARGET = [
    Shape("m16_n16_k16", M=16, N=16, K=16).to_dict(),
    Shape("m33_n47_k40", M=33, N=47, K=40).to_dict(),
    Shape("g", M=8, N=8, K=8, B=2, params={"dist": "skewed", "it's": [1, 2.5]}).to_dict(),
]
HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"
PARAMS = {"samples": 2, "warmup": 0, "min_sample_ms": 0.1}


def _render(path: Path, **over) -> str:
    kw = dict(
        campaign="tiny-cpu-20250101",
        op="gemm",
        backend="triton",
        path=str(path),
        project_root=str(TINY),
        adapter="tiny_gemm.adapter:TinyGemm",
        schema="gemm",
        engine="perf_counter",
        engine_params=PARAMS,
        seed=7,
        shapes=SHAPES,
        target_shapes=TARGET,
    )
    kw.update(over)
    return render_quick_bench(**kw)


def _assignments(text: str) -> dict[str, object]:
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:  # not a literal (PROJECT_ROOT is computed from __file__)
                continue
    return out


def test_rendered_file_compiles_and_its_literals_equal_the_inputs(tmp_path):
    text = _render(tmp_path / "q.py")
    compile(text, "quick_test_bench.py", "exec")
    values = _assignments(text)
    assert values["SHAPES"] == SHAPES
    assert values["TARGET_SHAPES"] == TARGET
    assert values["ADAPTER"] == "tiny_gemm.adapter:TinyGemm"
    assert values["SCHEMA"] == "gemm"
    assert values["TIMING_ENGINE"] == "perf_counter"
    assert values["TIMING_PARAMS"] == PARAMS
    assert values["SEED"] == 7
    assert "tiny-cpu-20250101" in text


def test_exec_without_main_defines_the_constants_and_runs_nothing(tmp_path):
    script = tmp_path / "campaign" / "quick_test_bench.py"
    text = _render(script, shapes=[], target_shapes=[])
    ns: dict[str, object] = {"__name__": "not_main", "__file__": str(script)}
    exec(compile(text, str(script), "exec"), ns)
    assert ns["SHAPES"] == [] and ns["TARGET_SHAPES"] == []
    assert ns["PROJECT_ROOT"] == str(TINY)  # resolved relative to the file's own location
    assert "main" not in ns  # the runtime is imported only under __main__


def test_rendering_is_deterministic(tmp_path):
    assert _render(tmp_path / "q.py") == _render(tmp_path / "q.py")
    assert _render(tmp_path / "q.py") != _render(tmp_path / "q.py", seed=8)


def test_missing_template_variable_is_an_error(tmp_path):
    with pytest.raises(TypeError):
        render_quick_bench(campaign="c")  # type: ignore[call-arg]


def _run(script: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TINY), str(REPO), env.get("PYTHONPATH", "")])
    if HAS_CUDA:  # the real kernel on the GPU; the generated file itself sets the CPU fallback
        env.pop("TRITON_INTERPRET", None)
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=180,
    )


@pytest.mark.slow
def test_generated_file_runs_tiny_gemm_and_writes_a_passing_csv(tmp_path):
    script = tmp_path / "quick_test_bench.py"
    script.write_text(_render(script, engine_params={**PARAMS, "samples": 5}))
    csv = tmp_path / "artifacts" / "benchmark.csv"
    proc = _run(script, "--summary-csv", str(csv), "--level", "quick", "--device", DEVICE)
    assert proc.returncode == 0, proc.stderr
    table = read_csv(csv, expected=SCHEMAS["gemm"])
    (row,) = table.rows
    assert (row.label, row.M, row.N, row.K, row.check) == ("m16_n16_k16", 16, 16, 16, "PASS")
    assert row.fwd > 0 and row.fwd_ms > 0 and row.snr["out_snr"] >= 80.0
    assert math.isnan(row.bwd)
    assert f'"device": "{DEVICE}"' in proc.stderr
    assert '"engine": "perf_counter"' in proc.stderr and '"seed": 7' in proc.stderr
    # the quick level's times are diagnostics: fewer samples than the campaign's own
    meta = json.loads(proc.stderr.strip().splitlines()[-1].removeprefix("[harness] "))
    assert meta["engine"]["samples"] == QUICK_SAMPLES < 5


def test_the_quick_level_takes_at_most_its_samples_and_the_full_level_all():
    params = {"samples": 10, "sample_ms": 50.0}
    assert level_params(params, "quick") == {"samples": QUICK_SAMPLES, "sample_ms": 50.0}
    assert level_params(params, "full") == params
    assert level_params({"samples": 2}, "quick") == {"samples": 2}  # never more samples
    assert level_params({}, "quick") == {}  # the engine's own default
    assert params == {"samples": 10, "sample_ms": 50.0}  # the campaign's are not changed


@pytest.mark.slow
def test_generated_file_without_shapes_exits_2(tmp_path):
    script = tmp_path / "quick_test_bench.py"
    script.write_text(_render(script, shapes=[]))
    csv = tmp_path / "b.csv"
    proc = _run(script, "--summary-csv", str(csv), "--device", DEVICE)
    assert proc.returncode == 2, proc.stderr
    assert not csv.exists()


def test_a_memory_campaigns_quick_harness_times_as_its_paired_requests_do():
    gpu = {"samples": 10, "sample_ms": 50.0, "settle_max_ms": 1000.0}
    quick = quick_timing(gpu, "memory")
    assert quick == MEMORY_TIMING and quick_timing(gpu, "compute_fwd_bwd") == {}
    assert quick_timing(PARAMS, "memory") == {}  # CPU timing has no samples of a length
    params = level_params(gpu, "quick", quick)
    assert params == {**gpu, **MEMORY_TIMING, "samples": QUICK_SAMPLES}
    assert level_params(gpu, "full", quick) == gpu  # the full level is the campaign's own
    assert gpu_paired_timing("memory").items() >= MEMORY_TIMING.items()  # a paired request's
    text = _render(Path("quick_test_bench.py"), engine_params=gpu, quick_params=quick)
    assert _assignments(text)["QUICK_TIMING"] == MEMORY_TIMING
    assert "quick_params=QUICK_TIMING" in text
    assert _assignments(_render(Path("q.py")))["QUICK_TIMING"] == {}
