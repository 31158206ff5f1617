"""Recorded campaigns for the dashboard tests, built once per session from typed records."""

from __future__ import annotations

import pytest

from tests.dashboard.builder import build_campaign

pytest.importorskip("plotly", reason="the dashboard extra: pip install plotly")


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """A finished 7-round campaign: (campaign dir, Expected)."""
    return build_campaign(tmp_path_factory.mktemp("dash-small"), 7)


@pytest.fixture(scope="session")
def long_campaign(tmp_path_factory):
    """A 200-round campaign still running: (campaign dir, Expected)."""
    return build_campaign(tmp_path_factory.mktemp("dash-long"), 200, finished=False)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the browser tests of a module (a launch costs seconds). Not
    for the session: Playwright's synchronous API keeps an event loop running in the thread
    while it is open, and a later test's ``asyncio.run`` (the MCP client's) would fail there."""
    from pathlib import Path

    from kernel_ratchet.dashboard.browser import DEFAULT_CHROMIUM, chromium

    pytest.importorskip("playwright", reason="the browser tests need: pip install playwright")
    if not Path(DEFAULT_CHROMIUM).is_file():
        pytest.skip(f"no {DEFAULT_CHROMIUM}: apt-get install -y chromium (.ci/run installs it)")
    with chromium() as browser:
        yield browser
