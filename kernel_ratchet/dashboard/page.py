"""The HTML of a campaign's page and of the index of campaigns (Jinja2 templates).

A page is one self-contained file: its styles, plotly.js (inlined once) and every chart's
figure JSON are in it, so it opens without a network. The charts of a round are drawn when its
section is opened, which keeps a 200-round page fast to load. Every chart has a table of the
same numbers next to it (its text alternative).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from kernel_ratchet.campaign.record import OVERLAP_STEP
from kernel_ratchet.campaign.render import time_line, unit
from kernel_ratchet.campaign.rounds.view import transfer_of
from kernel_ratchet.dashboard import figures
from kernel_ratchet.dashboard.model import CampaignData, RoundEntry
from kernel_ratchet.dashboard.series import (
    REHEARSAL,
    TOTAL_STEP,
    chain_points,
    forest_rows,
    headline,
    quantities,
    roof_rows,
    roofline,
    search_moves,
    time_steps,
)
from kernel_ratchet.scoring.paired_weighted import TimeWeighted

NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Chart:
    """A chart of the page: its element id, figure JSON and one-line text summary; ``lazy``
    charts are drawn when their round's section opens."""

    id: str
    figure: Markup
    summary: str
    points: dict[str, int] = field(default_factory=dict)  # trace name -> number of points


def _chart(cid: str, fig: go.Figure, summary: str) -> Chart:
    raw = fig.to_json().replace("</", "<\\/")  # never closes the <script> holding it
    points = {str(t.name): len(t.x if t.x is not None else ()) for t in fig.data}
    return Chart(cid, Markup(raw), summary, points)


