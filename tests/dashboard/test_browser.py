"""The dashboard in a real browser: headless Chromium (Debian's ``chromium``) through Python
Playwright, every network request refused, so what it shows it shows offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.dashboard import site
from kernel_ratchet.dashboard.browser import DEFAULT_CHROMIUM, open_page

pytest.importorskip(
    "playwright", reason="the browser test needs playwright: pip install playwright"
)
pytestmark = pytest.mark.skipif(
    not Path(DEFAULT_CHROMIUM).is_file(),
    reason=f"no {DEFAULT_CHROMIUM}: apt-get install -y chromium (.ci/run installs it)",
)

#: Budget of a 200-round page's load; on a machine where plotly.js alone loads slower than
#: REFERENCE_SLOW_MS, the page may take at most EXTRA_MS more than plotly.js alone.
LOAD_MS, REFERENCE_SLOW_MS, EXTRA_MS = 2000.0, 1000.0, 1000.0
POINTS = """() => Object.fromEntries(Array.from(document.querySelectorAll('.chart'))
    .filter(e => e.data).map(e => [e.id, e.data.map(t => (t.x || []).length)]))"""


def test_the_page_draws_every_chart_offline_without_errors(small, long_campaign, tmp_path):
    cdir, exp = small
    page = site.write_live(cdir)
    with open_page(page) as run:
        assert run.errors == [] and run.blocked == []
        drawn = run.page.evaluate(POINTS)
        assert set(drawn) == {"chain", "roofline", "time", "search", f"forest-{exp.rounds}"}
        assert sum(drawn["chain"]) == 1 + exp.accepted + exp.rolled_back_paired + exp.rounds + (
            exp.rounds - exp.no_decision
        )  # incumbent line, the three outcomes, the harness series
        assert drawn["search"] == [exp.accepted, exp.rolled_back_paired + exp.no_decision]
        assert drawn[f"forest-{exp.rounds}"] == [3, 1, 1]  # shapes, aggregate, harness-only
        run.page.click("#round-2 > summary")  # a closed round's chart is drawn when opened
        run.page.wait_for_function("document.getElementById('forest-2').data")
        assert run.page.evaluate(POINTS)["forest-2"] == [3, 1, 1]
        assert run.page.locator("table").count() >= 5  # every chart has its table
        run.page.set_viewport_size({"width": 380, "height": 800})  # the charts reflow to fit
        run.page.wait_for_function(
            "document.documentElement.scrollWidth <= innerWidth", timeout=10_000
        )
        run.page.set_viewport_size({"width": 1280, "height": 900})
        shot = tmp_path / "dashboard.png"
        run.page.screenshot(path=str(shot), full_page=True)
        assert run.errors == []
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    _loads_fast(long_campaign[0], tmp_path)


def _loads_fast(cdir: Path, tmp_path: Path) -> None:
    from kernel_ratchet.dashboard.page import plotly_js

    ref = tmp_path / "plotly-only.html"
    ref.write_text(
        f"<html><body><script>{plotly_js()}</script>"
        "<script>document.body.setAttribute('data-ready', '1')</script></body></html>"
    )
    with open_page(ref) as run:
        reference = run.load_ms
    with open_page(site.write_live(cdir)) as run:
        assert run.errors == []
        load = run.load_ms
    print(f"200-round page: {load:.0f} ms; plotly.js alone: {reference:.0f} ms")
    if reference <= REFERENCE_SLOW_MS:
        assert load < LOAD_MS
    else:  # a loaded machine: hold the page to its own cost
        assert load - reference < EXTRA_MS
