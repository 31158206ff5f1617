"""``ratchet dashboard``: the HTML dashboard of one campaign or all, optionally served or
photographed."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from kernel_ratchet.cli.common import CampaignOpt, ProfileOpt, app, err, out, profile_at


@app.command()
def dashboard(
    campaign: str | None = CampaignOpt,
    all_: bool = typer.Option(False, "--all", help="every campaign of the project"),
    campaign_dir: Path | None = typer.Option(
        None,
        "--campaign-dir",
        help="a campaign directory read as it is (no ratchet.yaml needed: e.g. one copied "
        "from another machine); --out defaults to PATH/../dashboard",
    ),
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help="folder for the pages and index.html (default: <campaign_root>/../dashboard)",
    ),
    refresh: int = typer.Option(
        0, help="seconds between reloads of a running campaign's page (0: never)", min=0
    ),
    serve: bool = typer.Option(False, "--serve", help="serve the folder on localhost until Ctrl+C"),
    port: int = typer.Option(8000, help="port of --serve (0: any free port)", min=0),
    screenshot: Path | None = typer.Option(
        None, help="also save a full-page PNG of the campaign's page (headless Chromium)"
    ),
    browser: str | None = typer.Option(
        None, help="Chromium for --screenshot (default: /usr/bin/chromium)"
    ),
    profile: Path | None = ProfileOpt,
):
    """Write one self-contained HTML page per campaign and an index of them (charts drawn by
    plotly, inlined: the pages open without a network). Each round of `ratchet run`,
    `ratchet validate` and `ratchet resume`, and `ratchet accept` and `sync-back`, also rewrite
    <campaign>/dashboard.html."""
    from kernel_ratchet.dashboard.site import require_plotly, write_site

    require_plotly()
    if sum(map(bool, (all_, campaign, campaign_dir))) > 1:
        raise typer.BadParameter("give one of --campaign NAME, --all or --campaign-dir PATH")
    if campaign_dir is not None:
        cdirs, dest, tips = _recorded(campaign_dir, out_dir)
    else:
        cdirs, dest, tips = _of_project(profile, campaign, all_, out_dir)
    index, pages, problems = write_site(cdirs, dest, tips=tips, refresh=refresh)
    for p in problems:
        err.print(f"[yellow]skipped[/yellow] {escape(str(p))}", highlight=False, markup=True)
    for p in pages:
        out.print(f"wrote {p}", highlight=False)
    out.print(f"index: {index}", highlight=False)
    if screenshot is not None and pages:  # an unreadable campaign: its problem says why
        _screenshot(pages, screenshot, browser)
    if serve:
        from kernel_ratchet.dashboard.serve import serve_folder

        serve_folder(dest, port, lambda msg: out.print(msg, highlight=False))
    if problems:
        raise typer.Exit(1)


def _of_project(profile: Path | None, campaign: str | None, all_: bool, out_dir: Path | None):
    """The project's campaigns to draw, the folder for their pages and their tips files."""
    from kernel_ratchet.campaign.locate import find_campaign, list_campaigns
    from kernel_ratchet.dashboard.site import keep_out_of_git, tips_file

    prof = profile_at(profile)
    cdirs = list_campaigns(prof) if all_ else [find_campaign(prof, campaign)]
    dest = out_dir or prof.campaign_root_path.parent / "dashboard"
    keep_out_of_git(prof.root, dest)
    return cdirs, dest, lambda d: tips_file(prof, d.manifest)


def _recorded(cdir: Path, out_dir: Path | None):
    """A campaign directory on its own: no project, no tips; its pages next to it."""
    from kernel_ratchet.errors import RatchetError

    if not (cdir / "manifest.yaml").is_file():
        raise RatchetError(
            f"{cdir} is not a campaign directory (no manifest.yaml): give the folder that "
            "holds manifest.yaml, state.json and rounds/"
        )
    return [cdir.resolve()], out_dir or cdir.resolve().parent / "dashboard", None


def _screenshot(pages: list[Path], png: Path, browser: str | None) -> None:
    from kernel_ratchet.dashboard.browser import screenshot as shoot
    from kernel_ratchet.errors import RatchetError

    if len(pages) != 1:
        raise RatchetError("--screenshot photographs one campaign's page: give --campaign NAME")
    out.print(f"screenshot: {shoot(pages[0], png, browser=browser)}", highlight=False)


def after_round(c) -> None:
    """Rewrite the campaign's live page after a round closed (never fails the round)."""
    from kernel_ratchet.dashboard.site import after_round as rewrite

    rewrite(c)
