"""A parallel round on CPU workers of a local Dask cluster: the same code path as `ratchet run
--gpus`, with one candidate's worker killed while it measures; the candidates' slots (git
worktrees) are gone when the campaign ends, their records kept.

The default run checks it in two parts: the Dask pool's answer when a candidate's worker is
killed (a real kill -9, in a local cluster), and the round runner of `ratchet run --workers` on
the search's proposals with a pool that measures in this process, its measurement canned, one
candidate lost as the Dask pool reports it. The whole run, real rounds measured in Dask workers,
runs in the soak run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_ratchet.campaign import candidate
from kernel_ratchet.campaign.candidate import FAULT_ENV, SLOTS, STARTED, measure_candidate
from kernel_ratchet.campaign.category import Category
from kernel_ratchet.scoring.decision import Status
from tests.campaign.conftest import KERNEL, campaign_dir, cli_env, git, ratchet, set_blocks
from tests.decisions import measured_record

#: What the Dask pool says of a candidate whose worker process died (fleet.pool.DaskPool).
DIED = "its worker process died while measuring it"


def _check_the_lineage(root: Path, start: str, lost: int, kept: int) -> dict[int, dict]:
    """Round ``lost`` closed as interrupted by its worker's death, round ``kept`` measured on
    its own, at most that candidate committed, the slots gone and both snapshots kept."""
    cdir = campaign_dir(root)
    rec = {n: json.loads((cdir / f"rounds/round-{n}/round.json").read_text()) for n in (lost, kept)}
    assert rec[lost]["status"] == "ROLLED BACK" and rec[lost]["category"] == "interrupted"
    assert "died" in rec[lost]["reason"]
    assert rec[kept]["category"] not in ("interrupted", "superseded")  # measured on its own
    assert rec[lost]["direction"] != rec[kept]["direction"]  # two hypotheses, one per round
    state = json.loads((cdir / "state.json").read_text())
    assert [e["round"] for e in state["closed"]][-2:] == sorted((lost, kept))
    assert state["pending"] is None and (cdir / "report.md").exists()
    commits = git(root, "log", "--format=%s", f"{start}..HEAD").splitlines()
    assert commits == (
        [f"[optimize] tiny_gemm TRITON round-{kept}: " + rec[kept]["summary"]]
        if rec[kept]["status"] == "ACCEPTED"
        else []
    )
    assert not git(root, "status", "--porcelain", "--", KERNEL).strip()
    # the slots are gone, unregistered from git; each candidate's snapshot stays in its round
    assert not (cdir / ".fleet").exists()
    assert ".fleet" not in git(root, "worktree", "list", "--porcelain")
    for n in (lost, kept):
        assert (cdir / f"rounds/round-{n}/kernel_snapshot" / KERNEL).is_file()
    return rec


@pytest.mark.slow
@pytest.mark.soak  # the default run checks the pool and the round runner apart (below)
def test_a_killed_worker_loses_its_candidate_not_the_round(accepted_project):
    """The whole `ratchet run --workers 2` on the campaign with round-2 accepted (its 32x32
    incumbent keeps the surviving candidate's round short in the interpreter)."""
    root, cdir = accepted_project, campaign_dir(accepted_project)
    start = git(root, "rev-parse", "HEAD").strip()
    args = ("run", "--campaign", cdir.name, "--workers", "2", "--max-iterations", "2", "--yes")
    r = ratchet(root, *args, **{FAULT_ENV: "3"})  # round-3's worker is killed (kill -9)
    assert r.returncode == 0, r.stdout + r.stderr
    state = json.loads((cdir / "state.json").read_text())
    assert [e["round"] for e in state["closed"]] == [1, 2, 3, 4]
    _check_the_lineage(root, start, lost=3, kept=4)


@pytest.mark.slow
def test_a_killed_dask_worker_gives_its_candidate_up(project, monkeypatch):
    """A candidate whose Dask worker is killed (kill -9) once it started measuring: the pool
    gives it up at once, as a sentence, instead of running it again on another worker."""
    pytest.importorskip("distributed")
    from kernel_ratchet.campaign.clock import now
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.state import PendingRound, Stage
    from kernel_ratchet.fleet.pool import DaskPool, open_cluster
    from kernel_ratchet.profile.loader import load_profile

    with Campaign(load_profile(project), campaign_dir(project)) as c:
        pending = PendingRound(2, Stage.MEASURING, now(), "32x32 tiles", "K1", "quick")
        job = candidate.stage_candidate(c.ctx, 0, 2, lambda t: set_blocks(t, M=32, N=32), pending)
    monkeypatch.setenv(FAULT_ENV, "2")  # the workers inherit it: round 2's worker kills itself
    said: list[str] = []
    with open_cluster(workers=1) as client:
        (result,) = DaskPool(client, timeout_s=300.0).measure([job], said.append)
    assert result == DIED and said == [f"round-2: {DIED}"]
    assert (campaign_dir(project) / "rounds/round-2" / STARTED).is_file()  # it had started


class InProcessPool:
    """A candidate pool that measures each candidate here, one after the other, as a Dask
    worker would (:func:`measure_candidate`: its slot, its view of the campaign, its record),
    and gives round ``lost`` up as the Dask pool gives up a candidate whose worker died."""

    slots = 2

    def __init__(self, lost: int) -> None:
        self.lost = lost

    def measure(self, jobs, say):
        results = []
        for job in jobs:
            if job.round == self.lost:
                say(f"round-{job.round}: {DIED}")
                results.append(DIED)
            else:
                results.append(measure_candidate(job))
        return results


def test_a_parallel_round_records_a_lost_candidate_and_closes_the_other(project, monkeypatch):
    """`ratchet run --workers 2`'s round runner on the search's two proposals, the surviving
    candidate's measurement a canned accept (every step of a measured round has its own tests)."""
    from kernel_ratchet.optimizers.base import load_optimizer
    from kernel_ratchet.optimizers.loop import run_campaign
    from kernel_ratchet.optimizers.parallel import ParallelRounds
    from kernel_ratchet.profile.loader import load_profile

    def canned(c, n, p):
        assert SLOTS in Path(c.root).parts  # measured in its slot's tree, not the project's
        return measured_record(n, Status.ACCEPTED, 0.2795, Category.OK, pending=p)

    monkeypatch.setattr(candidate, "measure", canned)
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", cli_env(project)["PYTHONPATH"])  # the REPORT's harness
    start = git(project, "rev-parse", "HEAD").strip()
    res = run_campaign(
        load_profile(project),
        None,
        load_optimizer("search"),
        campaign=campaign_dir(project).name,
        max_iterations=2,
        runner=ParallelRounds(InProcessPool(lost=2)),
    )
    assert res.report is not None
    rec = _check_the_lineage(project, start, lost=2, kept=3)
    assert rec[3]["status"] == "ACCEPTED"  # the canned accept, committed from its slot
