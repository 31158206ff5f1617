"""How the ``ratchet`` command fails: usage errors, faults and forged input get a clear message
and the exit code the README's table documents, never a traceback."""

from __future__ import annotations

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
def test_an_edited_round_record_is_tampering_for_every_reader(project, rel):
    from tests.campaign.conftest import campaign_dir, set_blocks

    path = campaign_dir(project) / rel
    text = path.read_text()
    digits = next(i for i, ch in enumerate(text) if ch in "123456789")
    path.write_text(text[:digits] + str(int(text[digits]) % 9 + 1) + text[digits + 1 :])
    set_blocks(project, M=32, N=32)
    for args in (("status",), ("status", "--json"), ("validate", "--hypothesis", "x"), ("report",)):
        r = ratchet_in(project, *args)
        assert r.returncode == 7, (args, r.stdout + r.stderr)
        assert rel in r.stderr and "Traceback" not in r.stderr

