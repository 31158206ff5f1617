"""A/A rounds timed through the CLI in a clone: the kernel file a comment goes into, the table
of what the records say, a clone that can commit, and (soak) a whole run on the CPU example."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.method import aa_rounds
from tests.campaign.conftest import KERNEL, cli_env, make_project


def test_the_comment_goes_into_the_first_kernel_file_with_a_known_syntax():
    assert aa_rounds.comment_file(["k/table.json", "k/gemm.cu", "k/x.py"]) == ("k/gemm.cu", "//")
    assert aa_rounds.comment_file(["k/launch.py"]) == ("k/launch.py", "#")
    with pytest.raises(RatchetError, match="comment syntax"):
        aa_rounds.comment_file(["k/table.json", "k/kernel.ptx"])


def _record(n: int, status: str, cis: dict[str, tuple[float, float]]) -> dict:
    """A ``round.json`` as a campaign writes it (the baseline: no decision)."""
    per_shape = [
        {"label": k, "delta": sum(v) / 2, "noise": 0.0, "verdict": "SAME", "ci": list(v)}
        for k, v in cis.items()
    ]
    decision = {"status": status, "reason": "why", "per_shape": per_shape, "rounds": 5}
    return {
        "round": n,
        "status": status,
        "category": "baseline" if n == 1 else "no-gain" if status == "ROLLED BACK" else "ok",
        "reason": "why",
        "seconds": {"test": 9.94, "harness_quick": 5.5, "ab_quick": 13.0, "measure": 31.2}
        | ({"overlap": 8.0} if status == "ACCEPTED" else {}),  # a test beside the A/B
        **({"decision": decision} if n > 1 else {}),
    }


def test_the_table_reads_each_a_a_round_and_names_a_false_accept(tmp_path):
    for n, status, cis in (
        (1, "BASELINE", {}),
        (3, "ACCEPTED", {"a": (-0.01, 0.03), "b": (0.0, 0.002)}),
        (2, "ROLLED BACK", {"a": (-0.002, 0.002), "b": (-0.0005, 0.0015)}),
    ):
        d = tmp_path / f"rounds/round-{n}"
        d.mkdir(parents=True)
        (d / "round.json").write_text(json.dumps(_record(n, status, cis)))
    rounds = aa_rounds.round_records(tmp_path)
    assert [r.round for r in rounds] == [2, 3]  # the baseline is not an A/A round
    assert rounds[1].half_widths == pytest.approx({"a": 0.02, "b": 0.001})
    rows = aa_rounds.table(rounds).splitlines()[2:]
    assert rows[0] == ("| 2 | ROLLED BACK | 9.9 | 5.5 | 13.0 | 31.2 | 0.10%-0.20% (widest: a) |")
    assert "ACCEPTED (a false accept)" in rows[1] and "0.10%-2.00% (widest: a)" in rows[1]
    assert "| 9.9 (beside) | 5.5 |" in rows[1] and "(beside)" not in rows[0]


def test_the_clone_can_commit_without_a_global_identity(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "u@x"], ["config", "user.name", "u"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "f.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "f.py"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "one"], check=True)
    (repo / "f.py").write_text("x = 2  # not committed\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    aa_rounds.clone(repo, tmp_path / "clone")
    assert (tmp_path / "clone/f.py").read_text() == "x = 1\n"  # HEAD, not the working tree
    (tmp_path / "clone/f.py").write_text("x = 3\n")
    done = subprocess.run(["git", "-C", str(tmp_path / "clone"), "commit", "-qam", "two"])
    assert done.returncode == 0


@pytest.mark.soak  # a campaign's init, baseline and one round in the interpreter: about a minute
def test_a_round_of_the_cpu_example_leaves_the_users_tree_alone(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj")
    before = (root / KERNEL).read_text(), (root / "pyproject.toml").read_text()
    for key, value in cli_env(root).items():
        monkeypatch.setenv(key, value)
    found = aa_rounds.run("tiny_gemm", 1, root, tmp_path / "keep", say=lambda _m: None)
    assert [(r.round, r.status) for r in found] == [(2, "ROLLED BACK")]
    assert {"test", "measure"} <= set(found[0].seconds) and found[0].half_widths
    assert (tmp_path / "keep/rounds/round-2/round.json").exists()
    log = (tmp_path / "keep/ratchet.log").read_text()  # names no path of the clone
    assert "aa-rounds-" not in log and "$ ratchet export" in log
    assert ((root / KERNEL).read_text(), (root / "pyproject.toml").read_text()) == before
    assert not (root / ".ratchet").exists() and (root / "notes.txt").exists()


def test_each_round_reports_the_decision_it_printed(tmp_path):
    log = tmp_path / "ratchet.log"
    log.write_text(
        "round-2: paired A/B\nround-2 ROLLED BACK (quick): aggregate 1.0003x\n(+0.03%)\n"
    )
    assert aa_rounds._outcome(log, 1) == "ROLLED BACK (quick)"
    log.write_text("Traceback ...\n")
    assert "exited 2" in aa_rounds._outcome(log, 2)


def test_a_sigterm_removes_the_clone(tmp_path):
    """Stopped from outside (a job's time limit), the command leaves no clone behind."""
    root = make_project(tmp_path / "proj")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = (
        "import sys, time\n"
        "from kernel_ratchet.method import aa_rounds\n"
        "def slow(*a, **k):\n"
        "    print('started', flush=True)\n"
        "    time.sleep(60)\n"
        "aa_rounds.ratchet = slow\n"
        "sys.exit(aa_rounds.main(['tiny_gemm']))\n"
    )
    env = {**cli_env(root), "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=root, env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "started"
    assert [p.name[:10] for p in tmp.iterdir()] == ["aa-rounds-"]  # the clone, in flight
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert list(tmp.iterdir()) == []
