"""Run the ``ratchet`` command in this process (no interpreter start-up), as a user would see it:
its exit code and what it printed."""

from __future__ import annotations

import signal
import sys

import pytest


def run_cli(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, *args: str):
    """``(exit code, stdout + stderr)`` of ``ratchet ARGS``; the SIGTERM handler is restored."""
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
    return exc.value.code, captured.out + captured.err
