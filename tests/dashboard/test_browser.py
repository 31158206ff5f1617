"""The dashboard in a real browser: headless Chromium (Debian's ``chromium``) through Python
Playwright, every network request refused, so what it shows it shows offline. One browser
serves every test (the ``chromium`` fixture)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from kernel_ratchet.dashboard import browser, site
from kernel_ratchet.dashboard.browser import open_page
from tests.cli_inprocess import run_cli

POINTS = """() => Object.fromEntries(Array.from(document.querySelectorAll('.chart'))
    .filter(e => e.data).map(e => [e.id, e.data.map(t => (t.x || []).length)]))"""
#: A round's forest: shapes, the unresolved shape, geomean, time-weighted step, harness only.
FOREST = [2, 1, 1, 1, 1]


def test_the_page_draws_every_chart_offline_without_errors(small, chromium, tmp_path):
    cdir, exp = small
    with open_page(site.write_live(cdir), session=chromium) as run:
        assert run.errors == [] and run.blocked == []
        drawn = run.page.evaluate(POINTS)
        assert set(drawn) == {"chain", "roofline", "time", "search", f"forest-{exp.rounds}"}
        outcomes = 1 + exp.accepted + exp.rolled_back_paired + exp.rehearsals
        harness = exp.rounds - exp.no_decision
        assert sum(drawn["chain"]) == exp.rounds + outcomes + harness  # + the incumbent line
        moves = [exp.accepted, exp.rolled_back_paired + exp.no_decision, exp.rehearsals]
        assert drawn["search"] == moves
        assert drawn[f"forest-{exp.rounds}"] == FOREST
        run.page.click("#round-2 > summary")  # a closed round's chart is drawn when opened
        run.page.wait_for_function("document.getElementById('forest-2').data")
        assert run.page.evaluate(POINTS)["forest-2"] == FOREST
        assert run.page.locator("table").count() >= 5  # every chart has its table
        run.page.set_viewport_size({"width": 380, "height": 800})  # the charts reflow to fit
        run.page.wait_for_function(
            "document.documentElement.scrollWidth <= innerWidth", timeout=10_000
        )
        assert run.errors == []


@pytest.mark.slow
def test_a_200_round_page_draws_only_the_campaign_charts_and_the_open_round(
    long_campaign, chromium
):
    """What keeps a long campaign's page quick to load: the campaign charts and the open
    round's chart are drawn at load, every other round's chart only when its section opens.
    (Its load time is printed, not asserted: a wall-clock bound fails on a busy machine.)"""
    cdir, exp = long_campaign
    with open_page(site.write_live(cdir), session=chromium) as run:
        assert run.errors == []
        count = run.page.evaluate
        rounds = count("document.querySelectorAll('details.round').length")
        lazy = count("document.querySelectorAll('.chart.lazy').length")
        waiting = count("document.querySelectorAll('.chart.lazy:not([data-drawn])').length")
        drawn = count("Array.from(document.querySelectorAll('.chart[data-drawn]')).map(e => e.id)")
        print(f"{rounds}-round page: {run.load_ms:.0f} ms, {len(drawn)} charts drawn at load")
    charted = exp.rounds - exp.rehearsals - exp.no_decision  # the rounds with a forest
    assert rounds == exp.rounds and lazy == charted and waiting == charted - 1
    assert sorted(drawn) == sorted(["chain", "roofline", "time", "search", f"forest-{exp.rounds}"])


def test_a_copied_campaign_directory_is_photographed_by_the_command(
    small, chromium, tmp_path, monkeypatch, capsys
):
    @contextmanager
    def shared(exe=None):
        yield chromium

    monkeypatch.setattr(browser, "chromium", shared)  # the command's launch: the shared one
    copied = Path(shutil.copytree(small[0], tmp_path / "elsewhere" / "campaign"))
    monkeypatch.chdir(tmp_path)  # no ratchet.yaml here, nor above
    shot = tmp_path / "shots" / "dashboard.png"
    args = ("dashboard", "--campaign-dir", str(copied), "--out", str(tmp_path / "out"))
    rc, text = run_cli(capsys, monkeypatch, *args, "--screenshot", str(shot))
    assert rc == 0, text
    assert (tmp_path / "out" / "campaign.html").is_file() and (tmp_path / "out/index.html").exists()
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:4] == b"\x89PNG"
    rc, text = run_cli(capsys, monkeypatch, "dashboard", "--campaign-dir", str(tmp_path))
    assert rc == 2 and "not a campaign directory" in " ".join(text.split())  # wrapped lines
