"""On a host with two GPUs of one model: a search campaign with `--gpus 0,1` reaches the same
best configuration as the one-GPU run of the same finite space (both run until the search has
nothing left; both wall times printed), and two campaigns of different ops run at once to
their REPORTs (`ratchet fleet`).

The projects are kernel-pack examples (``scaffold``, as `ratchet run --example` makes them)
measured on a few of their target shapes, so the whole file fits in minutes.
``RATCHET_FLEET_ROUNDS`` caps the rounds of each search (default 6)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kernel_ratchet.campaign.example import scaffold

torch = pytest.importorskip("torch")
pytest.importorskip("distributed")

OP, KNOBS = "gemm_fp8_tensorwise", "num_warps"  # one move per shape bucket, then neighbours
ROUNDS = int(os.environ.get("RATCHET_FLEET_ROUNDS", "6"))
#: A few of each op's target shapes (name in the scaffolded shapes module, its expression).
FEW = {"gemm": "model_shapes()[::12]", "quant": "quant_target()[::2]"}
two_gpus = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs"
)


def _project(dest: Path, ops: list[str]) -> Path:
    """One git project holding the kernel-pack examples of ``ops``, each on a few shapes."""
    prof: dict = {}
    for op in ops:
        root, _ = scaffold(op, dest.parent / f"{dest.name}-{op}", rehearse=False)
        entry = yaml.safe_load((root / "ratchet.yaml").read_text())
        pkg = entry["package"]
        with open(root / pkg / "shapes.py", "a") as f:
            f.write(f"\n\ndef few_shapes():\n    return {FEW[pkg.rsplit('_', 1)[1]]}\n")
        entry["ops"][op]["shapes"] = f"{pkg}.shapes:few_shapes"
        if not prof:
            shutil.copytree(root, dest, ignore=shutil.ignore_patterns(".git"))
            prof = entry
        else:
            shutil.copytree(root / pkg, dest / pkg)
            shutil.copy(root / f"tests/test_{op}.py", dest / "tests")
            prof["ops"][op] = entry["ops"][op]
    (dest / "ratchet.yaml").write_text(yaml.safe_dump(prof, sort_keys=False, width=100))
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=dest, check=True)
    who = ["-c", "user.email=t@localhost", "-c", "user.name=t"]
    subprocess.run(["git", *who, "commit", "-qm", "examples"], cwd=dest, check=True)
    return dest


def _ratchet(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def _search(dest: Path, *extra: str) -> tuple[str, float]:
    """The incumbent's tunables file after a search campaign that ran out of moves, and its
    wall time."""
    root = _project(dest, [OP])
    t0 = time.monotonic()
    _ratchet(
        root, "run", "--op", OP, "--knobs", KNOBS, "--max-iterations", str(ROUNDS), "-y", *extra
    )
    took = time.monotonic() - t0
    (cdir,) = (root / ".ratchet/campaigns").iterdir()
    why = json.loads((cdir / "state.json").read_text())["termination"]["reason"]
    assert "nothing left" in why, f"{why}: raise RATCHET_FLEET_ROUNDS (now {ROUNDS})"
    tunables = yaml.safe_load((root / "ratchet.yaml").read_text())["ops"][OP]["tunables"]
    return (root / tunables).read_text(), took


@pytest.mark.gpu
@pytest.mark.slow
@two_gpus
def test_two_gpus_reach_the_one_gpu_best_configuration(tmp_path):
    one, t_one = _search(tmp_path / "one")
    two, t_two = _search(tmp_path / "two", "--gpus", "0,1")
    print(
        f"\n{OP} search over {KNOBS} until exhausted: one GPU {t_one:.0f} s, two GPUs "
        f"{t_two:.0f} s ({t_two / t_one:.2f}x)"
    )
    assert two == one


@pytest.mark.gpu
@pytest.mark.slow
@two_gpus
def test_two_campaigns_of_different_ops_run_at_once(tmp_path):
    ops = [OP, "quant_fp8_rowwise"]
    root = _project(tmp_path / "pack", ops)
    t0 = time.monotonic()
    _ratchet(root, "fleet", "--ops", ",".join(ops), "--gpus", "0,1", "--max-iterations", "2")
    print(f"\nfleet of {', '.join(ops)} on two GPUs: {time.monotonic() - t0:.0f} s")
    fleet = json.loads((root / ".ratchet/campaigns/fleet.json").read_text())
    assert sorted(fleet) == sorted(ops)
    for name in fleet.values():
        state = json.loads((root / ".ratchet/campaigns" / name / "state.json").read_text())
        assert state["phase"] == "TERMINATED" and state["pending"] is None
        assert (root / ".ratchet/campaigns" / name / "report.md").exists()
