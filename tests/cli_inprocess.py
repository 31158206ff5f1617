"""Run the ``ratchet`` command in this process (no interpreter start-up), as a user would see it:
its exit code and what it printed."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest


def cli_result(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, *args: str
) -> subprocess.CompletedProcess:
    """``ratchet ARGS`` as ``subprocess.run`` would report it (exit code, stdout and stderr
    apart); the SIGTERM handler is restored."""
    from kernel_ratchet.cli import main

    monkeypatch.setattr(sys, "argv", ["ratchet", *args])
    saved = signal.getsignal(signal.SIGTERM)
    capsys.readouterr()
    try:
        with pytest.raises(SystemExit) as exc:
            main()
    finally:
        signal.signal(signal.SIGTERM, saved)
    captured = capsys.readouterr()
    code = 0 if exc.value.code is None else exc.value.code  # sys.exit() is exit status 0
    return subprocess.CompletedProcess(["ratchet", *args], code, captured.out, captured.err)


def run_cli(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, *args: str):
    """``(exit code, stdout + stderr)`` of ``ratchet ARGS``; the SIGTERM handler is restored."""
    r = cli_result(capsys, monkeypatch, *args)
    return r.returncode, r.stdout + r.stderr
