"""ANALYZE's profile of the incumbent: the kernel table, the Nsight Compute CSV, the markdown,
and the breakdown process on the tiny example (CPU: the mechanics; the numbers of a Triton
interpreter run are meaningless for tuning, and say so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ratchet.campaign.profiling import (
    NCU_DETAIL,
    NCU_L2,
    NCU_METRICS,
    ncu_metrics,
    parse_ncu_csv,
    render_md,
)
from kernel_ratchet.harness.breakdown import TOP, device_rows, kernel_table

TINY = Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm"


def test_kernel_table_orders_by_time_and_sums_the_tail():
    rows = [(f"k{i}", 2 * (i + 1), float(i + 1) * 1000.0) for i in range(TOP + 3)]
    rows.append(("cpu_side_op", 5, 0.0))  # no device time: not a kernel of the phase
    t = kernel_table(rows, iters=2)
    total_us = sum(float(i + 1) * 1000.0 for i in range(TOP + 3))
    assert t["total_ms"] == pytest.approx(total_us / 1e3 / 2)
    assert [k["name"] for k in t["kernels"][:2]] == [f"k{TOP + 2}", f"k{TOP + 1}"]
    assert t["kernels"][0]["calls"] == TOP + 3 and t["kernels"][0]["ms"] == (TOP + 3) / 2
    assert t["kernels"][-1]["name"] == "other (3 kernels)"
    assert t["kernels"][-1]["ms"] == pytest.approx((1 + 2 + 3) / 2)
    assert sum(k["share"] for k in t["kernels"]) == pytest.approx(1.0)


def test_device_rows_keep_device_work_and_count_each_kernel_once():
    """A Triton launch has no aten op: the profiler puts the autograd Function's annotation on
    the GPU timeline around its kernels. Counting it too doubled the phase's time."""
    ev = [
        {"ph": "X", "cat": "gpu_user_annotation", "name": "GroupedFn", "dur": 4500.0},
        {"ph": "X", "cat": "kernel", "name": "_mm_kernel", "dur": 3600.0},
        {"ph": "X", "cat": "kernel", "name": "_quant_kernel", "dur": 500.0},
        {"ph": "X", "cat": "kernel", "name": "_quant_kernel", "dur": 300.0},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "dur": 10.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 5.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "dur": 2.0},
        {"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "dur": 1500.0},
        {"ph": "i", "cat": "kernel", "name": "marker"},
    ]
    rows = sorted(device_rows({"traceEvents": ev}))
    assert rows == [
        ("Memset (Device)", 1, 10.0),
        ("_mm_kernel", 1, 3600.0),
        ("_quant_kernel", 2, 800.0),
    ]
    assert kernel_table(rows, iters=1)["total_ms"] == pytest.approx(4.41)


def test_ncu_target_captures_kernels_launched_from_another_thread(monkeypatch):
    """Autograd runs a CUDA backward on its own thread: the capture must be process-wide
    (cudaProfilerStart/Stop), not an NVTX push/pop range, which holds one thread's launches."""
    import threading

    import torch

    from kernel_ratchet.harness import breakdown

    log = []
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: log.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: log.append("stop"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)

    class Adapter:
        has_backward = True

        def make_case(self, shape, seed, device):
            return None

        def forward(self, case):
            log.append("fwd")

        def backward(self, case):
            t = threading.Thread(target=lambda: log.append("bwd"))
            t.start()
            t.join()

    breakdown.ncu_target(Adapter(), None)
    assert log == ["fwd", "bwd", "start", "fwd", "bwd", "stop"]


NCU_CSV = "\n".join(
    [
        "==PROF== Connected to process 123 (/usr/bin/python3)",
        '==PROF== Profiling "_gemm_kernel": 0%....50%....100% - 9 passes',
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        + ",".join(f'"{m}"' for m in NCU_METRICS),
        '"","","","","","","",' + '"nsecond","%","%","register/thread","%"',
        '"0","123","python3","h","_quant_kernel","1","7","5,120","12.5","80.1","32","60"',
        '"1","123","python3","h","_gemm_kernel","1","7","1,000,000","70","30","168","12"',
        '"2","123","python3","h","_gemm_kernel","1","7","1,200,000","72","31","168","12.5"',
        "==PROF== Disconnected from process 123",
    ]
)


