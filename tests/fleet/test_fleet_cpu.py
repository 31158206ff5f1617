"""`ratchet fleet` on CPU workers of a local Dask cluster: the campaigns of two ops of the CPU
example at once, to their REPORTs, one of them resumed after its worker was killed mid-round;
run again, the fleet finds both ended and starts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kernel_ratchet.fleet.campaigns import FAULT_ENV
from tests.campaign.conftest import git, make_project, ratchet

OPS = ("tiny_gemm", "tiny_gemm_b")


def _two_ops(dest: Path) -> Path:
    """The example with a second op on the same kernel, both on one shape (fast rounds)."""
    root = make_project(dest)
    with open(root / "tiny_gemm/shapes.py", "a") as f:
        f.write("\nONE = TINY[:1]\n")
    prof = yaml.safe_load((root / "ratchet.yaml").read_text())
    prof["ops"]["tiny_gemm"]["shapes"] = "tiny_gemm.shapes:ONE"
    prof["ops"][OPS[1]] = dict(prof["ops"]["tiny_gemm"])
    (root / "ratchet.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    git(root, "commit", "-qm", "two ops, one shape", "--", "ratchet.yaml", "tiny_gemm/shapes.py")
    return root


@pytest.mark.slow
@pytest.mark.soak
def test_two_campaigns_at_once_one_resumed_after_its_worker_died(tmp_path):
    root = _two_ops(tmp_path / "proj")
    args = ("fleet", "--ops", ",".join(OPS), "--workers", "2", "--max-iterations", "1")
    r = ratchet(root, *args, **{FAULT_ENV: OPS[1]})  # kill -9 of OPS[1]'s worker mid-round
    assert r.returncode == 0, r.stdout + r.stderr
    fleet = json.loads((root / ".ratchet/campaigns/fleet.json").read_text())
    assert sorted(fleet) == sorted(OPS)
    for op, name in fleet.items():
        cdir = root / ".ratchet/campaigns" / name
        state = json.loads((cdir / "state.json").read_text())
        assert state["phase"] == "TERMINATED" and state["pending"] is None, (op, state)
        assert [e["round"] for e in state["closed"]] == [1, 2]
        assert (cdir / "report.md").exists()
        assert f"{op}  {name}  TERMINATED" in r.stderr  # the status view saw it end
    rounds = {
        op: json.loads(
            (root / ".ratchet/campaigns" / name / "rounds/round-2/round.json").read_text()
        )
        for op, name in fleet.items()
    }
    assert rounds[OPS[0]]["category"] != "interrupted"
    assert rounds[OPS[1]]["category"] == "interrupted"  # closed by the resume, not lost
    assert f"{OPS[1]}: its worker died" in r.stderr and "resuming campaign" in r.stderr
    killed = root / ".ratchet/campaigns" / fleet[OPS[1]]
    assert sorted(p.name for p in killed.glob("fleet-*.log")) == ["fleet-1.log", "fleet-2.log"]
    # run again: every campaign has ended, nothing is started and no campaign is added
    again = ratchet(root, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("it had ended before") == 2
    assert json.loads((root / ".ratchet/campaigns/fleet.json").read_text()) == fleet
    assert len([d for d in (root / ".ratchet/campaigns").iterdir() if d.is_dir()]) == 2
