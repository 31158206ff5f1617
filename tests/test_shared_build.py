"""Copies of a fixture built once (:mod:`tests.shared_build`) are independent git projects."""

from __future__ import annotations

from pathlib import Path

from tests.campaign.conftest import git
from tests.shared_build import built_once


def _project_with_a_linked_worktree(dest: Path) -> Path:
    root = dest / "proj"
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "k.py").write_text("x = 1\n")
    git(root, "add", "k.py")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "k")
    git(root, "worktree", "add", "-q", "--detach", str(root / "inner" / ".incumbent"))
    return root


def test_each_copy_s_linked_worktree_belongs_to_that_copy(tmp_path_factory):
    first, second = (
        built_once(tmp_path_factory, "linked-worktree", _project_with_a_linked_worktree)
        for _ in range(2)
    )
    for copy in (first, second):
        wt = copy / "inner" / ".incumbent"
        gitdir = Path((wt / ".git").read_text().split(":", 1)[1].strip())
        assert gitdir.is_relative_to(copy / ".git")  # not the template's, not the other copy's
        (wt / "k.py").write_text(f"x = {copy}\n")
        git(wt, "add", "k.py")  # takes this copy's index lock only
    assert git(first, "worktree", "list").count(str(first)) == 2
