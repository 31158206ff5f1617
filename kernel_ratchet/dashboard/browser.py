"""A dashboard page in a headless Chromium (Python Playwright), with the network blocked.

:func:`open_page` loads a page from a file with every network request refused, so whatever it
shows it shows offline, and collects the console errors and failed requests; it is what
``ratchet dashboard --screenshot`` and the browser test use. It drives an installed Chromium
(``/usr/bin/chromium``, Debian's ``chromium`` package, or ``--browser PATH``); Playwright's own
browser downloads are not needed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_ratchet.errors import RatchetError

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium to drive: ``explicit``, $RATCHET_CHROMIUM, /usr/bin/chromium, or one on
    PATH; None when there is none."""
    for cand in (explicit, os.environ.get("RATCHET_CHROMIUM"), DEFAULT_CHROMIUM):
        if cand and Path(cand).is_file():
            return cand
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageRun:
    """A loaded page: the Playwright page, its console errors and its blocked requests."""

    page: Any
    errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    load_ms: float = 0.0


def _requirements(browser: str | None) -> str:
    if importlib.util.find_spec("playwright") is None:
        raise RatchetError(
            "opening the dashboard in a browser needs playwright: pip install playwright"
        )
    exe = find_chromium(browser)
    if exe is None:
        raise RatchetError(
            "no Chromium found: install it (Debian/Ubuntu: `apt-get install -y chromium`) or "
            "give its path with --browser PATH"
        )
    return exe


@contextmanager
def chromium(browser: str | None = None) -> Iterator[Any]:
    """A headless Chromium (a Playwright ``Browser``) for as many pages as the block opens;
    raises RatchetError without playwright or Chromium."""
    exe = _requirements(browser)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=list(CHROMIUM_ARGS))
        try:
            yield b
        finally:
            b.close()


@contextmanager
def open_page(
    html: Path,
    *,
    browser: str | None = None,
    session: Any = None,
    width: int = 1280,
    height: int = 900,
) -> Iterator[PageRun]:
    """Open ``html`` in headless Chromium with the network blocked (only ``file:`` loads) and
    wait until its charts are drawn. ``session``: an open :func:`chromium` to use (else one is
    launched for this page). Raises RatchetError without playwright or Chromium."""
    if session is None:
        with chromium(browser) as b, _loaded(b, html, width, height) as run:
            yield run
    else:
        with _loaded(session, html, width, height) as run:
            yield run


@contextmanager
def _loaded(b: Any, html: Path, width: int, height: int) -> Iterator[PageRun]:
    ctx = b.new_context(viewport={"width": width, "height": height})
    try:
        page = ctx.new_page()
        run = PageRun(page)
        page.on("console", lambda m: m.type == "error" and run.errors.append(m.text))
        page.on("pageerror", lambda e: run.errors.append(str(e)))

        def route(r: Any) -> None:
            if r.request.url.startswith("file:"):
                r.continue_()
            else:
                run.blocked.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page.goto(Path(html).resolve().as_uri())
        page.wait_for_selector("body[data-ready]", timeout=30_000)
        run.load_ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        yield run
    finally:
        ctx.close()


def screenshot(html: Path, png: Path, *, browser: str | None = None, width: int = 1280) -> Path:
    """Save a full-page screenshot of ``html`` to ``png``; raises RatchetError when the page
    logs an error."""
    with open_page(html, browser=browser, width=width) as run:
        if run.errors:
            raise RatchetError(f"{html} logged errors in the browser: {run.errors[:3]}")
        Path(png).parent.mkdir(parents=True, exist_ok=True)
        run.page.screenshot(path=str(png), full_page=True)
    return Path(png)