def test_ncu_csv_is_read_per_kernel_skipping_log_and_units_rows():
    kernels = parse_ncu_csv(NCU_CSV)
    assert [k["name"] for k in kernels] == ["_gemm_kernel", "_quant_kernel"]
    gemm = kernels[0]
    assert gemm["launches"] == 2
    assert gemm["metrics"][NCU_METRICS[0]] == pytest.approx(1.1e6)
    assert gemm["metrics"]["launch__registers_per_thread"] == 168
    assert kernels[1]["metrics"][NCU_METRICS[0]] == 5120
    assert parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - no permission") == []


#: The same report with the detail metrics: L2 %, cycles per issue, then the four stalls.
NCU_DETAIL_CSV = "\n".join(
    [
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        + ",".join(f'"{m}"' for m in (*NCU_METRICS, *NCU_DETAIL)),
        '"","","","","","","",' + '"nsecond","%","%","register/thread","%"' + ',"%"' + ',""' * 5,
        '"0","1","p","h","_ws_kernel","1","7","545,000","66.8","23.3","168","12",'
        '"76.4","7.69","2.85","0.4","1.2","0.3"',
    ]
)


def test_ncu_detail_says_where_a_kernels_warps_wait():
    (k,) = parse_ncu_csv(NCU_DETAIL_CSV)
    assert k["metrics"][NCU_L2] == pytest.approx(76.4)
    prof = {"key": {}, "method": "M", "phases": {}, "ncu": {"method": "N", "kernels": [k]}}
    md = "\n".join(render_md(prof))
    assert "| Kernel | L2 % of peak | cycles per issue | barrier | long_scoreboard |" in md
    assert "| `_ws_kernel` | 76.4 | 7.69 | 37% | 5% | 16% | 4% |" in md


def _fake_ncu(tmp_path: Path, monkeypatch, knows_detail: bool) -> Path:
    """An ``ncu`` on the PATH that prints a report, or refuses the detail metrics."""
    report = tmp_path / "report.csv"
    report.write_text(NCU_DETAIL_CSV if knows_detail else NCU_CSV)
    refuse = (
        ""
        if knows_detail
        else 'case "$*" in *lts__*) echo "==ERROR== Failed to find metric lts__x"; exit 1;; esac\n'
    )
    ncu = tmp_path / "bin" / "ncu"
    ncu.parent.mkdir()
    ncu.write_text(f"#!/bin/sh\n{refuse}cat {report}\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{ncu.parent}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "out"


@pytest.mark.parametrize("knows_detail", [True, False], ids=["detail", "plain-fallback"])
def test_an_ncu_that_lacks_a_detail_metric_still_gives_the_plain_ones(
    tmp_path, monkeypatch, knows_detail
):
    out = _fake_ncu(tmp_path, monkeypatch, knows_detail)
    out.mkdir()
    ncu = ncu_metrics(["python", "-c", "pass"], tmp_path, out)
    assert [k["name"] for k in ncu["kernels"]][0] in ("_ws_kernel", "_gemm_kernel")
    if knows_detail:
        assert "detail_error" not in ncu and NCU_L2 in ncu["method"]
    else:
        assert "Failed to find metric" in ncu["detail_error"]
        assert NCU_L2 not in ncu["method"]
        md = "\n".join(render_md({"key": {}, "method": "M", "phases": {}, "ncu": ncu}))
        assert "Stalls: not measured (ncu gave no metrics" in md


def test_markdown_names_the_shape_the_method_and_a_failure():
    prof = {
        "key": {"shape": "s1", "incumbent_round": 3},
        "method": "M",
        "reused_from": "round-4",
        "phases": {"fwd": kernel_table([("k", 1, 2000.0)], 1)},
        "ncu": {"error": "ncu is not on the PATH"},
    }
    md = "\n".join(render_md(prof))
    assert "(s1, incumbent round-3)" in md and "Measured: M. Reused from round-4." in md
    assert "| `k` | 1 | 2 | 100.0% |" in md and "Nsight Compute: none (ncu is not on" in md
    failed = "\n".join(render_md({"key": {"shape": "s1"}, "error": "the profile failed: x"}))
    assert "Not measured: the profile failed: x" in failed


def test_breakdown_process_profiles_the_phases_of_an_adapter(tmp_path):
    out = tmp_path / "b.json"
    shape = {"label": "t", "M": 32, "N": 32, "K": 32, "B": 1}
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernel_ratchet.harness.breakdown",
            "--root",
            str(TINY),
            "--adapter",
            "tiny_gemm.adapter:TinyGemm",
            "--shape",
            json.dumps(shape),
            "--device",
            "cpu",
            "--iters",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())
    assert prof["shape"]["label"] == "t" and prof["device"] == "cpu"
    assert "meaningless for tuning" in prof["method"]
    assert set(prof["phases"]) == {"fwd"}  # a forward-only adapter: no backward is called
    assert prof["phases"]["fwd"]["kernels"] and prof["phases"]["fwd"]["total_ms"] > 0


