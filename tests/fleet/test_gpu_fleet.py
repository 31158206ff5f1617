"""On a host with two GPUs of one model: a search campaign with `--gpus 0,1` reaches the same
best configuration as the one-GPU run of the same space (both wall times printed), and two
campaigns of different ops run at once to their REPORTs (`ratchet fleet`)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("distributed")

OP, KNOBS = "gemm_fp8_tensorwise", "num_warps,num_stages"
TUNABLES = "kernel_ratchet/kernels/gemm/configs.py"
two_gpus = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs"
)


def _ratchet(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=6 * 3600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def _search(dest: Path, *extra: str) -> tuple[str, float]:
    """The incumbent's tunables file after a whole search campaign, and its wall time."""
    t0 = time.monotonic()
    args = ("run", "--example", OP, "--dest", str(dest), "--knobs", KNOBS, "--yes")
    _ratchet(dest.parent, *args, "--max-iterations", "60", *extra)
    return (dest / TUNABLES).read_text(), time.monotonic() - t0


@pytest.mark.gpu
@pytest.mark.slow
@two_gpus
def test_two_gpus_reach_the_one_gpu_best_configuration(tmp_path):
    one, t_one = _search(tmp_path / "one")
    two, t_two = _search(tmp_path / "two", "--gpus", "0,1")
    print(
        f"\n{OP} search over {KNOBS}: one GPU {t_one:.0f} s, two GPUs {t_two:.0f} s "
        f"({t_two / t_one:.2f}x)"
    )
    assert two == one


@pytest.mark.gpu
@pytest.mark.slow
@two_gpus
def test_two_campaigns_of_different_ops_run_at_once(tmp_path):
    dest = tmp_path / "pack"
    _ratchet(tmp_path, "run", "--example", OP, "--dest", str(dest), "--max-iterations", "1", "-y")
    ops = f"{OP},quant_fp8_rowwise"
    _ratchet(dest, "fleet", "--ops", ops, "--gpus", "0,1", "--max-iterations", "3")
    reports = sorted(dest.glob(".ratchet/campaigns/*/report.md"))
    assert len(reports) >= 3  # the scaffold's own campaign and the two of the fleet
