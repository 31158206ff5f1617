"""A campaign's ``optimize/`` branch when the campaign ends: deleted only when it holds no work
(no commit beyond the start, checked out nowhere, its commit held by another branch or tag); a
campaign that committed nothing hands the project back on the branch it started from."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.lineage.branch import drop_empty_branch

BRANCH = "optimize/gemm_TRITON_cpu_20300101"


def git(root, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A repository on main, the campaign's branch made at main's commit (as init does)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "project")
    git(root, "branch", BRANCH)
    return root


def _campaign(root, branch: str | None = BRANCH, original: str | None = None):
    start = git(root, "rev-parse", "main")
    m = SimpleNamespace(branch_name=branch, starting_commit=start, original_branch=original)
    return SimpleNamespace(groot=root, m=m)


def _branches(root) -> list[str]:
    return git(root, "branch", "--list", "optimize/*", "--format=%(refname:short)").split()


def test_a_branch_with_nothing_beyond_the_start_is_deleted(repo):
    said = drop_empty_branch(_campaign(repo))
    assert said.startswith(f"branch {BRANCH} deleted: it held no commit beyond the start")
    assert _branches(repo) == []
    assert drop_empty_branch(_campaign(repo)) == ""  # gone already: nothing to do or say
    assert drop_empty_branch(_campaign(repo, None)) == ""  # --git-branch none


def test_a_branch_with_a_commit_is_kept(repo):
    c = _campaign(repo)
    git(repo, "switch", "-q", BRANCH)
    git(repo, "commit", "-q", "--allow-empty", "-m", "round-2")
    git(repo, "switch", "-q", "main")
    assert "kept: it holds 1 commit(s) beyond the start" in drop_empty_branch(c)
    assert _branches(repo) == [BRANCH]


@pytest.mark.parametrize("where", ["here", "another worktree"])
def test_a_checked_out_branch_is_kept_and_the_way_to_remove_it_said(repo, tmp_path, where):
    tree = repo
    if where == "here":
        git(repo, "switch", "-q", BRANCH)
    else:
        tree = tmp_path / "wt"
        git(repo, "worktree", "add", "-q", str(tree), BRANCH)
    said = drop_empty_branch(_campaign(repo))
    assert f"kept: it is checked out in {tree}" in said and f"git branch -D {BRANCH}" in said
    assert _branches(repo) == [BRANCH]


def test_a_branch_whose_commit_no_other_ref_holds_is_kept(repo):
    git(repo, "switch", "-q", "--detach")
    git(repo, "commit", "-q", "--allow-empty", "-m", "made on a detached HEAD")
    git(repo, "branch", "-f", BRANCH)
    start = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "main")
    m = SimpleNamespace(branch_name=BRANCH, starting_commit=start, original_branch=None)
    c = SimpleNamespace(groot=repo, m=m)
    assert "kept: no other branch or tag holds its commit" in drop_empty_branch(c)
    assert _branches(repo) == [BRANCH]


def test_an_empty_campaign_hands_the_project_back_on_its_branch(repo):
    git(repo, "switch", "-q", BRANCH)
    (repo / "notes.txt").write_text("uncommitted work")
    said = drop_empty_branch(_campaign(repo, original="main"))
    assert f"branch {BRANCH} deleted" in said and "the project is back on main" in said
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "notes.txt").read_text() == "uncommitted work"  # the tree is untouched
    assert _branches(repo) == []


def test_the_project_stays_where_switching_back_would_change_files(repo):
    git(repo, "switch", "-q", BRANCH)
    c = _campaign(repo, original="main")
    git(repo, "switch", "-q", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moved on")
    git(repo, "switch", "-q", BRANCH)
    said = drop_empty_branch(c)
    assert "kept: it is checked out in" in said and "the campaign started on main" in said
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == BRANCH


def test_a_campaign_with_work_keeps_its_branch_checked_out(repo):
    git(repo, "switch", "-q", BRANCH)
    c = _campaign(repo, original="main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "round-2")
    assert "kept: it holds 1 commit(s) beyond the start" in drop_empty_branch(c)
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == BRANCH and _branches(repo) == [BRANCH]
