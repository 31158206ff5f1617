"""What every ``ratchet`` command shares: the Typer apps, the consoles, the common options, and
opening the profile and a campaign."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

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
out = Console()
err = Console(stderr=True)

ProfileOpt = typer.Option(None, "--profile", help="ratchet.yaml (default: found from the cwd)")
CampaignOpt = typer.Option(None, "--campaign", help="campaign name (default: most recent)")
PauseOpt = typer.Option(
    False,
    "--pause",
    help="when this run's --max-iterations or --max-duration is spent, pause "
    "(no REPORT; `ratchet resume` continues) instead of ending the campaign",
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


@contextmanager
def progress() -> Iterator[Say]:
    """A spinner on stderr; yields the ``say`` callback that prints and shows progress."""
    with err.status("working...") as status:

        def say(msg: str) -> None:
            err.print(f"[dim]{msg}[/dim]")
            status.update(msg)

        yield say


@contextmanager
def open_campaign(profile_path: Path | None, name: str | None) -> Iterator[Campaign]:
    """The named (or most recent) campaign, opened under its lock, saying progress."""
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.locate import find_campaign

    prof = profile_at(profile_path)
    with progress() as say, Campaign(prof, find_campaign(prof, name), say=say) as c:
        yield c
