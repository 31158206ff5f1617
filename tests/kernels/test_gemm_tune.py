"""The config sweep's off-grid mode runs every bf16 candidate on the CPU interpreter (its
numbers there are not speed, and bf16 dots there are not right: the plumbing is the point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ratchet.kernels.gemm import tune_odd

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_odd_sweep_times_the_shipped_config_and_every_candidate_next_to_the_vendor(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "kernel_ratchet.kernels.gemm.tune", "--smoke", "--only", "odd"]
    done = subprocess.run(
        [*cmd, "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "sweep.json").read_text())["results"]
    assert not [r for r in rows if "error" in r], rows
    per = {}
    for r in rows:
        per.setdefault(r["what"], []).append(r["cfg"])
    assert set(per) == {"bf16.fwd", "bf16.da", "bf16.db"}
    for cfgs in per.values():  # the vendor, the bucket's own choice, then every candidate
        assert cfgs[:2] == ["vendor", "shipped"]
        assert cfgs[2:] == [repr(c) for c in tune_odd.ODD_BF16]
    assert "BEST per kind/shape" in done.stdout
