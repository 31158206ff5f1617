"""How the ``ratchet`` command fails: usage errors, faults and forged input get a clear message
and the exit code the README's table documents, never a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.campaign.conftest import EXAMPLE, cli_env


def ratchet_in(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.cli", *args],
        cwd=cwd,
        env=cli_env(cwd),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("bogus",),
        ("validate",),
        ("run", "--max-iterations", "abc"),
    ],
    ids=["no-command", "unknown-command", "missing-hypothesis", "bad-int"],
)
def test_usage_errors_print_usage_and_exit_2(args):
    r = ratchet_in(EXAMPLE, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "Usage:" in r.stdout + r.stderr


def test_init_rejects_an_unknown_timing_engine(tmp_path):
    from tests.campaign.conftest import make_project

    root = make_project(tmp_path / "p")
    r = ratchet_in(root, "init", "--op", "tiny_gemm", "--yes", "--timing-engine", "bogus")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "perf_counter" in r.stderr and "cuda_events" in r.stderr
    assert not (root / ".ratchet" / "campaigns").exists() or not any(
        (root / ".ratchet" / "campaigns").iterdir()
    )


def test_a_confirmation_without_a_terminal_says_to_pass_yes(tmp_path):
    """An agent or a script runs `ratchet` with no terminal: the question cannot be answered,
    and the command stops with what to do, before it creates anything."""
    from tests.campaign.conftest import make_project

    root = make_project(tmp_path / "p")
    r = subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.cli", "init", "--op", "tiny_gemm"],
        cwd=root,
        env=cli_env(root),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "--yes" in r.stderr
    campaigns = root / ".ratchet" / "campaigns"
    assert not campaigns.exists() or not any(campaigns.iterdir())


@pytest.mark.parametrize("flag", ["--hypothesis", "--lesson"])
def test_a_multi_line_note_cannot_forge_a_log_heading(project, flag):
    from tests.campaign.conftest import campaign_dir, set_blocks

    log = campaign_dir(project) / "logs" / "optimize.md"
    before = log.read_text()
    set_blocks(project, M=16)
    forged = "bigger tiles\n## Round 99 — ACCEPTED"
    hyp = forged if flag == "--hypothesis" else "bigger tiles"
    extra = ("--lesson", forged) if flag == "--lesson" else ()
    r = ratchet_in(project, "validate", "--hypothesis", hyp, *extra)
    assert r.returncode == 2, r.stdout + r.stderr
    assert flag in r.stderr and "Traceback" not in r.stderr
    assert log.read_text() == before


@pytest.mark.parametrize(
    "rel", ["rounds/round-1/artifacts/benchmark.csv", "rounds/round-1/round.json"]
)
def test_an_edited_round_record_is_tampering_for_every_reader(project, rel, monkeypatch, capsys):
    """Each reader refuses before any work, so each runs in this process (``ratchet`` as a
    user runs it: its exit code, what it wrote to stderr, no exception past ``main``)."""
    from kernel_ratchet import cli
    from tests.campaign.conftest import campaign_dir, set_blocks

    path = campaign_dir(project) / rel
    text = path.read_text()
    digits = next(i for i, ch in enumerate(text) if ch in "123456789")
    path.write_text(text[:digits] + str(int(text[digits]) % 9 + 1) + text[digits + 1 :])
    set_blocks(project, M=32, N=32)
    monkeypatch.chdir(project)
    for args in (("status",), ("status", "--json"), ("validate", "--hypothesis", "x"), ("report",)):
        monkeypatch.setattr(sys, "argv", ["ratchet", *args])
        saved = signal.getsignal(signal.SIGTERM)
        try:
            with pytest.raises(SystemExit) as exc:
                cli.main()
        finally:
            signal.signal(signal.SIGTERM, saved)  # main() installs its handler
        out = capsys.readouterr()
        assert exc.value.code == 7, (args, out.out + out.err)
        assert rel in out.err, (args, out.out + out.err)


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """``ratchet *args`` in this process; its exit code and its stdout and stderr together."""
    from kernel_ratchet import cli

    monkeypatch.setattr(sys, "argv", ["ratchet", *args])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    out = capsys.readouterr()
    return exc.value.code, out.out + out.err


def test_a_malformed_state_is_a_campaign_error(project):
    from tests.campaign.conftest import campaign_dir

    (campaign_dir(project) / "state.json").write_text("{}")
    r = ratchet_in(project, "status")
    assert r.returncode == 5, r.stdout + r.stderr
    assert "state.json" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("text", ["campaign: [unclosed\n", "- a list\n", "campaign: 3\nx: 1\n"])
def test_an_invalid_manifest_is_a_campaign_error(project, text):
    from tests.campaign.conftest import campaign_dir

    (campaign_dir(project) / "manifest.yaml").write_text(text)
    r = ratchet_in(project, "status")
    assert r.returncode == 5, r.stdout + r.stderr
    assert "manifest.yaml" in r.stderr and "Traceback" not in r.stderr


def test_a_read_only_campaign_directory_is_a_clear_error(project, monkeypatch, capsys):
    import errno

    from kernel_ratchet.campaign.lock import CampaignLock

    def read_only(self):
        raise OSError(errno.EROFS, "Read-only file system", str(self.path))

    monkeypatch.setattr(CampaignLock, "acquire", read_only)
    monkeypatch.chdir(project)
    code, err = run_main(monkeypatch, capsys, "status")
    assert code == 2 and "Read-only file system" in err and "Traceback" not in err


def test_a_full_disk_is_a_clear_error_and_leaves_no_temp_file(project, monkeypatch, capsys):
    import errno
    import os

    from tests.campaign.conftest import campaign_dir, set_blocks

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    set_blocks(project, M=32, N=32)
    monkeypatch.chdir(project)
    monkeypatch.setattr(os, "fsync", full)
    code, err = run_main(monkeypatch, capsys, "validate", "--hypothesis", "32x32 tiles")
    words = " ".join(err.split())  # the console wraps long paths where the width falls
    assert code == 2 and "No space left on device" in words
    assert "state.json" in err.replace("\n", "")
    assert "run `ratchet status`, which finishes or closes the round" in words  # what next
    assert not list(campaign_dir(project).glob(".*.tmp"))


def test_a_syntax_error_is_recorded_as_a_compile_failure(project):
    import json

    from tests.campaign.conftest import KERNEL, campaign_dir

    path = project / KERNEL
    path.write_text(path.read_text() + "\ndef broken(:\n")
    r = ratchet_in(project, "validate", "--hypothesis", "a typo")
    assert r.returncode == 1, r.stdout + r.stderr
    rec = json.loads((campaign_dir(project) / "rounds/round-2/round.json").read_text())
    assert rec["category"] == "compile", rec["reason"]
    assert "SyntaxError" in rec["reason"] and "kernel.py" in rec["reason"]


@pytest.mark.soak  # a whole round for a scope-check rule
def test_editor_swap_files_pass_the_scope_check_and_are_recorded(project):
    import json

    from tests.campaign.conftest import campaign_dir, set_blocks

    junk = ["tiny_gemm/.kernel.py.swp", "tiny_gemm/kernel.py~", "tiny_gemm/.#kernel.py", "4913"]
    # what users keep beside a project: a run's saved output, notes, IDE and OS state
    junk += ["run.log", "ideas.md", "nohup.out", ".vscode/settings.json", "tiny_gemm/.DS_Store"]
    junk += ["tiny_gemm/kernel.py.orig", "tiny_gemm/kernel.py___jb_old___"]
    for rel in junk:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("editor state\n")
    set_blocks(project, M=32, N=32)
    r = ratchet_in(project, "validate", "--hypothesis", "32x32 tiles")
    rec = json.loads((campaign_dir(project) / "rounds/round-2/round.json").read_text())
    assert rec["category"] != "scope", rec["reason"]
    assert sorted(rec["ignored_editor_files"]) == sorted(junk), r.stdout + r.stderr


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("run.log", True),
        ("docs/ideas.md", True),
        (".ipynb_checkpoints/x-checkpoint.ipynb", True),
        (".hypothesis/examples/abc", True),
        ("conftest.py", False),  # imported by pytest
        ("tiny_gemm/configs.json", False),  # configuration a kernel may read
        ("tiny_gemm/table.csv", False),
        ("tiny_gemm/__pycache__/reference.cpython-311.pyc", False),  # compiled code
        ("sitecustomize.py", False),
    ],
)
def test_only_files_no_round_can_read_are_ignored(path, ignored):
    from kernel_ratchet.campaign.scope import is_ignored

    assert is_ignored(path) is ignored


def test_status_says_whose_number_a_rolled_back_round_shows(monkeypatch, capsys):
    from contextlib import contextmanager
    from types import SimpleNamespace

    import kernel_ratchet.campaign.status as status_mod
    from kernel_ratchet.cli import rounds

    @contextmanager
    def fake_campaign(*_args):
        yield SimpleNamespace(recover=lambda: None, ctx=None)

    row = {"status": "ROLLED BACK", "level": "quick", "hypothesis": "h", "round": 2}
    shown = {
        "campaign": "c",
        "phase": "OPTIMIZING",
        "next_round": 3,
        "incumbent_round": 1,
        "termination": None,
        "rounds": [
            {**row, "paired_chain": 0.4654, "vs_baseline": 0.4654, "category": "no-gain"},
            {**row, "round": 3, "seconds": {"test": 4.0, "ab_quick": 12.0, "measure": 17.0}},
            {**row, "round": 4, "category": "interrupted", "rehearsal": "REHEARSAL: ROLLED BACK"},
        ],
    }
    monkeypatch.setattr(rounds, "open_campaign", fake_campaign)
    monkeypatch.setattr(status_mod, "campaign_status", lambda _ctx: shown)
    monkeypatch.setattr(rounds.out, "width", 200)
    code, printed = run_main(monkeypatch, capsys, "status")
    assert code == 0 and "+46.54% (candidate, rolled back)" in printed
    assert "17 s: test 4, ab_quick 12" in " ".join(printed.split())  # where round 3's time went
    # why each round was rolled back, an interrupted one included
    assert "ROLLED BACK (no-gain)" in printed
    assert "REHEARSAL: ROLLED BACK (interrupted)" in printed


def test_status_keeps_a_long_hypothesis_readable_at_80_columns(monkeypatch, capsys):
    from contextlib import contextmanager
    from types import SimpleNamespace

    import kernel_ratchet.campaign.status as status_mod
    from kernel_ratchet.cli import rounds

    @contextmanager
    def fake_campaign(*_args):
        yield SimpleNamespace(recover=lambda: None, ctx=None)

    hyp = "A launch plan for odd shapes: " + "stride-alignment hints, wave-sized split-K, " * 6
    row = {"status": "ACCEPTED", "level": "full", "hypothesis": hyp, "round": 3}
    row["seconds"] = {"test": 43.2, "harness_full": 15.3, "ab_full": 54.6, "measure": 119.4}
    shown = {
        "campaign": "c",
        "phase": "OPTIMIZING",
        "next_round": 4,
        "incumbent_round": 3,
        "termination": None,
        "rounds": [{**row, "paired_chain": 0.0671, "vs_baseline": 2.0195}],
    }
    monkeypatch.setattr(rounds, "open_campaign", fake_campaign)
    monkeypatch.setattr(status_mod, "campaign_status", lambda _ctx: shown)
    monkeypatch.setattr(rounds.out, "width", 80)
    code, printed = run_main(monkeypatch, capsys, "status")
    assert code == 0
    assert "round-3: A launch plan for odd shapes: stride-alignment hints," in printed
    assert "…" in printed  # cut at 160 characters
    assert "119 s: test 43" in " ".join(printed.split())  # the time column is not pushed out


def test_a_commit_message_names_the_decisions_numbers_and_metric():
    from kernel_ratchet.campaign.render import commit_message

    msg = commit_message(
        "tiny_gemm",
        "TRITON",
        2,
        "32x32 tiles",
        "fewer programs",
        0.00123,
        0.00154,
        "logs/optimize.md",
        metric="gflops (paired A/B)",
        gain=0.251,
    )
    assert "Result: 0.00123 -> 0.00154 (+25.1%) gflops (paired A/B)" in msg.splitlines()


def test_ctrl_c_through_a_closed_pipe_closes_the_round_and_exits_130(project):
    import json
    import signal

    from tests.campaign.conftest import KERNEL, campaign_dir, set_blocks

    incumbent = (project / KERNEL).read_text()
    set_blocks(project, M=32, N=32)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_ratchet.cli", "validate", "--hypothesis", "32x32"],
        cwd=project,
        env=cli_env(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # as from a terminal: a shell's background job would start it with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = b""
    while b"round-2" not in seen:  # the round is open: its first step is running
        line = proc.stdout.readline()
        assert line, seen.decode()
        seen += line
    proc.stdout.close()  # `| tee log` killed by the same Ctrl+C: writes now fail (EPIPE)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=300) == 130
    cdir = campaign_dir(project)
    state = json.loads((cdir / "state.json").read_text())
    assert state["pending"] is None and state["next_round"] == 3
    rec = json.loads((cdir / "rounds/round-2/round.json").read_text())
    assert rec["status"] == "ROLLED BACK" and rec["category"] == "interrupted"
    assert (project / KERNEL).read_text() == incumbent


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--hypothesis", "  "], "state the round's hypothesis"),
        (["--hypothesis", "tiles", "--bucket", "K9"], "bucket must be one of"),
    ],
)
def test_a_round_without_a_usable_hypothesis_or_bucket_is_a_usage_error(project, args, says):
    r = ratchet_in(project, "validate", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr


def test_init_refused_by_the_checklist_is_a_profile_problem(tmp_path, monkeypatch, capsys):
    """A description that names an adapter the package lacks is a ratchet.yaml problem: exit 3,
    the failing item named, and no campaign created."""
    from tests.campaign.conftest import make_project

    root = make_project(tmp_path / "p")
    yaml = root / "ratchet.yaml"
    yaml.write_text(
        yaml.read_text().replace("tiny_gemm.adapter:TinyGemm", "tiny_gemm.adapter:Nope")
    )
    monkeypatch.chdir(root)
    code, out = run_main(monkeypatch, capsys, "init", "--op", "tiny_gemm", "-y")
    assert code == 3, out
    assert "DEFINE_TARGET checklist fails" in out and "tiny_gemm.adapter:Nope" in out
    assert "parameter" not in out  # the refusal alone: no table of the campaign it refused
    assert not (root / ".ratchet" / "campaigns").exists() or not any(
        (root / ".ratchet" / "campaigns").iterdir()
    )


@pytest.mark.parametrize("terminated, code", [(False, 130), (True, 143)])
def test_a_stop_claims_no_round_it_did_not_run(terminated, code, capsys):
    """Ctrl+C or SIGTERM of any command (init, report: no round) exits with its code and says
    only what holds for every command, and how to go on (the README: resume continues)."""
    from kernel_ratchet.cli import _stopped

    with pytest.raises(SystemExit) as exit_:
        _stopped(terminated)
    said = " ".join(capsys.readouterr().err.split())
    assert exit_.value.code == code
    assert "a round in flight, if any, was closed" in said and "ratchet status" in said
    assert "`ratchet resume` continues" in said and "`ratchet validate`" in said
