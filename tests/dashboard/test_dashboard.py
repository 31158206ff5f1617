"""The dashboard's numbers, pages and writers, on recorded campaigns (no browser)."""

from __future__ import annotations

import json
import math
import re
import time
from statistics import NormalDist
from types import SimpleNamespace as NS

import pytest
from markupsafe import escape

from kernel_ratchet.dashboard import site
from kernel_ratchet.dashboard.model import load_campaign
from kernel_ratchet.dashboard.page import render_campaign_html
from kernel_ratchet.dashboard.series import (
    chain_points,
    forest_rows,
    headline,
    roofline,
    search_moves,
    time_steps,
)
from kernel_ratchet.errors import RatchetError
from tests.dashboard.builder import (
    CI,
    FAILED_TESTS,
    GAIN,
    LEVEL,
    QUANTITY,
    SHAPES,
    UNRESOLVED,
    WEIGHTED,
)


def _figures(html: str) -> dict[str, dict]:
    found = re.findall(r'<script type="application/json" id="([\w-]+)-json">(.*?)</script>', html)
    return {cid: json.loads(raw) for cid, raw in found}


def _points(fig: dict) -> dict[str, int]:
    return {t["name"]: len(t.get("x") or ()) for t in fig["data"]}


def test_the_chain_multiplies_each_paired_ratio_onto_its_incumbents_chain(small):
    cdir, _ = small
    pts = {p.round: p for p in chain_points(load_campaign(cdir))}
    assert pts[1].ratio == pts[1].incumbent == 1.0
    assert pts[2].ratio == pytest.approx(1 + GAIN)
    assert (pts[2].lo, pts[2].hi) == pytest.approx((1 + GAIN - 0.01, 1 + GAIN + 0.01))
    # round 3 rolled back against round 2: its CI is scaled by round 2's chain, the incumbent stays
    assert pts[3].ratio == pytest.approx((1 + GAIN) * (1 - GAIN))
    assert pts[3].lo == pytest.approx((1 + GAIN) * (1 - GAIN - 0.01))
    assert pts[3].incumbent == pytest.approx(1 + GAIN)
    # round 4 has no decision: nothing invented, the incumbent carries on
    assert pts[4].ratio is None and pts[4].lo is None and pts[4].harness is None
    assert pts[4].incumbent == pytest.approx(1 + GAIN)
    assert pts[5].ratio == pytest.approx((1 + GAIN) ** 2)
    assert pts[5].harness == pytest.approx(1 + ((1 + GAIN) ** 2 - 1) * 0.9)


def test_a_forest_has_each_shape_with_its_ci_then_the_aggregates(small):
    cdir, _ = small
    rows = forest_rows(load_campaign(cdir).record(2))
    kinds = ["shape", "shape", "unresolved", "aggregate", "weighted", "harness"]
    assert [r.kind for r in rows] == kinds
    assert rows[1].ratio == pytest.approx(1 + GAIN + 0.001)
    assert (rows[1].lo, rows[1].hi) == pytest.approx((1 + GAIN - 0.01, 1 + GAIN + 0.011))
    assert rows[2].label == UNRESOLVED and rows[2].verdict.endswith("unresolved")
    assert rows[3].label == "geomean of shapes (paired A/B)" and rows[3].lo == pytest.approx(
        1 + CI[0]
    )
    assert rows[3].verdict == f"ACCEPTED ({LEVEL:.0%} CI)"
    assert (rows[4].ratio, rows[4].lo, rows[4].hi) == pytest.approx(
        (1 + WEIGHTED, 1 + WEIGHTED - 0.012, 1 + WEIGHTED + 0.012)
    )
    assert rows[5].ratio == pytest.approx(1 + GAIN / 2) and rows[5].lo is None
    assert forest_rows(load_campaign(cdir).record(4)) == []


