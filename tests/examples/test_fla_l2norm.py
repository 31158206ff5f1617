"""The worked example: fla-core's Triton L2 norm, onboarded unedited through the commands of
docs/your-kernel.md, rehearsed on the CPU (baseline measured through the whole harness).

Every process that loads the kernel imports fla (7-9 s on two cores). The default run starts
the rehearsal by hand, as documented (`ratchet init --rehearse`, whose preflight runs `ratchet
check`'s checklist, then `ratchet baseline`); the documented `ratchet check` and one-command
rehearsal, whose search round over fla's own autotune candidates loads it in four more
processes, run in the soak run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fla_l2norm"
RATCHET = (sys.executable, "-m", "kernel_ratchet.cli")
FOCUSED = "$ python -m kernel_ratchet.profile.focused l2norm\n"

Run = Callable[..., subprocess.CompletedProcess]


def _example(tmp_path: Path) -> tuple[Path, Run]:
    """The example set up by its setup.sh in a fresh repository; returns its root and a runner
    of commands there."""
    pytest.importorskip("fla.modules.norm.l2norm", reason="pip install fla-core==0.6.0 einops")
    root = tmp_path / "l2"
    shutil.copytree(EXAMPLE, root)
    # the kernel_ratchet of this checkout, as tests/campaign's commands run it, not the one an
    # editable install elsewhere may point at
    paths = [str(root), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    # `python` in setup.sh and in the profile's commands is this interpreter, as in an
    # activated environment
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)

    assert run("bash", "setup.sh").returncode == 0
    return root, run


def _baseline_test_log(root: Path) -> str:
    """The documented focused test, as the BASELINE ran it (fla's import takes seconds in every
    process that loads the kernel: the test runs it once, there)."""
    (campaign,) = (root / ".ratchet/campaigns").iterdir()
    return (campaign / "rounds/round-1/artifacts/test.log").read_text()


@pytest.mark.slow
def test_the_fla_l2norm_example_checks_and_measures_its_baseline(tmp_path):
    root, run = _example(tmp_path)
    init = run(*RATCHET, "init", "--op", "l2norm", "--rehearse", "--yes")  # checks first
    assert init.returncode == 0, init.stdout + init.stderr
    baseline = run(*RATCHET, "baseline")
    out = baseline.stdout + baseline.stderr
    assert baseline.returncode == 0 and "2/2 shapes PASS" in out, out[-2000:]
    focused = _baseline_test_log(root)
    assert focused.startswith(FOCUSED) and "2 passed, 0 failed" in focused, focused
    commits = run("git", "rev-list", "--all", "--count").stdout.strip()
    assert commits == "1", "a rehearsal committed something"


@pytest.mark.slow
@pytest.mark.soak  # the default run checks the example and measures its baseline (above)
def test_the_fla_l2norm_example_rehearses_as_documented(tmp_path):
    root, run = _example(tmp_path)
    check = run(*RATCHET, "check", "--op", "l2norm")
    assert check.returncode == 0, check.stdout + check.stderr
    rehearsal = run(*RATCHET, "run", "--rehearse", "--op", "l2norm", "--max-iterations", "1", "-y")
    out = rehearsal.stdout + rehearsal.stderr
    assert rehearsal.returncode == 0 and "BASELINE done" in out, out[-2000:]
    assert "round-2 REHEARSAL" in out, out[-2000:]  # a search round, rehearsed
    focused = _baseline_test_log(root)
    assert focused.startswith(FOCUSED) and "2 passed, 0 failed" in focused, focused
    commits = run("git", "rev-list", "--all", "--count").stdout.strip()
    assert commits == "1", "a rehearsal committed something"
