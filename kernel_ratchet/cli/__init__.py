"""The ``ratchet`` command: a thin layer over the profile and campaign APIs.

Exit codes (scripts may rely on them):
  0  success; for ``validate``, the round was ACCEPTED
  1  the command ran but its verdict is negative: a round ROLLED BACK, ``check`` found problems,
     ``accept`` failed
  2  a usage error, a file that cannot be read or written, any other kernel-ratchet error
  3  ratchet.yaml problem                    4  benchmark CSV schema drift
  5  campaign state does not allow the command, or state.json / manifest.yaml is malformed
  6  another process drives the campaign     7  an append-only log or a round record was edited
  8  git problem                             130 interrupted (Ctrl+C); the round was closed
  143 terminated (SIGTERM); the round was closed
"""

from __future__ import annotations

import signal
import sys
from typing import TextIO

import typer
from rich.markup import escape

from kernel_ratchet.cli import (  # noqa: F401 - they register the commands
    bench,
    dashboard,
    fleet,
    newop,
    rounds,
    run,
    setup,
    sweep,
    tools,
)
from kernel_ratchet.cli.common import app, err, safe_print, silence
from kernel_ratchet.cli.help_text import unwrap_help
from kernel_ratchet.errors import (
    INTERRUPT_REQUESTED,
    TERMINATION_REQUESTED,
    RatchetError,
    Terminated,
)

__all__ = ["app", "main"]

unwrap_help(app)


def _terminate(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    TERMINATION_REQUESTED.set()
    raise Terminated("SIGTERM")


def _interrupt(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    INTERRUPT_REQUESTED.set()
    raise KeyboardInterrupt


def _stopped(terminated: bool) -> None:
    """Exit after Ctrl+C (130) or SIGTERM (143); the engine has closed the round in flight, if
    the command ran one (``init`` or ``report`` runs none)."""
    silence_if_closed(sys.stdout)
    what = "terminated (SIGTERM)" if terminated else "interrupted"
    safe_print(
        err,
        f"[yellow]{what}[/yellow]: a round in flight, if any, was closed and its records "
        "kept; `ratchet resume` continues a campaign an optimizer drives, `ratchet validate` "
        "one driven by hand (`ratchet status` shows where it stands)",
        markup=True,
    )
    sys.exit(Terminated.exit_code if terminated else 130)


def silence_if_closed(stream: TextIO) -> None:
    """Flush ``stream``; silence it when its reader has gone, so that the interpreter's own
    flush at exit does not fail and change the exit code."""
    try:
        stream.flush()
    except (OSError, ValueError):
        silence(stream)


def main() -> None:
    """The ``ratchet`` console script: the command, its errors and interruptions as exit codes."""
    signal.signal(signal.SIGTERM, _terminate)
    INTERRUPT_REQUESTED.clear()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not an ignoring shell's
        signal.signal(signal.SIGINT, _interrupt)
    try:
        _main()
    finally:
        if signal.getsignal(signal.SIGINT) is _interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        INTERRUPT_REQUESTED.clear()  # handled: the command's round is closed


def _main() -> None:
    try:
        # returns typer.Exit's code in this mode; typer turns a KeyboardInterrupt (Ctrl+C, or
        # Terminated) raised in a command into a return of 130 (typer 0.29)
        rc = app(standalone_mode=False)
        terminated = TERMINATION_REQUESTED.is_set()  # also a Terminated lost in a finalizer
        if rc == 130 or terminated:
            _stopped(terminated)
        sys.exit(rc if isinstance(rc, int) else 0)
    except RatchetError as exc:
        # as text, unwrapped: a path or a command in it stays whole when copied
        err.print(
            f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True, markup=True
        )
        sys.exit(exc.exit_code)
    except OSError as exc:  # a file the campaign cannot read or write: read-only, full disk
        where = f" {escape(str(exc.filename))}" if exc.filename else ""
        msg = (
            f"[red]error:[/red] cannot access{where}: {escape(str(exc.strerror or exc))}. "
            "The campaign's state and round records are replaced whole or not at all: once the "
            "disk has room (or the directory is writable again), run `ratchet status`, which "
            "finishes or closes the round that was in flight"
        )
        safe_print(err, msg, highlight=False, soft_wrap=True, markup=True)
        silence_if_closed(sys.stdout)
        sys.exit(2)
    except KeyboardInterrupt as exc:  # a typer that lets it through
        _stopped(isinstance(exc, Terminated))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:  # a confirmation that got no answer: stdin closed or not a terminal
        err.print(
            "[red]error:[/red] the command asked for a confirmation and got no answer (stdin is "
            "closed or not a terminal); nothing was started. Pass --yes (-y) to run it without "
            "asking.",
            highlight=False,
            markup=True,
        )
        sys.exit(1)
    except SystemExit:
        raise
    except typer.TyperException as exc:
        # usage errors: typer bundles its own click, whose exceptions derive from
        # TyperException, not from an installed click's ClickException
        show = getattr(exc, "show", None)
        if show is None:
            raise
        show()
        sys.exit(getattr(exc, "exit_code", 2))


if __name__ == "__main__":
    main()
