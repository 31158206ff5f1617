"""The worked example: fla-core's Triton L2 norm, onboarded unedited through the commands of
docs/your-kernel.md, rehearsed on the CPU (baseline measured through the whole harness)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fla_l2norm"


@pytest.mark.slow
def test_the_fla_l2norm_example_checks_and_rehearses_its_baseline(tmp_path):
    pytest.importorskip("fla.modules.norm.l2norm", reason="pip install fla-core==0.6.0 einops")
    root = tmp_path / "l2"
    shutil.copytree(EXAMPLE, root)
    paths = [str(root), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    # `python` in setup.sh and in the profile's commands is this interpreter, as in an
    # activated environment
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)

    assert run("bash", "setup.sh").returncode == 0
    ratchet = (sys.executable, "-m", "kernel_ratchet.cli")
    check = run(*ratchet, "check", "--op", "l2norm")
    assert check.returncode == 0, check.stdout + check.stderr
    rehearsal = run(*ratchet, "run", "--rehearse", "--op", "l2norm", "--max-iterations", "1", "-y")
    assert "BASELINE done" in rehearsal.stdout + rehearsal.stderr, rehearsal.stderr[-2000:]
    # the documented focused test, as the BASELINE ran it (fla's import takes seconds in every
    # process that loads the kernel: the test runs it once, there)
    (campaign,) = (root / ".ratchet/campaigns").iterdir()
    focused = (campaign / "rounds/round-1/artifacts/test.log").read_text()
    assert focused.startswith("$ python -m kernel_ratchet.profile.focused l2norm\n"), focused
    assert "2 passed, 0 failed" in focused, focused
    commits = run("git", "rev-list", "--all", "--count").stdout.strip()
    assert commits == "1", "a rehearsal committed something"
