"""A round commits only on its campaign's branch, and a second open campaign on the same op is
started only on purpose (``init --another``)."""

from __future__ import annotations

import json

import pytest

from tests.campaign.conftest import KERNEL, campaign_dir, git, ratchet, set_blocks


def _state(cdir):
    return json.loads((cdir / "state.json").read_text())


def test_second_init_on_an_open_campaign_needs_another(project):
    first = campaign_dir(project)
    branch = git(project, "branch", "--show-current").strip()
    r = ratchet(project, "init", "--op", "tiny_gemm", "--yes")
    assert r.returncode == 5, r.stdout + r.stderr  # the campaign's state refuses it
    assert first.name in r.stderr and "--another" in r.stderr
    assert git(project, "branch", "--show-current").strip() == branch
    assert [d.name for d in (project / ".ratchet/campaigns").iterdir()] == [first.name]


@pytest.mark.soak  # two campaigns of rounds; the branch guard has its own tests
def test_a_round_commits_only_on_its_campaign_branch(project):
    first = campaign_dir(project)
    own = f"optimize/{first.name}"
    r = ratchet(project, "init", "--op", "tiny_gemm", "--yes", "--another")
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(project, "branch", "--show-current").strip() != own
    tips = {b: git(project, "rev-parse", b).strip() for b in ("main", own)}
    before = _state(first)

    set_blocks(project, M=32, N=32)
    candidate = (project / KERNEL).read_text()
    for checkout in (None, "main"):
        if checkout:
            git(project, "checkout", "-q", checkout)
        r = ratchet(project, "validate", "--hypothesis", "32x32", "--campaign", first.name)
        assert r.returncode == 8, r.stdout + r.stderr
        assert f"git checkout {own}" in r.stderr, r.stderr
        # refused before anything was measured or changed
        assert _state(first) == before
        assert not (first / "rounds/round-2").exists()
        assert (project / KERNEL).read_text() == candidate
        assert {b: git(project, "rev-parse", b).strip() for b in tips} == tips

    git(project, "checkout", "-q", own)
    r = ratchet(project, "validate", "--hypothesis", "32x32", "--campaign", first.name)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert git(project, "rev-parse", "main").strip() == tips["main"]


def test_run_on_an_op_with_an_open_campaign_needs_another(project):
    first = campaign_dir(project)
    branch = git(project, "branch", "--show-current").strip()
    r = ratchet(project, "run", "--op", "tiny_gemm", "--yes", "--rehearse", "--max-iterations", "1")
    assert r.returncode == 5, r.stdout + r.stderr  # the campaign's state refuses it
    assert first.name in r.stderr and "--another" in r.stderr
    assert git(project, "branch", "--show-current").strip() == branch
    assert [d.name for d in (project / ".ratchet/campaigns").iterdir()] == [first.name]


def test_run_beside_the_process_driving_the_open_campaign_says_so(project):
    """Its advice (resume, report, close) could not run while that process holds the
    campaign: exit 6, as for every command refused by the campaign's lock."""
    from kernel_ratchet.campaign.lock import CampaignLock

    first = campaign_dir(project)
    with CampaignLock(first):
        r = ratchet(project, "run", "--op", "tiny_gemm", "--yes", "--max-iterations", "1")
    assert r.returncode == 6, r.stdout + r.stderr
    assert "being driven by another process" in r.stderr and "--another" in r.stderr
    assert [d.name for d in (project / ".ratchet/campaigns").iterdir()] == [first.name]


def test_a_campaign_whose_directory_was_deleted_keeps_its_branch(project):
    """The new campaign takes the next name instead of refusing for the branch left behind,
    and the old branch, with its accepted commits, is not reused or touched."""
    import shutil

    from kernel_ratchet.campaign.clock import today

    first = campaign_dir(project)
    # the name today's init takes (the fixture's campaign may date from before midnight)
    name = f"{first.name.rsplit('_', 1)[0]}_{today()}"
    if name != first.name:
        git(project, "branch", "-q", "-m", f"optimize/{first.name}", f"optimize/{name}")
    own = f"optimize/{name}"
    kept = git(project, "rev-parse", own).strip()
    shutil.rmtree(first)
    git(project, "switch", "-q", "-")  # back where the campaign started
    r = ratchet(project, "init", "--op", "tiny_gemm", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    (second,) = (project / ".ratchet/campaigns").iterdir()
    assert second.name == f"{name}-2"
    assert git(project, "branch", "--show-current").strip() == f"optimize/{second.name}"
    assert git(project, "rev-parse", own).strip() == kept


def test_a_merge_in_progress_or_a_detached_head_refuses_the_round(project):
    """Refused before anything is measured: a round's commit cannot be made during a merge
    (and would carry the merge's changes), nor on a detached HEAD."""
    cdir = campaign_dir(project)
    own = git(project, "branch", "--show-current").strip()
    git(project, "checkout", "-q", "-b", "side")
    (project / "side.txt").write_text("side\n")
    git(project, "add", "side.txt")
    git(project, "commit", "-qm", "side")
    git(project, "checkout", "-q", own)
    git(project, "merge", "--no-commit", "--no-ff", "-q", "side")
    before = _state(cdir)
    set_blocks(project, M=32, N=32)
    r = ratchet(project, "validate", "--hypothesis", "32x32")
    assert r.returncode == 8 and "a merge is in progress" in r.stderr, r.stdout + r.stderr
    assert "git merge --abort" in r.stderr and _state(cdir) == before
    git(project, "merge", "--abort")
    git(project, "checkout", "-q", "--detach")
    r = ratchet(project, "validate", "--hypothesis", "32x32")
    assert r.returncode == 8 and "HEAD is detached" in r.stderr, r.stdout + r.stderr
    assert not (cdir / "rounds/round-2").exists()


def test_an_open_campaign_without_a_baseline_is_not_sent_to_report(tmp_path):
    """`ratchet report` refuses a campaign with no baseline, so the way on is the baseline."""
    from tests.campaign.conftest import make_project

    root = make_project(tmp_path / "proj")
    r = ratchet(root, "init", "--op", "tiny_gemm", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    r = ratchet(root, "init", "--op", "tiny_gemm", "--yes")
    assert r.returncode == 5 and "ratchet baseline --campaign" in r.stderr, r.stderr
    assert "ratchet report" not in r.stderr


def test_the_end_of_a_run_suggests_acceptance_only_with_an_accepted_round(
    project, accepted_project
):
    from kernel_ratchet.campaign.state import State
    from kernel_ratchet.cli.run import _after_report
    from kernel_ratchet.report.final import Reported, accepted_any

    def after(root):
        return _after_report(Reported("", accepted_any(State.load(campaign_dir(root)))))

    assert after(accepted_project) == "next: `ratchet accept`"
    assert "no round was accepted" in after(project)
    assert "ratchet accept" not in after(project)
