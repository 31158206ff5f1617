"""A campaign whose HEAD is an earlier campaign's commit of the same round number (a second
campaign on the same op, started after merging the first one's branch): its accepted round is
still committed, not taken for a commit made before a crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.campaign.conftest import (  # noqa: F401  (fixtures used by name)
    KERNEL,
    baselined,
    campaign_dir,
    cli_env,
    git,
    project,
    set_blocks,
)

EARLIER = "[optimize] tiny_gemm TRITON round-2: an earlier campaign's accepted round"


def test_an_accepted_round_is_committed_atop_an_earlier_campaigns_round(project: Path) -> None:  # noqa: F811
    git(project, "commit", "-q", "--allow-empty", "-m", EARLIER)
    before = git(project, "rev-parse", "HEAD").strip()
    set_blocks(project, M=32, N=32)
    r = subprocess.run(
        [sys.executable, "-m", "tests.campaign.canned_cli", "validate", "--hypothesis", "32x32"],
        cwd=project,
        env=cli_env(project),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "ACCEPTED" in r.stdout, r.stdout + r.stderr
    head = git(project, "rev-parse", "HEAD").strip()
    assert head != before, "the accepted round was taken for the earlier campaign's commit"
    assert git(project, "log", "-1", "--format=%P", head).strip() == before
    assert not git(project, "status", "--porcelain", "--", KERNEL).strip()  # committed
    state = json.loads((campaign_dir(project) / "state.json").read_text())
    assert state["incumbent_commit"] == head and state["closed"][-1]["commit"] == head
