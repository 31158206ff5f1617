"""Fault injection: `ratchet run` (search optimizer, CPU example) killed with kill -9 at random
moments; after each kill `status` and `resume`, and nothing may be lost or forged.

``RATCHET_FAULT_KILLS`` kills (default 1; set 20 for a long run), at moments drawn from
``RATCHET_FAULT_SEED`` (default 0). After each kill and at the end:

* no accepted commit lost: every ACCEPTED round's commit is an ancestor of the campaign branch,
  and no round was committed twice;
* no user edit lost: the user's uncommitted files outside kernel_source are unchanged;
* no record lost: rounds 1..n closed once each, every round directory has ``round.json`` and
  ``summary.md``, the trend has one row per round;
* tamper check clean: the append-only logs and the generated harness verify.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_ratchet.campaign.fsutil import file_sha256
from kernel_ratchet.campaign.journal import AppendOnlyLog
from tests.campaign.conftest import campaign_dir, cli_env, git, ratchet

KILLS = int(os.environ.get("RATCHET_FAULT_KILLS", "1"))
SEED = int(os.environ.get("RATCHET_FAULT_SEED", "0"))
#: Seconds after a driver starts (or, every other kill, after a round closed) at which it is
#: killed: it spends ~2 s importing, and a round of the CPU example takes 20-40 s.
WINDOW = (1.0, 20.0)
RUN = ("--optimizer", "search", "--max-iterations", "2", "--pause")


def _driver(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kernel_ratchet.cli", *args],
        cwd=root,
        env=cli_env(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _closed(root: Path) -> int:
    """Rounds closed so far (-1 while state.json is being replaced)."""
    try:
        return len(json.loads((campaign_dir(root) / "state.json").read_text())["closed"])
    except (OSError, ValueError, KeyError):
        return -1


def _user_files(root: Path) -> dict[str, str]:
    return {p: (root / p).read_text() for p in ("notes.txt", "pyproject.toml")}


def _check(root: Path, user: dict[str, str]) -> dict:
    """Every invariant of the module docstring; returns ``status --json``."""
    r = ratchet(root, "status", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads(r.stdout)
    cdir = campaign_dir(root)
    state = json.loads((cdir / "state.json").read_text())
    assert s["pending"] is None
    n = len(s["rounds"])
    assert [x["round"] for x in s["rounds"]] == list(range(1, n + 1))
    branch = f"optimize/{cdir.name}"
    assert git(root, "branch", "--show-current").strip() == branch
    subjects = git(root, "log", "--format=%s", branch).splitlines()
    for e in state["closed"]:
        if e["status"] == "ACCEPTED" and e["commit"]:
            ok = subprocess.run(
                ["git", "merge-base", "--is-ancestor", e["commit"], branch], cwd=root
            )
            assert ok.returncode == 0, f"round-{e['round']}'s commit is not on {branch}"
        marker = f" round-{e['round']}:"
        assert sum(marker in x for x in subjects if x.startswith("[optimize]")) <= 1
    assert _user_files(root) == user
    rounds = sorted(p.name for p in (cdir / "rounds").glob("round-*"))
    assert rounds == sorted(f"round-{i}" for i in range(1, n + 1))
    for name in rounds:
        assert (cdir / "rounds" / name / "round.json").exists(), name
        assert (cdir / "rounds" / name / "summary.md").exists(), name
    trend = (cdir / "logs/performance_trend.md").read_text().splitlines()
    assert sum(ln.startswith("| round-") for ln in trend) == n
    for rel in ("logs/optimize.md", "logs/performance_trend.md"):
        AppendOnlyLog(cdir, rel, state["logs"]).verify()
    assert file_sha256(cdir / "quick_test_bench.py") == state["harness_sha256"]
    return s


@pytest.mark.slow
@pytest.mark.soak
def test_kill_9_at_random_moments_loses_nothing(project):
    rng = random.Random(SEED)
    user = _user_files(project)
    name = campaign_dir(project).name
    proc = _driver(project, "run", "--campaign", name, *RUN, "--yes")
    landed = 0
    for i in range(KILLS):
        if i % 2:  # let a round close (accepted and committed, often) before the next kill
            closed = _closed(project)
            while proc.poll() is None and _closed(project) <= closed:
                time.sleep(0.2)
        deadline = time.monotonic() + rng.uniform(*WINDOW)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            landed += 1
        proc.wait()
        _check(project, user)
        proc = _driver(project, "resume", *RUN)
    proc.wait(timeout=900)
    s = _check(project, user)
    accepted = sum(x["status"] == "ACCEPTED" for x in s["rounds"][1:])
    interrupted = sum(x["category"] == "interrupted" for x in s["rounds"])
    print(
        f"\nfault injection: {landed}/{KILLS} kills landed (seed {SEED}); "
        f"{len(s['rounds'])} rounds closed, {accepted} accepted, {interrupted} interrupted; "
        "0 commits, edits or records lost"
    )
