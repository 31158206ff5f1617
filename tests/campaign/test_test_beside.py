"""An op whose focused test uses no GPU (``test_gpu: false``): the test runs with no device
visible, beside the round's harness and A/B; the round waits for it, a failed test rolls the
round back whatever was measured, and the round's seconds say how much ran at once."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.record import OVERLAP_STEP
from kernel_ratchet.campaign.render import other_seconds, time_line
from kernel_ratchet.campaign.rounds import measure
from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import campaign_dir, set_blocks

#: A focused test that writes what GPUs it was shown; when it passes, it first waits (60 s at
#: most) for the round's harness CSV, which it sees only if the harness ran beside it.
WAITER = """
import glob, os, sys, time
out, rc = sys.argv[1], int(sys.argv[2])
if rc:  # fails at once, but not faster than the round's seconds (0.1 s steps) can tell
    time.sleep(0.2)
    open(out, 'w').write(repr(os.environ.get('CUDA_VISIBLE_DEVICES')) + '\\nfailed at once')
    sys.exit(rc)
pattern = os.path.join('.ratchet', 'campaigns', '*', 'rounds', 'round-3', 'artifacts',
                       'benchmark.csv')
deadline = time.monotonic() + 60
while not glob.glob(pattern) and time.monotonic() < deadline:
    time.sleep(0.05)
seen = 'saw the harness CSV' if glob.glob(pattern) else 'no harness CSV'
with open(out, 'w') as f:
    f.write(repr(os.environ.get('CUDA_VISIBLE_DEVICES')) + '\\n' + seen)
sys.exit(rc)
"""


def _campaign(root: Path, monkeypatch, rc: int, tmp: Path) -> Campaign:
    """The accepted campaign with its op's test declared GPU-free and replaced by WAITER."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # what the test must not be shown
    monkeypatch.setattr(measure, "timing_on_gpu", lambda: True)  # a GPU round, timed on CPU
    monkeypatch.chdir(root)
    (tmp / "waiter.py").write_text(WAITER)  # outside the project: no file of a round
    profile = load_profile(root)
    op = dataclasses.replace(profile.op("tiny_gemm"), test_gpu=False)
    c = Campaign(
        dataclasses.replace(profile, ops={**profile.ops, "tiny_gemm": op}), campaign_dir(root)
    )
    return c


@pytest.mark.slow
@pytest.mark.parametrize("rc", [0, 1], ids=["passes", "fails"])
def test_a_gpu_free_test_runs_beside_the_measurement_and_still_gates(
    accepted_project, monkeypatch, rc, tmp_path
):
    root = accepted_project
    set_blocks(root, M=64, N=64)
    with _campaign(root, monkeypatch, rc, tmp_path) as c:
        cmd = f"{sys.executable} {tmp_path / 'waiter.py'} {tmp_path / 'seen.txt'} {rc}"
        c.ctx.m = c.ctx.m.with_(test_command=cmd)  # what the entered campaign runs
        rec = c.validate("64x64 output tiles")
        saved = json.loads((c.round_dir(rec.round) / "round.json").read_text())
    shown, seen = (tmp_path / "seen.txt").read_text().splitlines()
    sec = saved["seconds"]
    assert shown == "''" and sec["test"] > 0
    if rc:  # the round measured nothing once the test had failed
        assert rec.category == "test" and "focused test failed" in rec.reason
        assert saved["status"] == "ROLLED BACK" and saved["decision"] is None
        assert not {"harness_quick", "ab_quick"} & set(sec)
        assert not (c.round_dir(rec.round) / "artifacts" / "benchmark.csv").exists()
        return
    assert seen == "saw the harness CSV" and rec.decision is not None
    assert {"harness_quick", "ab_quick", OVERLAP_STEP} <= set(sec)
    assert sec["workers"] > 0  # the harness waited for the workers' start and checks
    # it ended with the harness, before the A/B: its seconds are its own, all of them beside
    assert sec["test"] < sec["measure"] - sec["ab_quick"]
    assert 0 < sec[OVERLAP_STEP] <= sec["test"] <= sec[OVERLAP_STEP] + 0.2


def test_the_round_time_counts_steps_that_ran_at_once_once():
    sec = {"test": 10.0, "harness_quick": 6.0, "ab_quick": 13.0, OVERLAP_STEP: 9.0, "measure": 22.0}
    assert other_seconds(sec) == pytest.approx(2.0)
    line = time_line(sec)
    assert (
        line == "22 s: test 10, harness_quick 6, ab_quick 13, other 2; 9 s of the steps ran at once"
    )
    assert other_seconds({**sec, OVERLAP_STEP: 0.0}) is None  # without it the steps overrun


def test_test_gpu_must_be_true_or_false_and_defaults_to_true(project):
    assert load_profile(project).op("tiny_gemm").test_gpu is True
    path = project / "ratchet.yaml"
    line = "    rebuild: null\n"
    path.write_text(path.read_text().replace(line, line + "    test_gpu: no GPU\n"))
    with pytest.raises(ProfileError, match=r"ops.tiny_gemm.test_gpu: expected true or false"):
        load_profile(project)
    path.write_text(path.read_text().replace("test_gpu: no GPU", "test_gpu: false"))
    assert load_profile(project).op("tiny_gemm").test_gpu is False
