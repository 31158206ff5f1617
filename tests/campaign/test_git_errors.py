"""What a failed git command says: its own error, and the way out where one is known."""

from __future__ import annotations

import subprocess

import pytest

from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.errors import GitError


def test_a_stale_index_lock_says_how_to_go_on(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / ".git" / "index.lock").write_text("")  # left by a killed git
    with pytest.raises(GitError) as failed:
        git.git(tmp_path, "add", "a.txt")
    assert "index.lock" in str(failed.value)
    assert "remove the .lock file named above and run the command again" in str(failed.value)


def test_kept_files_keep_their_executable_bit(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for args in (["config", "user.email", "t@t"], ["config", "user.name", "t"]):
        git.git(tmp_path, *args)
    (tmp_path / "run.sh").write_text("echo a\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "k.py").write_text("a = 1\n")
    git.git(tmp_path, "add", "run.sh", "k.py")
    git.git(tmp_path, "commit", "-qm", "start")
    sha = git.keep_files(
        tmp_path, {"run.sh": b"echo b\n", "k.py": b"a = 2\n"}, "refs/t/kept", "kept"
    )
    modes = {
        line.split()[-1]: line.split()[0] for line in git.git(tmp_path, "ls-tree", sha).splitlines()
    }
    assert modes == {"run.sh": "100755", "k.py": "100644"}
