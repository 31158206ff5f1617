"""Copies of a fixture built once (:mod:`tests.shared_build`) are independent git projects."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.shared_build import built_once


def _git(root: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def _project_with_a_linked_worktree(dest: Path) -> Path:
    root = dest / "proj"
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "k.py").write_text("x = 1\n")
    _git(root, "add", "k.py")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "k")
    _git(root, "worktree", "add", "-q", "--detach", str(root / "inner" / ".incumbent"))
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
        _git(wt, "add", "k.py")  # takes this copy's index lock only
    assert _git(first, "worktree", "list").count(str(first)) == 2