def test_the_headline_is_the_reports_paired_chain_with_its_ci(small):
    from kernel_ratchet.campaign.context import CampaignContext
    from kernel_ratchet.report.render import headline as report_headline

    cdir, exp = small
    data = load_campaign(cdir)
    ctx = CampaignContext(None, cdir, cdir, cdir, data.manifest, data.state, print)
    acc = [e for e in data.state.closed if e.status.value == "ACCEPTED"]
    ours = headline(data)
    assert ours.text() == report_headline(ctx, acc)
    # the delta method by hand, each side of the CI on its own: each step's log SE from its
    # CI's distance to its ratio at LEVEL, rescaled to 95%
    z = NormalDist().inv_cdf
    scale = z(0.975) / z(0.5 + LEVEL / 2) * math.sqrt(exp.accepted)
    below = (math.log(1 + GAIN) - math.log(1 + CI[0])) * scale
    above = (math.log(1 + CI[1]) - math.log(1 + GAIN)) * scale
    chain = exp.accepted * math.log(1 + GAIN)
    assert ours.accepted == exp.accepted
    assert ours.geomean == pytest.approx(
        (math.exp(chain), math.exp(chain - below), math.exp(chain + above))
    )
    assert ours.chain == pytest.approx((1 + GAIN) ** exp.accepted - 1)
    assert ours.weighted[0] == pytest.approx((1 + WEIGHTED) ** exp.accepted)
    html = render_campaign_html(data)
    assert escape(ours.text()) in html and QUANTITY in html
    assert f"{exp.rehearsals} REHEARSAL, never counted" in html


def test_a_cpu_campaign_is_not_called_a_rehearsal_where_its_rounds_count(small):
    """A CPU campaign run without --rehearse accepts and commits rounds: the page says CPU,
    and REHEARSAL only for the rounds whose records are rehearsals."""
    import dataclasses

    data = load_campaign(small[0])
    cpu = dataclasses.replace(data, manifest=dataclasses.replace(data.manifest, target_gpu="cpu"))
    html = render_campaign_html(cpu)
    assert "<strong>CPU</strong>: measured on the CPU" in html
    assert "<strong>REHEARSAL</strong>: CPU" not in html
    assert "<strong>CPU</strong>" not in render_campaign_html(data)


def test_a_round_in_flight_is_named_as_such_not_as_the_next_round(long_campaign):
    """The state counts ``next_round`` past a round as it starts: a page written while it runs
    names that round, in flight, instead of the number after it."""
    from kernel_ratchet.campaign.state import PendingRound, Stage

    data = load_campaign(long_campaign[0])
    n = data.state.next_round
    assert f"next round: {n}</li>" in render_campaign_html(data)
    data.state.pending, data.state.next_round = PendingRound(n, Stage.MEASURING, "now"), n + 1
    html = render_campaign_html(data)
    assert f"round in flight: {n}</li>" in html and f"next round: {n + 1}" not in html


def test_search_moves_and_the_roofline_come_from_the_records(small):
    cdir, exp = small
    data = load_campaign(cdir)
    moves = search_moves(data)
    assert len(moves) == exp.moves and moves[0].knob == "BLOCK_M" and moves[0].value == "32"
    roof = roofline(data)
    assert roof["dtype"] == "bf16" and roof["peak_tflops"] == 800.0
    base = {s["label"]: s for s in roof["baseline"]["shapes"]}
    inc = {s["label"]: s for s in roof["incumbent"]["shapes"]}
    label = SHAPES[0][0]
    assert base[label]["efficiency"] == pytest.approx(base[label]["achieved_tflops"] / 800.0)
    assert inc[label]["achieved_tflops"] > base[label]["achieved_tflops"]  # faster incumbent


def test_every_chart_holds_the_records_points_and_missing_fields_say_not_recorded(small):
    cdir, exp = small
    html = render_campaign_html(load_campaign(cdir))
    figs = _figures(html)
    chain = _points(figs["chain"])
    assert chain["ACCEPTED (paired A/B, CI)"] == exp.accepted
    assert chain["ROLLED BACK (paired A/B, CI)"] == exp.rolled_back_paired
    assert chain["BASELINE (paired A/B, CI)"] == 1
    assert chain["REHEARSAL (interpreter timings, never counts)"] == exp.rehearsals
    assert chain["incumbent (paired chain)"] == exp.rounds
    forests = [k for k in figs if k.startswith("forest-")]
    assert len(forests) == exp.rounds - 1 - exp.no_decision  # no baseline, no undecided round
    assert sum(_points(figs["roofline"]).values()) == 3 * len(SHAPES)
    assert sum(_points(figs["search"]).values()) == exp.moves
    assert html.count("<script>") == 2  # plotly.js once, the glue once
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html  # escaped report
    assert "Record not recorded" not in html and "not recorded" in html
    assert "Not recorded: the round ended before a decision was measured." in html


