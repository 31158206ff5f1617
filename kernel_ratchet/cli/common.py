"""What every ``ratchet`` command shares: the Typer apps, the consoles, the common options, and
opening the profile and a campaign."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.profile.schema import Profile

Say = Callable[[str], None]

app = typer.Typer(
    help="kernel-ratchet: disciplined GPU-kernel optimization campaigns.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tips_app = typer.Typer(help="Historical tips: show or add.", no_args_is_help=True)
app.add_typer(tips_app, name="tips")


class _Console(Console):
    """A console that goes quiet when its reader has gone, where rich's exits with 1: a
    closed pipe must not abort closing the round in flight nor change the exit code."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence(sys.stderr if self.stderr else sys.stdout)


def _width(stream) -> int | None:
    """rich's width on a terminal (or from ``COLUMNS``); 160 columns when the output goes to
    a file, a pipe or an agent, where rich's 80 wrapped every table cell into a column of
    fragments."""
    if os.environ.get("COLUMNS") or (hasattr(stream, "isatty") and stream.isatty()):
        return None
    return PIPED_WIDTH


#: The width of tables and text written to a file, a pipe or an agent.
PIPED_WIDTH = 160

# Markup off: what the commands print holds pytest ids (test_x[m32]), paths and commands
# (pip install '.[dev]'), which rich would take for tags and drop; a call that styles its
# text passes markup=True and escapes what it inserts.
out = _Console(width=_width(sys.stdout), markup=False)
err = _Console(stderr=True, width=_width(sys.stderr), markup=False)

ProfileOpt = typer.Option(None, "--profile", help="ratchet.yaml (default: found from the cwd)")
CampaignOpt = typer.Option(None, "--campaign", help="campaign name (default: most recent)")
PauseOpt = typer.Option(
    False,
    "--pause",
    help="when this run's --max-iterations or --max-duration is spent, pause "
    "(no REPORT; `ratchet resume` continues) instead of ending the campaign",
)
QueueOpt = typer.Option(
    None,
    "--queue",
    help="--optimizer queue: a directory of prepared candidates (NAME.diff + NAME.json each)",
)
KnobsOpt = typer.Option(
    None,
    "--knobs",
    help="search only: comma-separated knobs it may move (e.g. "
    "block_m,block_n,num_warps,num_stages, the space of an exhaustive sweep)",
)


def profile_at(path: Path | None) -> Profile:
    """The handoff profile at ``path``, or the one found from the cwd."""
    from kernel_ratchet.profile.loader import find_profile, load_profile

    return load_profile(path if path else find_profile(Path.cwd()))


def safe_print(console: Console, msg: str, **kwargs: Any) -> None:
    """Print ``msg``, unless its reader is gone (``ratchet ... | tee log`` after Ctrl+C killed
    ``tee``): then the stream is silenced, so that closing the round in flight and exiting
    never fail on a write."""
    try:
        console.print(msg, **kwargs)
    except OSError:
        silence(sys.stderr if console.stderr else sys.stdout)


def silence(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at the null device (its reader has gone)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


@contextmanager
def progress() -> Iterator[Say]:
    """A spinner on stderr; yields the ``say`` callback that prints and shows progress. A
    closed stderr silences both instead of failing the command (see :func:`safe_print`)."""
    status = err.status("working...")
    try:
        status.start()
    except OSError:
        silence(sys.stderr)

    def say(msg: str) -> None:
        # plain text (a path or "[1/5]" is no markup), one line per message: a command in it
        # stays whole when copied from the terminal
        safe_print(err, f"[dim]{escape(msg)}[/dim]", soft_wrap=True, markup=True)
        with suppress(OSError):
            status.update(msg)

    try:
        yield say
    finally:
        with suppress(OSError):
            status.stop()


@contextmanager
def open_campaign(profile_path: Path | None, name: str | None) -> Iterator[Campaign]:
    """The named (or most recent) campaign, opened under its lock, saying progress."""
    from kernel_ratchet.campaign.drift import drift_note
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.locate import find_campaign

    prof = profile_at(profile_path)
    with progress() as say, Campaign(prof, find_campaign(prof, name), say=say) as c:
        note = drift_note(prof, c.ctx.m)
        if note:
            err.print(f"[yellow]warning: {escape(note)}[/yellow]", markup=True)
        yield c
