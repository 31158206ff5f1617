"""kill -9 in the middle of `validate`, then the next command: the round ends complete or
cleanly rolled back, with no duplicate or missing round and no lost record.

``KERNEL_RATCHET_FAULT=<point>`` makes the engine SIGKILL itself at a named point (a real
kill -9, not an exception); one test also kills the driver from outside mid-harness.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.campaign.conftest import (
    KERNEL,
    campaign_dir,
    cli_env,
    git,
    ratchet,
    set_blocks,
    typo_kernel,
)
from tests.cli_inprocess import cli_result


@pytest.fixture
def status(capsys, monkeypatch):
    """``ratchet status --json`` of a project, run in this process: the next command after a
    kill or a signal (a process of its own would add only its start-up)."""

    def run(root) -> dict:
        monkeypatch.chdir(root)
        out = cli_result(capsys, monkeypatch, "status", "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        run.said.append(out.stdout + out.stderr)
        return json.loads(out.stdout)

    run.said = []  # what each command printed, in order
    return run


def _trend_rounds(cdir):
    text = (cdir / "logs/performance_trend.md").read_text()
    return [ln.split("|")[1].strip() for ln in text.splitlines() if ln.startswith("| round-")]


def _sections(cdir, n):
    return (cdir / "logs/optimize.md").read_text().count(f"## Round {n} — ")


def _check_closed_once(status, root, n):
    cdir = campaign_dir(root)
    s = status(root)
    assert s["pending"] is None
    assert [r["round"] for r in s["rounds"]] == list(range(1, n + 1))
    assert _trend_rounds(cdir) == [f"round-{i}" for i in range(1, n + 1)]
    assert _sections(cdir, n) == 1
    assert (cdir / f"rounds/round-{n}/summary.md").exists()
    assert s["next_round"] == n + 1
    return s


@pytest.mark.parametrize(
    "point",
    [
        "measuring",
        # after the decision, measured in the interpreter: the default run kills a canned
        # decision at the same stage (test_kill_9_after_the_decision_then_next_command_...)
        pytest.param("decided", marks=pytest.mark.soak),
        # after the commit: recovered as "decided" is (the next command completes the round)
        pytest.param("applied", marks=pytest.mark.soak),
    ],
)
@pytest.mark.slow
def test_kill_9_inside_validate_then_next_command_closes_the_round(project, point, status):
    incumbent = (project / KERNEL).read_text()
    head = git(project, "rev-parse", "HEAD").strip()
    set_blocks(project, M=32, N=32)  # a clearly faster candidate
    candidate = (project / KERNEL).read_text()
    r = ratchet(project, "validate", "--hypothesis", "32x32 tiles", KERNEL_RATCHET_FAULT=point)
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr

    s = _check_closed_once(status, project, 2)
    last = s["rounds"][-1]
    commits = git(project, "log", "--format=%s", f"{head}..HEAD").splitlines()
    if point == "measuring":  # no decision was made: cleanly rolled back, candidate kept
        assert last["status"] == "ROLLED BACK" and last["category"] == "interrupted"
        assert (project / KERNEL).read_text() == incumbent
        snap = campaign_dir(project) / "rounds/round-2/kernel_snapshot" / KERNEL
        assert snap.read_text() == candidate
        assert commits == []
        # the command said how to get the edit back, and it does
        said = status.said[0]
        restore = said.split("from the project root: ", 1)[1].split("\n", 1)[0].strip()
        subprocess.run(restore, shell=True, cwd=project, check=True)
        assert (project / KERNEL).read_text() == candidate
        git(project, "checkout", "--", KERNEL)
    else:  # the decision was made: the round is completed, committed exactly once
        assert last["status"] == "ACCEPTED", last
        assert (project / KERNEL).read_text() == candidate
        assert len(commits) == 1 and commits[0].startswith("[optimize] tiny_gemm TRITON round-2:")
    # a second command finds nothing left to do and the next round gets the next number
    _check_closed_once(status, project, 2)
    if point != "measuring":  # one real next round shows it; each costs a validate
        return
    # a candidate that does not parse closes its round as any other does, without a
    # measurement: the numbering and the records are what is checked here
    typo_kernel(project)
    r = ratchet(project, "validate", "--hypothesis", "a typo")
    assert r.returncode == 1 and "does not parse" in r.stdout, r.stdout + r.stderr
    _check_closed_once(status, project, 3)


@pytest.mark.parametrize("point", ["written", "decided", "applied"])
def test_kill_9_after_the_decision_then_next_command_completes_the_round(project, point, status):
    """kill -9 of `ratchet validate` once its decision is on disk (before the state says so:
    MEASURING), written (DECIDED) or applied (APPLIED), the measurement a canned accept
    (tests/campaign/canned_cli.py): the next command completes the round, committed exactly
    once, with the candidate in the tree."""
    head = git(project, "rev-parse", "HEAD").strip()
    set_blocks(project, M=32, N=32)
    candidate = (project / KERNEL).read_text()
    r = subprocess.run(
        [sys.executable, "-m", "tests.campaign.canned_cli", "validate", "--hypothesis", "32x32"],
        cwd=project,
        env=cli_env(project, KERNEL_RATCHET_FAULT=point),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    pending = json.loads((campaign_dir(project) / "state.json").read_text())["pending"]
    stage = {"written": "MEASURING"}.get(point, point.upper())
    assert pending["round"] == 2 and pending["stage"] == stage, pending

    s = _check_closed_once(status, project, 2)
    assert s["rounds"][-1]["status"] == "ACCEPTED", s["rounds"][-1]
    assert (project / KERNEL).read_text() == candidate
    commits = git(project, "log", "--format=%s", f"{head}..HEAD").splitlines()
    assert len(commits) == 1 and commits[0].startswith("[optimize] tiny_gemm TRITON round-2:")
    _check_closed_once(status, project, 2)  # a second command finds nothing left to do


def _validate_in_its_harness(project) -> subprocess.Popen:
    """`ratchet validate` of 8x8 tiles (slow in the interpreter), returned once its harness runs."""
    set_blocks(project, M=8, N=8)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_ratchet.cli", "validate", "--hypothesis", "8x8 tiles"],
        cwd=project,
        env=cli_env(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    n = json.loads((campaign_dir(project) / "state.json").read_text())["next_round"]
    harness_log = campaign_dir(project) / f"rounds/round-{n}/artifacts/benchmark.log"
    deadline = time.monotonic() + 120
    while not harness_log.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert harness_log.exists(), "the harness never started"
    return proc


@pytest.mark.slow
def test_external_kill_during_harness(accepted_project, status):
    """On the campaign with round-2 accepted: its REPORT measures 32x32 tiles, not 16x16."""
    project = accepted_project
    incumbent = (project / KERNEL).read_text()
    cdir = campaign_dir(project)
    proc = _validate_in_its_harness(project)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    s = _check_closed_once(status, project, 3)
    assert s["rounds"][-1]["category"] == "interrupted"
    assert (project / KERNEL).read_text() == incumbent
    assert not list(cdir.rglob("*.pgid"))
    # the REPORT does not call the interrupted direction ineffective (it was never measured)
    r = ratchet(project, "report")
    assert r.returncode == 0, r.stdout + r.stderr
    report = (cdir / "report.md").read_text()
    verified = report.split("## Verified-ineffective directions\n")[1].split("\n## ")[0]
    assert verified.strip() == "- none", report
    assert "## Rolled back without a verdict" in report
    assert "- round-3: 8x8 tiles (interrupted)" in report
    assert "- Ineffective directions: none" in report


def test_sigterm_during_harness_closes_the_round_before_exiting(project, status):
    """A scheduler's kill (SIGTERM): the CLI closes the round itself, exits 143, and leaves no
    process group behind, without waiting for a later command to recover it."""
    incumbent = (project / KERNEL).read_text()
    cdir = campaign_dir(project)
    proc = _validate_in_its_harness(project)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "ratchet resume" in err
    assert "`ratchet validate` one driven by hand" in " ".join(err.split())  # wrapped anywhere
    assert "to work on it again, from the project root: cp " in err  # the edit's way back
    # closed by the process itself: the state on disk has no round in flight
    assert json.loads((cdir / "state.json").read_text())["pending"] is None
    record = json.loads((cdir / "rounds/round-2/round.json").read_text())
    assert record["category"] == "interrupted" and "SIGTERM" in record["reason"]
    assert (project / KERNEL).read_text() == incumbent
    assert not list(cdir.rglob("*.pgid"))
    _check_closed_once(status, project, 2)


def test_lock_stops_a_second_driver(project):
    import fcntl

    cdir = campaign_dir(project)
    fd = os.open(cdir / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        set_blocks(project, M=32, N=32)
        r = ratchet(project, "validate", "--hypothesis", "32x32")
        assert r.returncode == 6 and "another process" in r.stderr
        # a look from a second terminal: read-only, nothing finished or verified
        r = ratchet(project, "status")
        assert r.returncode == 0 and "read-only: campaign" in r.stderr, r.stdout + r.stderr
        assert "BASELINE" in r.stdout
    finally:
        os.close(fd)
    assert ratchet(project, "status").returncode == 0


def test_a_look_during_a_round_names_the_round_in_flight(project, monkeypatch, capsys):
    """The state counts ``next_round`` past a round as it starts: a look from a second terminal
    while round 2 runs calls it round 2, in flight, not "next round 3"."""
    import fcntl

    set_blocks(project, M=32, N=32)
    r = ratchet(project, "validate", "--hypothesis", "32x32", KERNEL_RATCHET_FAULT="measuring")
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    fd = os.open(campaign_dir(project) / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the driver of round 2, alive
    try:
        monkeypatch.chdir(project)
        r = cli_result(capsys, monkeypatch, "status")
    finally:
        os.close(fd)
    assert r.returncode == 0 and "read-only" in r.stderr, r.stdout + r.stderr
    assert "round 2 in flight (MEASURING)" in r.stdout and "next round 3" not in r.stdout
    r = cli_result(capsys, monkeypatch, "status")  # the lock free: round 2 closed, 3 is next
    assert "next round 3" in r.stdout and "in flight" not in r.stdout, r.stdout + r.stderr


def test_leftovers_are_killed_only_where_they_were_recorded(tmp_path):
    """A campaign carried to another machine or container holds process-group ids that name
    unrelated processes there: only a record of this boot and PID namespace is signalled."""
    from kernel_ratchet.campaign.steps import kill_leftovers, machine_identity

    def group() -> subprocess.Popen:
        return subprocess.Popen(["sleep", "60"], start_new_session=True)

    here, elsewhere, legacy = group(), group(), group()
    try:
        (tmp_path / "a").mkdir()
        (tmp_path / "a/test.log.pgid").write_text(f"{here.pid} {machine_identity()}")
        (tmp_path / "a/benchmark.log.pgid").write_text(f"{elsewhere.pid} other-boot/pid:[1]")
        (tmp_path / "legacy.log.pgid").write_text(str(legacy.pid))
        assert kill_leftovers(tmp_path) == [here.pid]
        assert here.wait(timeout=10) == -signal.SIGKILL
        assert elsewhere.poll() is None and legacy.poll() is None
        assert not list(tmp_path.rglob("*.pgid"))
    finally:
        for p in (here, elsewhere, legacy):
            p.kill()
            p.wait()


def test_recovery_keeps_a_new_edit_it_displaces(project):
    """kill -9 mid-round, then the user edits the kernel again before the next `validate`: the
    recovery that rolls the round back must not lose that edit. It is kept as a patch in the
    round's artifacts and as a git ref (HEAD and the index untouched), and the user is told."""
    head = git(project, "rev-parse", "HEAD").strip()
    set_blocks(project, M=32, N=32)
    r = ratchet(
        project, "validate", "--hypothesis", "32x32 tiles", KERNEL_RATCHET_FAULT="measuring"
    )
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    set_blocks(project, K=32)  # the user's next edit, made before any command ran
    new_edit = (project / KERNEL).read_text()
    staged = git(project, "diff", "--cached", "--name-only")

    r = ratchet(project, "validate", "--hypothesis", "BLOCK_K 32")
    cdir = campaign_dir(project)
    ref = f"refs/ratchet/{cdir.name}/displaced/2"
    assert ref in r.stderr, r.stdout + r.stderr
    assert git(project, "show", f"{ref}:{KERNEL}") == new_edit
    assert git(project, "rev-parse", f"{ref}^").strip() == head
    patch = cdir / "rounds/round-2/artifacts/displaced.patch"
    assert "+BLOCK_K = 32" in patch.read_text()
    assert git(project, "rev-parse", "HEAD").strip() == head
    assert git(project, "diff", "--cached", "--name-only") == staged
    record = json.loads((cdir / "rounds/round-2/round.json").read_text())
    assert ref in record["reason"]
    assert ref in (cdir / "logs/optimize.md").read_text()
    # the round measured 32x32 tiles: its snapshot is that candidate, not the later edit
    snap = (cdir / "rounds/round-2/kernel_snapshot" / KERNEL).read_text()
    assert "BLOCK_M = 32" in snap and "BLOCK_K = 32" not in snap
    # and the edit can be brought back as the message says
    git(project, "checkout", ref, "--", KERNEL)
    assert (project / KERNEL).read_text() == new_edit