REPO = Path(__file__).resolve().parents[2]


def _pack_gemm_kernels() -> set[str]:
    """The names of the Triton and Gluon kernels (``*_kernel``; the other jit functions are
    inlined) the pack's dense GEMM modules define: the dispatch picks among them by shape and
    GPU, so a profile names one of these."""
    import importlib
    import pkgutil

    import kernel_ratchet.kernels.gemm as pack

    names = set()
    for info in pkgutil.iter_modules(pack.__path__):
        module = importlib.import_module(f"{pack.__name__}.{info.name}")
        for obj in vars(module).values():
            if "JITFunction" in type(obj).__name__ and callable(getattr(obj, "fn", None)):
                names.add(obj.fn.__name__)
    return {name for name in names if name.endswith("_kernel")}


@pytest.mark.gpu
def test_gpu_breakdown_and_ncu_of_the_bf16_gemm(tmp_path):
    """On the H200: the forward and backward tables name one of the pack's GEMM kernels as the
    main cost; Nsight Compute either gives its metrics or says why not (recorded, never raised)."""
    from kernel_ratchet.campaign.profiling import ncu_metrics

    shape = {"label": "s", "M": 4096, "N": 4096, "K": 4096, "B": 1}
    cmd = [
        sys.executable,
        "-m",
        "kernel_ratchet.harness.breakdown",
        "--root",
        str(REPO),
        "--adapter",
        "kernel_ratchet.kernels.gemm.adapter:GemmBf16",
        "--shape",
        json.dumps(shape),
        "--device",
        "cuda",
    ]
    out = tmp_path / "b.json"
    r = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())
    assert set(prof["phases"]) == {"fwd", "bwd"} and "device time" in prof["method"]
    top = prof["phases"]["fwd"]["kernels"][0]
    ours = _pack_gemm_kernels()
    assert top["name"] in ours and top["share"] > 0.5, (prof["phases"]["fwd"], sorted(ours))
    # 2·4096³ flops in the forward: its kernel time must be a plausible H200 time (0.1-2 ms)
    assert 0.1 < prof["phases"]["fwd"]["total_ms"] < 2.0, prof["phases"]["fwd"]
    ncu = ncu_metrics(cmd, REPO, tmp_path)
    print(json.dumps(ncu, indent=1)[:3000])  # the device log keeps what ncu said
    assert "kernels" in ncu or ncu["error"]
    if "kernels" in ncu:
        assert any("gemm" in k["name"].lower() for k in ncu["kernels"])
        # the forward's GEMM and the backward's two (autograd's thread launches those)
        assert sum(k["launches"] for k in ncu["kernels"]) >= 3, ncu["kernels"]
