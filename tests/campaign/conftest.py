"""Fixtures for campaign tests: temporary git copies of the CPU example, driven by the CLI.

A baselined project is built once per session and copied for each test (campaigns are
relocatable: the generated harness finds the project root relative to itself).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.profile.loader import load_profile
from tests.cli_inprocess import cli_result
from tests.shared_build import built_once

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tiny_gemm"
KERNEL = "tiny_gemm/kernel.py"


def cli_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KERNEL_RATCHET_FAULT"}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(REPO)])
    env["TRITON_INTERPRET"] = "1"
    env.update(extra)
    return env


def ratchet(root: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    """Run the real `ratchet` CLI in ``root`` (a subprocess, like a user would)."""
    return subprocess.run(
        [sys.executable, "-m", "kernel_ratchet.cli", *args],
        cwd=root,
        env=cli_env(root, **extra),
        capture_output=True,
        text=True,
        timeout=900,
    )


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def make_project(dest: Path) -> Path:
    shutil.copytree(
        EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.csv", ".pytest_cache")
    )
    git(dest, "init", "-q", "-b", "main")
    git(dest, "config", "user.email", "test@example.com")
    git(dest, "config", "user.name", "test")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "tiny gemm")
    # The user's own uncommitted work, which a campaign must never touch.
    (dest / "notes.txt").write_text("my notes\n")
    with open(dest / "pyproject.toml", "a") as f:
        f.write("# a local edit the user has not committed\n")
    return dest


def set_blocks(root: Path, **blocks: int) -> None:
    path = root / KERNEL
    text = path.read_text()
    for name, value in blocks.items():
        text = re.sub(rf"^BLOCK_{name} = \d+", f"BLOCK_{name} = {value}", text, flags=re.M)
    path.write_text(text)


def break_kernel(root: Path) -> None:
    path = root / KERNEL
    good = "rm[:, None] * K + kk[None, :]"
    text = path.read_text().replace(good, good + " + 1")
    path.write_text(text)


def typo_kernel(root: Path) -> None:
    """A candidate that does not parse: its round closes as a compile failure before any of its
    steps starts a process (the cheapest round that closes)."""
    path = root / KERNEL
    path.write_text(path.read_text() + "\ndef broken(:\n")


def campaign_dir(root: Path) -> Path:
    (d,) = (root / ".ratchet" / "campaigns").iterdir()
    return d


def baselined_project(dest: Path, *init_flags: str) -> Path:
    """A fresh example project with a campaign initialised (extra ``init`` flags) and baselined."""
    root = make_project(dest)
    for args in (("init", "--op", "tiny_gemm", "--yes", *init_flags), ("baseline",)):
        r = ratchet(root, *args)
        assert r.returncode == 0, r.stdout + r.stderr
    return root


def session_baseline(tmp_path_factory) -> Path:
    """A private copy of the session's baselined example project, built once for every test
    directory that asks (their conftests each declare a ``baselined`` fixture returning it)."""
    return built_once(tmp_path_factory, "baselined", lambda d: baselined_project(d / "proj"))


#: The hypothesis of the shared accepted round (:func:`session_accepted`).
ACCEPTED_HYPOTHESIS = "32x32 output tiles: 4x fewer programs"


def session_accepted(tmp_path_factory) -> Path:
    """A private copy of the session's baselined example with round-2 (32x32 output tiles,
    bucket K1) ACCEPTED through ``ratchet validate``, built once for the whole run:
    :func:`session_two_rounds` goes on from it, the export tests read it."""

    def build(dest: Path) -> Path:
        root = dest / "proj"
        shutil.copytree(session_baseline(tmp_path_factory), root, symlinks=True)
        set_blocks(root, M=32, N=32)
        r = ratchet(root, "validate", "--hypothesis", ACCEPTED_HYPOTHESIS, "--bucket", "K1")
        assert r.returncode == 0 and "ACCEPTED" in r.stdout, r.stdout + r.stderr
        return root

    return built_once(tmp_path_factory, "accepted", build)


def session_two_rounds(tmp_path_factory) -> Path:
    """A private copy of :func:`session_accepted` with round-3 (shifted loads, lesson "off by
    one") ROLLED BACK at its focused test through ``ratchet validate``, built once for the
    whole run: the whole-campaign test goes on from it, the MCP tests read it."""

    def build(dest: Path) -> Path:
        root = dest / "proj"
        shutil.copytree(session_accepted(tmp_path_factory), root, symlinks=True)
        break_kernel(root)
        r = ratchet(root, "validate", "--hypothesis", "shifted loads", "--lesson", "off by one")
        assert r.returncode == 1 and "focused test" in r.stdout, r.stdout + r.stderr
        return root

    return built_once(tmp_path_factory, "two-rounds", build)


@pytest.fixture
def accepted_project(tmp_path_factory) -> Path:
    """A private copy of the session's campaign with round-2 (32x32 output tiles) ACCEPTED:
    its incumbent runs 2.5x faster in the interpreter than the baseline's 16x16 tiles, so a
    test of what happens around a round, whose candidate (64x64 tiles) only has to differ from
    the incumbent, measures and checks less there."""
    return session_accepted(tmp_path_factory)


@pytest.fixture(scope="session")
def baselined(tmp_path_factory) -> Path:
    return session_baseline(tmp_path_factory)


@pytest.fixture
def project(baselined: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "proj"
    shutil.copytree(baselined, dest, symlinks=True)
    return dest


def without_early_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """For rounds that end before their A/B (at the harness or the focused test): the A/B's
    correctness checks, which a round starts beside its focused test, are left to the A/B
    (``RATCHET_EARLY_CHECKS=0``), which these rounds never reach."""
    from kernel_ratchet.campaign.rounds.workers import EARLY_ENV

    monkeypatch.setenv(EARLY_ENV, "0")


def with_ops(profile, **ops):
    """``profile`` with extra ops beside ``tiny_gemm``: name -> (kernel_source, test command)."""
    if not ops:
        return profile
    base = profile.op("tiny_gemm")
    extra = {
        name: dataclasses.replace(base, name=name, kernel_source=tuple(src), test=test)
        for name, (src, test) in ops.items()
    }
    return dataclasses.replace(profile, ops={**profile.ops, **extra})


def campaign_opener(root: Path, monkeypatch):
    """Opens the campaign of ``root`` in this process, as the CLI would run there; keyword
    arguments of the call add ops to its profile (:func:`with_ops`)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(root)

    def _open(**ops) -> Campaign:
        return Campaign(with_ops(load_profile(root), **ops), campaign_dir(root))

    return _open


@pytest.fixture
def open_campaign(project, monkeypatch):
    return campaign_opener(project, monkeypatch)


@pytest.fixture
def open_accepted(accepted_project, monkeypatch):
    """The accepted campaign, for rounds that end at their harness or focused test."""
    without_early_checks(monkeypatch)
    return campaign_opener(accepted_project, monkeypatch)


@pytest.fixture
def ratchet_here(capsys, monkeypatch):
    """``ratchet`` in ``root``, run in this process (its main, as a user sees it: exit code,
    stdout, stderr), without an interpreter's start-up each; what it starts still runs apart."""

    def run(root: Path, *args: str):
        monkeypatch.chdir(root)
        monkeypatch.setenv("PYTHONPATH", cli_env(root)["PYTHONPATH"])
        return cli_result(capsys, monkeypatch, *args)

    return run
