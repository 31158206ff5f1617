"""scripts/overlay_tool.sh: this tree's tool code over a campaign checkout of the kernel pack,
committed there alone; the checkout's kernels and a round's pending kernel edit stay as they
are (a campaign resumed on a newer tool must not see its tool as an out-of-scope change)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_overlay_commits_the_tool_files_only(tmp_path):
    dest = tmp_path / "camp"
    shutil.copytree(
        REPO / "kernel_ratchet",
        dest / "kernel_ratchet",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    _git(tmp_path, "init", "-q", "-b", "main", str(dest))
    _git(dest, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(dest, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "start")
    old_tool = dest / "kernel_ratchet/harness/ab.py"
    old_tool.write_text(old_tool.read_text() + "\n# an older tool\n")
    kernel = dest / "kernel_ratchet/kernels/gemm/configs.py"
    kernel.write_text(kernel.read_text() + "\n# the campaign's own kernel\n")
    _git(dest, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "campaign state")
    kernel.write_text(kernel.read_text() + "# a round's pending candidate\n")
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        ["bash", str(REPO / "scripts/overlay_tool.sh"), str(dest)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "overlay: kernel_ratchet/harness/ab.py"
    assert old_tool.read_text() == (REPO / "kernel_ratchet/harness/ab.py").read_text()
    assert _git(dest, "show", "--name-only", "--format=%s", "HEAD").split("\n")[2:3] == [
        "kernel_ratchet/harness/ab.py"
    ]
    assert _git(dest, "status", "--short").strip() == "M kernel_ratchet/kernels/gemm/configs.py"
    assert kernel.read_text().endswith(
        "# the campaign's own kernel\n# a round's pending candidate\n"
    )
    again = subprocess.run(
        ["bash", str(REPO / "scripts/overlay_tool.sh"), str(dest)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert again.returncode == 0 and again.stdout == ""  # nothing left to overlay


def test_overlay_refuses_a_tree_without_the_kernel_pack(tmp_path):
    out = subprocess.run(
        ["bash", str(REPO / "scripts/overlay_tool.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "not a campaign" in out.stderr
