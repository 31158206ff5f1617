"""A parallel round on CPU workers of a local Dask cluster, on the CPU example with round-2
accepted: the same code path as `ratchet run --gpus`, with one candidate's worker killed while
it measures; the candidates' slots (git worktrees) are gone when the campaign ends, their
records kept. The campaign's incumbent (32x32 tiles) keeps the surviving candidate's round
short in the interpreter."""

from __future__ import annotations

import json

import pytest

from kernel_ratchet.campaign.candidate import FAULT_ENV
from tests.campaign.conftest import KERNEL, campaign_dir, git, ratchet


@pytest.mark.slow
def test_a_killed_worker_loses_its_candidate_not_the_round(accepted_project):
    root, cdir = accepted_project, campaign_dir(accepted_project)
    start = git(root, "rev-parse", "HEAD").strip()
    args = ("run", "--campaign", cdir.name, "--workers", "2", "--max-iterations", "2", "--yes")
    r = ratchet(root, *args, **{FAULT_ENV: "3"})  # round-3's worker is killed (kill -9)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = {n: json.loads((cdir / f"rounds/round-{n}/round.json").read_text()) for n in (3, 4)}
    assert rec[3]["status"] == "ROLLED BACK" and rec[3]["category"] == "interrupted"
    assert "died" in rec[3]["reason"]
    assert rec[4]["category"] not in ("interrupted", "superseded")  # measured on its own
    assert rec[3]["direction"] != rec[4]["direction"]  # two hypotheses, one per round
    state = json.loads((cdir / "state.json").read_text())
    assert [e["round"] for e in state["closed"]] == [1, 2, 3, 4] and state["pending"] is None
    assert (cdir / "report.md").exists()
    # the lineage: at most the surviving candidate committed, the tree at the incumbent
    commits = git(root, "log", "--format=%s", f"{start}..HEAD").splitlines()
    assert commits == (
        ["[optimize] tiny_gemm TRITON round-4: " + rec[4]["summary"]]
        if rec[4]["status"] == "ACCEPTED"
        else []
    )
    assert not git(root, "status", "--porcelain", "--", KERNEL).strip()
    # the slots are gone, unregistered from git; each candidate's snapshot stays in its round
    assert not (cdir / ".fleet").exists()
    assert ".fleet" not in git(root, "worktree", "list", "--porcelain")
    for n in (3, 4):
        assert (cdir / f"rounds/round-{n}/kernel_snapshot" / KERNEL).is_file()
