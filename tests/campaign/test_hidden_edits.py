"""Edits git hides from ``git status`` (``--skip-worktree`` / ``--assume-unchanged``) are still
seen by the campaign: out-of-scope files count as changed, a flagged kernel file is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.errors import GitError


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    for name in ("ref.py", "kernel.py", "plain.py"):
        (tmp_path / name).write_text(f"# {name}\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "init")
    return tmp_path


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_a_hidden_edit_counts_as_changed(repo: Path, flag: str) -> None:
    _git(repo, "update-index", flag, "ref.py")
    assert git.changed_paths(repo) == []  # flagged but unedited: nothing changed
    (repo / "ref.py").write_text("# replaced reference\n")
    assert (
        "ref.py"
        not in subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
        ).stdout
    )  # git itself hides it
    assert git.changed_paths(repo) == ["ref.py"]
    assert list(git.hidden_edits(repo)) == ["ref.py"]


def test_an_absent_sparse_file_is_no_edit(repo: Path) -> None:
    _git(repo, "update-index", "--skip-worktree", "plain.py")
    (repo / "plain.py").unlink()
    assert git.hidden_edits(repo) == {}
    assert git.hidden_paths(repo) == {"plain.py": "skip-worktree"}


def test_a_flagged_kernel_file_is_refused_with_the_undo_command(repo: Path) -> None:
    git.require_visible(repo, ["kernel.py"])  # not flagged: fine
    _git(repo, "update-index", "--assume-unchanged", "kernel.py")
    with pytest.raises(GitError) as err:
        git.require_visible(repo, ["kernel.py", "plain.py"])
    msg = str(err.value)
    assert "kernel.py" in msg and "plain.py" not in msg and "assume-unchanged" in msg
    assert "git update-index --no-skip-worktree --no-assume-unchanged -- kernel.py" in msg