@functools.lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("kernel_ratchet.dashboard", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = _pct
    env.filters["ratio"] = _ratio
    env.filters["num"] = _num
    env.filters["nr"] = _plain
    return env


def _plain(v: Any) -> str:
    """A recorded value as text; NOT_RECORDED for an absent one."""
    if v is None or v == "" or (isinstance(v, list | tuple | dict) and not v):
        return NOT_RECORDED
    if isinstance(v, dict):
        return ", ".join(f"{k} {_plain(x)}" for k, x in v.items())
    if isinstance(v, list | tuple):
        return ", ".join(_plain(x) for x in v)
    return str(v)


def _bad(x: Any) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _pct(x: float | None, digits: int = 2) -> str:
    return NOT_RECORDED if _bad(x) else f"{x * 100:+.{digits}f}%"


def _ratio(x: float | None) -> str:
    return NOT_RECORDED if _bad(x) else f"{x:.4f}x"


def _num(x: float | None) -> str:
    if _bad(x):
        return NOT_RECORDED
    return f"{x:.4g}"


@functools.lru_cache(maxsize=1)
def plotly_js() -> Markup:
    """The plotly.js bundle of the installed plotly (inlined once per page)."""
    return Markup(get_plotlyjs())


#: Forest charts of closed rounds by (campaign directory, round, finished): a closed round's
#: record never changes, so ``ratchet run`` draws each round's chart once, not once per round.
_FOREST_CACHE: dict[tuple[str, int, str], Chart] = {}


def _forest_chart(data: CampaignData, r: RoundEntry, rows: list) -> Chart:
    key = (str(data.dir), r.n, r.record.finished if r.record else "")
    if key not in _FOREST_CACHE:
        shapes = len([x for x in rows if x.kind in ("shape", "unresolved")])
        _FOREST_CACHE[key] = _chart(
            f"forest-{r.n}",
            figures.forest_figure(r.n, rows),
            f"round-{r.n}: {shapes} shape ratios with intervals, the geomean and the "
            "time-weighted step where recorded; the table below lists them.",
        )
    return _FOREST_CACHE[key]


def _round_view(data: CampaignData, r: RoundEntry) -> dict[str, Any]:
    rec = r.record
    view: dict[str, Any] = {"n": r.n, "entry": r.entry, "record": rec, "problem": r.problem}
    if rec is None:
        return view
    rows = forest_rows(rec)
    view["forest"] = rows
    view["chart"] = _forest_chart(data, r, rows) if rows else None
    view["weighted"] = _weighted(rec.decision.time_weighted if rec.decision else None)
    view["transfer"] = transfer_of(rec)
    view["seconds"] = time_line(rec.seconds) if rec.seconds else None
    view["steps"] = {
        k: v for k, v in (rec.seconds or {}).items() if k not in (TOTAL_STEP, OVERLAP_STEP)
    }
    view["diff"] = data.diff(r.n)
    view["root_cause"] = rec.category.root_cause if rec.status.value == "ROLLED BACK" else ""
    return view


def _weighted(tw: Mapping[str, Any] | None) -> str | None:
    """A recorded time-weighted effect in words (None: not recorded or malformed)."""
    try:
        t = TimeWeighted(**tw) if tw else None
    except TypeError:
        return None
    if t is None:
        return None
    return f"{t.text()}, {t.level:.0%} CI; step {t.incumbent_ms:.4g} ms -> {t.candidate_ms:.4g} ms"


def _roofline_view(data: CampaignData) -> dict[str, Any] | None:
    r = roofline(data)
    if r is None:
        return None
    labels = [s["label"] for s in data.manifest.target_shapes]
    rows = roof_rows(r, labels)
    u = "GB/s" if r["memory"] else "TFLOPS"
    title = f"Roofline per target shape ({r['device']}, {r['dtype']}): achieved {u}"
    chart = _chart(
        "roofline",
        figures.roofline_figure(rows, u, title),
        f"{len(rows)} target shapes: achieved {u} of the baseline and of the incumbent "
        "against each shape's attainable roofline; the table below lists them.",
    )
    return {**r, "rows": rows, "unit": u, "chart": chart}


def campaign_context(data: CampaignData, *, refresh: int, generated: str) -> dict[str, Any]:
    """Everything the campaign template shows."""
    points = chain_points(data)
    steps, per = time_steps(data)
    moves = search_moves(data)
    charts = {
        "chain": _chart(
            "chain",
            figures.chain_figure(points),
            f"{len(points)} closed rounds: each round's candidate against the BASELINE "
            "through the paired A/Bs (with its round's CI), the incumbent as a step line, "
            "and the harness CSVs' ratio as a diagnostic; the table below lists them.",
        ),
        "time": _chart(
            "time",
            figures.time_figure(steps, per),
            f"seconds per step of {len(per)} rounds; each round's section lists them.",
        )
        if per
        else None,
        "search": _chart(
            "search",
            figures.search_figure(moves),
            f"{len(moves)} search moves: the knob value each tried and its outcome; the "
            "table below lists them.",
        )
        if moves
        else None,
    }
    rounds = [_round_view(data, r) for r in reversed(data.rounds)]
    return {
        "d": data,
        "m": data.manifest,
        "s": data.state,
        "unit": unit(data.manifest.campaign_type),
        "points": points,
        "charts": charts,
        "steps": steps,
        "per": per,
        "moves": moves,
        "rounds": rounds,
        "roof": _roofline_view(data),
        "headline": headline(data, points),
        "quantities": quantities(data),
        "accepted": sum(1 for p in points if p.status == "ACCEPTED"),
        "rolled_back": sum(1 for p in points if p.status == "ROLLED BACK"),
        "rehearsals": sum(1 for p in points if p.status == REHEARSAL),
        "refresh": refresh,
        "generated": generated,
        "plotly_js": plotly_js(),
    }


def render_campaign_html(data: CampaignData, *, refresh: int = 0, generated: str = "") -> str:
    """The campaign's page. ``refresh`` > 0: the page reloads itself every ``refresh`` seconds
    while the campaign runs (a finished campaign's page never reloads)."""
    ctx = campaign_context(data, refresh=refresh, generated=generated)
    return _env().get_template("campaign.html.j2").render(**ctx)


def render_index_html(rows: list[dict[str, Any]], *, generated: str = "") -> str:
    """The index of campaigns: one row per campaign (``name``, ``href``, ``data`` or
    ``problem``)."""
    return _env().get_template("index.html.j2").render(rows=rows, generated=generated)
