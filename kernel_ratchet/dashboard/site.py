"""Writing dashboards: a campaign's page, a folder of pages with their index, and the live
page each round rewrites.

The live page is ``<campaign_dir>/dashboard.html``: inside the campaign directory, which git
ignores, so writing it never counts as a change to the project. :func:`refresh_live` is what
the drivers call after a round closes; it never raises (a page that cannot be written costs
the round nothing: the failure is said and the campaign goes on).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import atomic_write_text
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.manifest import Manifest
from kernel_ratchet.campaign.tips import tips_path
from kernel_ratchet.dashboard.model import CampaignData, load_campaign
from kernel_ratchet.errors import GitError, RatchetError
from kernel_ratchet.profile.schema import Profile

if TYPE_CHECKING:
    from kernel_ratchet.campaign.engine import Campaign

#: The live page's name inside the campaign directory.
LIVE_PAGE = "dashboard.html"
#: Seconds between reloads of the live page while its campaign runs.
LIVE_REFRESH_S = 30
INSTALL = "pip install 'kernel-ratchet[dashboard]'  (or: pip install plotly)"
Say = Callable[[str], None]


def has_plotly() -> bool:
    return importlib.util.find_spec("plotly") is not None


def require_plotly() -> None:
    """Raise RatchetError (exit 2) saying what to install when plotly is missing."""
    if not has_plotly():
        raise RatchetError(f"the HTML dashboard draws its charts with plotly: {INSTALL}")


def tips_file(profile: Profile, m: Manifest) -> Path:
    """The historical tips file of the campaign's GPU, op and backend."""
    return tips_path(profile.tips_root_path, m.target_gpu, m.target_op, m.target_backend)


def campaign_html(data: CampaignData, refresh: int = 0) -> str:
    """The page of one campaign (requires plotly)."""
    require_plotly()
    from kernel_ratchet.dashboard.page import render_campaign_html

    return render_campaign_html(data, refresh=refresh, generated=now())


def write_live(cdir: Path, tips: Path | None = None, refresh: int = LIVE_REFRESH_S) -> Path:
    """Write ``<cdir>/dashboard.html`` from the campaign's records; returns its path."""
    data = load_campaign(cdir, tips)
    path = Path(cdir) / LIVE_PAGE
    atomic_write_text(path, campaign_html(data, refresh))
    return path


def refresh_live(cdir: Path, tips: Path | None = None, say: Say | None = None) -> Path | None:
    """Rewrite the live page after a round; None when plotly is not installed or the page
    could not be written (said through ``say``). Never raises: a dashboard never fails a
    round."""
    if not has_plotly():
        return None
    try:
        return write_live(cdir, tips)
    except Exception as exc:  # noqa: BLE001 - advisory output: say it and go on
        if say is not None:
            say(f"dashboard not written ({type(exc).__name__}: {exc}); the round is recorded")
        return None


def _chain(data: CampaignData) -> str:
    from kernel_ratchet.dashboard.series import headline

    return headline(data).text()


def _index_row(cdir: Path, page: Path | None, out: Path, problem: str, data) -> dict[str, Any]:
    row: dict[str, Any] = {"name": cdir.name, "data": data, "problem": problem}
    if data is not None:
        row["href"] = os.path.relpath(page, out) if page else ""
        row["accepted"] = sum(1 for r in data.rounds if r.entry.status.value == "ACCEPTED")
        row["chain"] = _chain(data)
    return row


def write_site(
    cdirs: Iterable[Path],
    out: Path,
    tips: Callable[[CampaignData], Path | None] | None = None,
    refresh: int = 0,
) -> tuple[Path, list[Path], list[str]]:
    """Write ``<out>/<campaign>.html`` for each campaign and ``<out>/index.html`` listing
    them; returns (index, pages, problems). A campaign whose records cannot be read is listed
    in the index with the reason and skipped."""
    require_plotly()
    from kernel_ratchet.dashboard.page import render_index_html

    out = Path(out)
    pages, problems, rows = [], [], []
    for cdir in cdirs:
        try:
            data = load_campaign(cdir)
            if tips is not None:
                data = _with_tips(data, tips(data))
            page = out / f"{cdir.name}.html"
            atomic_write_text(page, campaign_html(data, refresh))
        except RatchetError as exc:
            problems.append(f"{cdir.name}: {exc}")
            rows.append(_index_row(cdir, None, out, str(exc), None))
            continue
        pages.append(page)
        rows.append(_index_row(cdir, page, out, "", data))
    index = out / "index.html"
    atomic_write_text(index, render_index_html(rows, generated=now()))
    return index, pages, problems


def _with_tips(data: CampaignData, path: Path | None) -> CampaignData:
    if path is None or not path.exists():
        return data
    from dataclasses import replace

    return replace(data, tips=path.read_text(encoding="utf-8", errors="replace"))


def keep_out_of_git(project_root: Path, folder: Path) -> None:
    """Exclude ``folder`` from git when it lies in the project's repository: an untracked
    page there would count as a change outside the kernel files in the next round's scope
    check."""
    try:
        groot = git.toplevel(project_root)
    except (GitError, OSError):
        return
    folder = Path(folder).resolve()
    if folder.is_relative_to(groot.resolve()) and folder != groot.resolve():
        git.exclude(groot, os.path.relpath(folder, groot.resolve()))


def after_round(c: Campaign) -> Path | None:
    """Rewrite open campaign ``c``'s live page once a round (or the report) has closed; never
    raises (see :func:`refresh_live`)."""
    try:
        tips = tips_file(c.profile, c.m)
    except Exception:  # noqa: BLE001 - advisory output
        tips = None
    return refresh_live(c.dir, tips, c.say)