def test_an_edit_undone_after_a_kill_is_not_kept_as_displaced(project, status):
    """kill -9 mid-round, then the user puts the incumbent's kernel back (git checkout): the
    tree holds nothing the incumbent lacks, so recovery keeps no ref and says nothing of it."""
    set_blocks(project, M=32, N=32)
    r = ratchet(
        project, "validate", "--hypothesis", "32x32 tiles", KERNEL_RATCHET_FAULT="measuring"
    )
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    git(project, "checkout", "--", KERNEL)
    _check_closed_once(status, project, 2)
    assert "displaced" not in status.said[0]
    assert git(project, "for-each-ref", "refs/ratchet/").strip() == ""
    assert git(project, "status", "--porcelain", KERNEL).strip() == ""


def test_resume_after_a_manual_validate_closes_the_round_and_stops(project, status):
    """SIGTERM of a hand-run `validate`, then `ratchet resume`: the campaign is driven by hand,
    so resume closes the interrupted round and stops, pointing at `validate` again; it does
    not hand the campaign to an optimizer (an earlier run's search is not what drove it)."""
    cdir = campaign_dir(project)
    (cdir / "optimizer.json").write_text(json.dumps({"name": "search"}))  # an earlier run
    head = git(project, "rev-parse", "HEAD").strip()
    proc = _validate_in_its_harness(project)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert json.loads((cdir / "optimizer.json").read_text())["name"] == "manual"

    r = ratchet(project, "resume", "--max-iterations", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ratchet validate" in r.stdout + r.stderr
    assert "search optimizer" not in r.stderr
    _check_closed_once(status, project, 2)
    assert git(project, "rev-parse", "HEAD").strip() == head
