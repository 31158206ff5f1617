"""The config sweep's off-grid mode runs every bf16 candidate on the CPU interpreter (its
numbers there are not speed, and bf16 dots there are not right: the plumbing is the point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernel_ratchet.kernels.gemm import tune_odd

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize(
    "only,configs,gemms",
    [
        ("odd", tune_odd.ODD_BF16, {"bf16.fwd", "bf16.da", "bf16.db"}),
        ("decode", tune_odd.DECODE_BF16, {"bf16.fwd", "bf16.da"}),
    ],
)
def test_the_odd_sweep_times_the_shipped_config_and_every_candidate_next_to_the_vendor(
    tmp_path, only, configs, gemms
):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "kernel_ratchet.kernels.gemm.tune", "--smoke", "--only", only]
    done = subprocess.run(
        [*cmd, "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "sweep.json").read_text())["results"]
    assert not [r for r in rows if "error" in r], rows
    per = {}
    for r in rows:
        per.setdefault(r["what"], []).append(r["cfg"])
    assert set(per) == gemms
    for cfgs in per.values():  # the vendor, the bucket's own choice, then every candidate
        assert cfgs[:2] == ["vendor", "shipped"]
        assert cfgs[2:] == [repr(c) for c in configs]
    assert "BEST per kind/shape" in done.stdout


def test_the_bucket_table_scores_configs_on_every_gemm_of_their_bucket():
    from kernel_ratchet.kernels.gemm.configs import GemmConfig
    from kernel_ratchet.kernels.gemm.tune_cases import bucket_table

    fast, broken = repr(GemmConfig(64, 64, 128)), repr(GemmConfig(128, 64, 64))
    # two medium forward GEMMs (1000 x 1000 and 1000 x 2000 outputs) and the vendor's times
    rows = []
    for shape, vendor in (([1000, 1000, 2000], 1.0), ([1000, 2000, 1000], 2.0)):
        rows.append({"shape": shape, "what": "bf16.fwd", "cfg": "vendor", "ms": vendor})
        rows.append({"shape": shape, "what": "bf16.fwd", "cfg": "shipped", "ms": 2 * vendor})
        rows.append({"shape": shape, "what": "bf16.fwd", "cfg": fast, "ms": vendor, "snr": 55.0})
    # faster still, but wrong on one GEMM and absent from the other: not a candidate
    rows.append({"shape": [1000, 1000, 2000], "what": "bf16.fwd", "cfg": broken, "ms": 0.1})
    rows[-1]["snr"] = 3.0
    (line,) = bucket_table(rows)
    assert line.split()[:2] == ["bf16", "medium"]
    assert "shipped 0.500, best 1.000 64x64x128" in line
    assert line.endswith("; worst GEMM 2.00x of shipped (bf16.fwd 1000x1000x2000)")


def test_the_bucket_table_names_the_gemm_a_geomean_winner_loses_on():
    from kernel_ratchet.kernels.gemm.configs import GemmConfig
    from kernel_ratchet.kernels.gemm.tune_cases import bucket_table

    cand = repr(GemmConfig(16, 64, 128))
    rows = []
    for shape, ship, new in (([17, 11008, 4096], 2.0, 1.0), ([33, 4100, 8200], 1.0, 1.25)):
        rows.append({"shape": shape, "what": "bf16.fwd", "cfg": "vendor", "ms": 1.0})
        rows.append({"shape": shape, "what": "bf16.fwd", "cfg": "shipped", "ms": ship})
        rows.append({"shape": shape, "what": "bf16.fwd", "cfg": cand, "ms": new, "snr": 50.0})
    (line,) = bucket_table(rows)
    assert "best 0.894 16x64x128" in line  # geomean of 1.0 and 0.8 against 0.707 shipped
    assert line.endswith("worst GEMM 0.80x of shipped (bf16.fwd 33x4100x8200)")


def test_the_skinny_sweep_covers_skinny_linears_and_guards_the_model_shapes():
    from kernel_ratchet.kernels.gemm.configs import bucket_for
    from kernel_ratchet.kernels.gemm.tune import plan

    sweep, shapes = plan("skinny")
    assert sweep is tune_odd.sweep_skinny and shapes[-2:] == tune_odd.GUARD_SHAPES
    skinny = shapes[: len(tune_odd.SKINNY_SHAPES)]
    assert {bucket_for(M, N, K) for M, N, K in skinny} == {"skinny"}
    # the weight gradient (output N x K, contraction M): large outputs over a few k steps
    assert all(M <= 256 and bucket_for(N, K, M) == "large" for M, N, K in skinny)
    assert plan("odd")[1] == tune_odd.ODD_SHAPES + tune_odd.GUARD_SHAPES


def test_the_skinny_sweep_also_times_the_weight_gradient_on_the_gluon_kernel(monkeypatch):
    """Each Gluon config is a ``bf16.db`` case against cuBLAS's weight gradient; where the
    kernel does not take the operands (here: a CPU) the case fails loudly, as a result."""
    from kernel_ratchet.kernels.gemm.configs import FewRowsWgrad

    seen = []
    monkeypatch.setattr(tune_odd, "sweep_shape", lambda *a, **k: None)
    monkeypatch.setattr(tune_odd, "bench", lambda fn: 1.0)
    monkeypatch.setattr(
        tune_odd, "run_cases", lambda M, N, K, cases, vend, *a: seen.append((cases, vend))
    )
    monkeypatch.setattr(tune_odd.tune_cases, "DEVICE", "cpu")
    tune_odd.sweep_skinny(64, 256, 512, torch.Generator().manual_seed(0), 0.0, 1e9, [])
    ((cases, vend),) = seen
    assert vend == {"bf16.db": 1.0}
    assert [c[1] for c in cases] == tune_odd.FEW_ROWS_WGRADS and len(cases) == 5
    assert all(w == "bf16.db" and isinstance(c, FewRowsWgrad) for w, c, *_ in cases)
    assert all(c.max_rows >= 4096 and c.min_tiles == 0 for c in tune_odd.FEW_ROWS_WGRADS)
    what, cfg, fn, ref = cases[0]
    assert ref.shape == (256, 512)
    with pytest.raises(ValueError, match="does not take"):
        fn(cfg)


def _captured(monkeypatch, device="cpu", **kw):
    seen = []
    monkeypatch.setattr(tune_odd.tune_cases, "DEVICE", device)
    monkeypatch.setattr(tune_odd, "bench", lambda fn: 1.0)
    monkeypatch.setattr(tune_odd, "run_cases", lambda M, N, K, cases, *a: seen.append(cases))
    tune_odd.sweep_shape(64, 256, 512, torch.Generator().manual_seed(0), 0.0, 1e9, [], **kw)
    return seen[0]


def test_the_odd_sweep_times_the_forward_and_dgrad_on_the_ws_kernel_too(monkeypatch):
    """Each warp-specialized launch is a case of the forward and of the dgrad (its A is K-major:
    not the weight gradient's); where the kernel does not take the operands (a CPU) it fails
    loudly, as a result."""
    cases = _captured(monkeypatch, ws=tune_odd.WS16_CANDIDATES)
    ws = [(w, c) for w, c, *_ in cases if isinstance(c, tune_odd.Ws16)]
    want = [(w, c) for c in tune_odd.WS16_CANDIDATES for w in ("bf16.fwd", "bf16.da")]
    assert ws == want
    what, cfg, fn, ref = next(c for c in cases if isinstance(c[1], tune_odd.Ws16))
    assert ref.shape == (64, 256)
    with pytest.raises(ValueError, match="does not take"):
        fn(cfg)


def test_the_ws_candidates_are_swept_only_on_a_gpu_with_the_odd_configs(monkeypatch):
    assert not any(isinstance(c[1], tune_odd.Ws16) for c in _captured(monkeypatch))
    monkeypatch.setattr(tune_odd.torch, "randn", lambda *s, **k: torch.zeros(*s))
    assert any(isinstance(c[1], tune_odd.Ws16) for c in _captured(monkeypatch, "cuda"))
    decode = _captured(monkeypatch, "cuda", configs=tune_odd.DECODE_BF16)
    assert not any(isinstance(c[1], tune_odd.Ws16) for c in decode)
