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