def test_a_round_whose_focused_test_failed_lists_every_failed_test(small):
    html = render_campaign_html(load_campaign(small[0]))
    assert f"Failed tests ({len(FAILED_TESTS)}):" in html
    assert all(f"<code>{escape(t)}</code>" in html for t in FAILED_TESTS)
    assert "::u[<b>]" not in html  # the id's markup is text


def test_missing_ceilings_and_records_say_not_recorded_and_a_sync_back_is_shown(small, tmp_path):
    import shutil

    cdir = shutil.copytree(small[0], tmp_path / "c")
    (cdir / "profiles" / "ceilings.json").unlink()
    (cdir / "rounds" / "round-2" / "round.json").unlink()
    assert "Sync-back into the project" not in render_campaign_html(load_campaign(cdir))
    sync = {"ok": False, "round": 5, "commit": None, "details": ["- Focused test: FAIL"]}
    (cdir / "sync-back").mkdir()
    (cdir / "sync-back" / "result.json").write_text(json.dumps(sync))
    html = render_campaign_html(load_campaign(cdir))
    assert "FAILED</span>: round-5's kernel files" in html and "<li>- Focused test: FAIL" in html
    assert "Not recorded: the ceilings of this machine" in html
    assert "Record not recorded: round.json is missing." in html


def test_a_200_round_page_renders_fast_and_stays_small(long_campaign):
    cdir, exp = long_campaign
    data = load_campaign(cdir)
    render_campaign_html(data)  # imports and the per-round chart cache warm up
    t0 = time.perf_counter()
    html = render_campaign_html(data)
    again = time.perf_counter() - t0
    from kernel_ratchet.dashboard.page import plotly_js

    own = len(html) - len(plotly_js())
    assert own < 3_000_000, f"{own} bytes besides plotly.js for {exp.rounds} rounds"
    assert again < 5.0, f"re-rendering {exp.rounds} rounds took {again:.1f} s"
    assert html.count('<details class="round"') == exp.rounds
    assert '<meta http-equiv="refresh"' not in html  # refresh only when asked
    live = render_campaign_html(data, refresh=30)
    assert '<meta http-equiv="refresh" content="30">' in live


def test_the_live_page_lands_in_the_campaign_dir_and_a_failure_never_raises(small, tmp_path):
    import shutil

    cdir = shutil.copytree(small[0], tmp_path / "c")
    path = site.refresh_live(cdir)
    assert path == cdir / site.LIVE_PAGE and path.stat().st_size > 1_000_000
    assert "http-equiv" not in path.read_text()[:3000]  # a finished campaign never reloads
    (cdir / "state.json").write_text("{broken")
    said = []
    assert site.refresh_live(cdir, say=said.append) is None
    assert said and "dashboard not written" in said[0] and "state.json" in said[0]


def test_the_index_lists_each_campaign_and_the_ones_it_cannot_read(small, tmp_path):
    bad = tmp_path / "broken_campaign"
    bad.mkdir()
    index, pages, problems = site.write_site([small[0], bad], tmp_path / "out")
    assert [p.name for p in pages] == [f"{small[0].name}.html"]
    text = index.read_text()
    assert f'href="{small[0].name}.html"' in text and "broken_campaign" in text
    assert escape(headline(load_campaign(small[0])).text()) in text  # the report's headline
    assert len(problems) == 1 and "manifest.yaml is missing" in problems[0]


def test_without_plotly_the_dashboard_says_what_to_install(monkeypatch, small):
    monkeypatch.setattr(site, "has_plotly", lambda: False)
    with pytest.raises(RatchetError, match=r"pip install 'kernel-ratchet\[dashboard\]'"):
        site.require_plotly()
    assert site.refresh_live(small[0]) is None  # a round goes on without a page


def test_the_time_chart_adds_a_rounds_time_outside_its_steps():
    def rnd(n, sec):
        return NS(n=n, record=NS(seconds=sec))

    data = NS(
        rounds=[
            rnd(1, {"test": 10.0, "harness_full": 15.3, "measure": 29.9}),  # 4.6 s outside
            rnd(2, {"test": 9.9, "ab_quick": 13.0, "measure": 23.3}),  # 0.4 s: not drawn
            rnd(3, None),
        ]
    )
    steps, per = time_steps(data)
    assert steps == ["test", "harness_full", "ab_quick", "other"]
    assert per[1]["other"] == pytest.approx(4.6) and "other" not in per[2] and 3 not in per
