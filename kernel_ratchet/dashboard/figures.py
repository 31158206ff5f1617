"""The dashboard's charts as Plotly figures (the optional ``dashboard`` extra).

Each function turns one series of :mod:`.series` into a ``plotly.graph_objects.Figure``; the
page embeds its JSON and plotly.js draws it. Outcomes differ by marker symbol and by text, not
by colour alone (accepted: filled circle, rolled back: x, baseline: diamond), and the bars of
the baseline and the incumbent differ by fill pattern.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from kernel_ratchet.dashboard.series import ChainPoint, ForestRow, RoofRow, SearchMove

#: Marker symbol and colour per round status (the symbol alone tells them apart).
STYLE = {
    "BASELINE": ("diamond", "#555555"),
    "ACCEPTED": ("circle", "#1a7f37"),
    "ROLLED BACK": ("x", "#cf222e"),
    "REHEARSAL": ("square-open", "#9a6700"),
}
#: A trace's name per round status (a rehearsal's timings never count).
NAMES = {"REHEARSAL": "REHEARSAL (interpreter timings, never counts)"}
#: The incumbent's chain (a step line) and the harness CSVs' diagnostic series.
INCUMBENT_LINE = {
    "mode": "lines",
    "line": {"shape": "hv", "color": "#1a7f37", "width": 2},
    "name": "incumbent (paired chain)",
    "hoverinfo": "skip",
}
HARNESS_LINE = {
    "mode": "markers+lines",
    "line": {"dash": "dot", "color": "#8250df", "width": 1},
    "marker": {"symbol": "triangle-up-open", "size": 8, "color": "#8250df"},
    "name": "harness CSV vs baseline (single runs, diagnostic)",
    "hovertemplate": "round-%{x} harness %{y:.4f}<extra></extra>",
}
#: Axes and background of every chart. No named template: a template is copied into each
#: figure's JSON, and a page holds one figure per round.
_AXIS = {"showline": True, "linecolor": "#444444", "ticks": "outside", "gridcolor": "#e5e5e5"}
_LAYOUT = {
    "template": "none",
    "plot_bgcolor": "#ffffff",
    "paper_bgcolor": "#ffffff",
    "autosize": True,
    "height": 380,
    "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
    "legend": {"orientation": "h", "y": -0.2},
    "font": {"size": 13},
}


def _fig(title: str, **layout: Any) -> go.Figure:
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {**_AXIS, **layout.get(axis, {})}
    return go.Figure(layout={"title": {"text": title, "x": 0}, **_LAYOUT, **layout})


def _err(vals: Sequence[float | None], lo: Sequence[float | None], hi: Sequence[float | None]):
    """Asymmetric error bars from intervals (0 where a side has none)."""
    plus, minus = [], []
    for v, low, high in zip(vals, lo, hi, strict=True):
        plus.append(high - v if high is not None and v is not None else 0.0)
        minus.append(v - low if low is not None and v is not None else 0.0)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def _markers(symbol: str, color: str, size: int, **kw: Any) -> go.Scatter:
    """A markers-only trace (the symbol tells the series apart without colour)."""
    return go.Scatter(mode="markers", marker={"symbol": symbol, "size": size, "color": color}, **kw)


def _series(points: Sequence[ChainPoint], attr: str, **kw: Any) -> go.Scatter:
    """The rounds' ``attr`` (where recorded) as one trace over the round number."""
    sel = [p for p in points if getattr(p, attr) is not None]
    return go.Scatter(x=[p.round for p in sel], y=[getattr(p, attr) for p in sel], **kw)


def chain_figure(points: Sequence[ChainPoint]) -> go.Figure:
    """The paired chain against the BASELINE per round, one trace per outcome (marker symbol),
    the incumbent as a step line and the harness CSVs' ratio as a labelled diagnostic."""
    fig = _fig(
        "Speed vs the BASELINE over rounds (paired chain, 1.0 = baseline)",
        xaxis={"title": {"text": "round"}, "dtick": 1 if len(points) <= 30 else None},
        yaxis={"title": {"text": "speed ratio vs baseline"}},
    )
    fig.add_trace(_series(points, "incumbent", **INCUMBENT_LINE))
    for status, (symbol, color) in STYLE.items():
        pts = [p for p in points if p.status == status and p.ratio is not None]
        if not pts:
            continue
        ys = [p.ratio for p in pts]
        fig.add_trace(
            _markers(
                symbol,
                color,
                10,
                x=[p.round for p in pts],
                y=ys,
                name=NAMES.get(status, f"{status} (paired A/B, CI)"),
                error_y=_err(ys, [p.lo for p in pts], [p.hi for p in pts]),
                text=[f"round-{p.round} {p.label} ({p.category}): {p.hypothesis}" for p in pts],
                hovertemplate="%{text}<br>ratio %{y:.4f}<extra></extra>",
            )
        )
    fig.add_trace(_series(points, "harness", **HARNESS_LINE))
    return fig


def forest_figure(n: int, rows: Sequence[ForestRow]) -> go.Figure:
    """Round ``n``'s per-shape speed ratios with their intervals, then its aggregates."""
    fig = _fig(
        f"round-{n}: candidate vs incumbent per shape (1.0 = no change)",
        height=max(220, 60 + 34 * len(rows)),
        xaxis={"title": {"text": "speed ratio (candidate / incumbent)"}},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
        shapes=[
            {
                "type": "line",
                "x0": 1,
                "x1": 1,
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "line": {"dash": "dash", "color": "#888888"},
            }
        ],
    )
    kinds = {
        "shape": ("circle", "#0969da", "shape (interval)"),
        "unresolved": ("circle-open", "#0969da", "shape, unresolved (interval wider than effect)"),
        "aggregate": ("diamond-wide", "#000000", "geomean of shapes (interval)"),
        "weighted": ("hourglass", "#000000", "time-weighted step (interval)"),
        "harness": ("square-open", "#8250df", "harness only (diagnostic, no CI)"),
    }
    traces = []
    for kind, (symbol, color, name) in kinds.items():
        sel = [r for r in rows if r.kind == kind]
        if not sel:
            continue
        xs = [r.ratio for r in sel]
        traces.append(
            _markers(
                symbol,
                color,
                11,
                x=xs,
                y=[r.label for r in sel],
                name=name,
                error_x=_err(xs, [r.lo for r in sel], [r.hi for r in sel]),
                text=[r.verdict for r in sel],
                hovertemplate="%{y}: %{x:.4f} (%{text})<extra></extra>",
            )
        )
    fig.add_traces(traces)
    return fig


def time_figure(steps: Sequence[str], per: dict[int, dict[str, float]]) -> go.Figure:
    """Wall time per round, stacked by step (one bar pattern per step)."""
    fig = _fig(
        "Where each round's wall time went",
        barmode="stack",
        xaxis={"title": {"text": "round"}},
        yaxis={"title": {"text": "seconds"}},
    )
    patterns = ["", "/", "\\", "x", ".", "+", "-", "|"]
    rounds = sorted(per)
    for i, step in enumerate(steps):
        have = [n for n in rounds if step in per[n]]
        fig.add_trace(
            go.Bar(
                x=have,
                y=[per[n][step] for n in have],
                name=step,
                marker={"pattern": {"shape": patterns[i % len(patterns)]}},
            )
        )
    return fig


def roofline_figure(rows: Sequence[RoofRow], unit: str, title: str) -> go.Figure:
    """Achieved throughput per target shape, baseline against incumbent, with each shape's
    attainable roofline from the measured ceilings."""
    fig = _fig(
        title,
        barmode="group",
        xaxis={"title": {"text": "target shape"}, "type": "category", "automargin": True},
        yaxis={"title": {"text": unit}, "type": "log"},
    )
    for side, pattern in (("baseline", "/"), ("incumbent", "")):
        sel = [r for r in rows if getattr(r, side) is not None]
        fig.add_trace(
            go.Bar(
                x=[r.label for r in sel],
                y=[getattr(r, side) for r in sel],
                name=f"{side} achieved",
                marker={"pattern": {"shape": pattern}},
            )
        )
    roof = [r for r in rows if r.roof is not None]
    fig.add_trace(
        go.Scatter(
            x=[r.label for r in roof],
            y=[r.roof for r in roof],
            mode="markers",
            marker={"symbol": "line-ew-open", "size": 28, "line": {"width": 3}},
            name="roofline (measured ceilings)",
            text=[r.bound for r in roof],
            hovertemplate="%{x}: roofline %{y:.4g} (%{text}-bound)<extra></extra>",
        )
    )
    return fig


def search_figure(moves: Sequence[SearchMove]) -> go.Figure:
    """The search space explored: each knob value tried, where, and its outcome."""
    fig = _fig(
        "Search moves: knob values tried",
        xaxis={"title": {"text": "value tried"}, "type": "category"},
        yaxis={"type": "category", "automargin": True},
        height=max(260, 80 + 30 * len({(m.entry, m.knob) for m in moves})),
    )
    for status, (symbol, color) in STYLE.items():
        sel = [m for m in moves if m.status == status]
        if not sel:
            continue
        fig.add_trace(
            _markers(
                symbol,
                color,
                12,
                x=[m.value for m in sel],
                y=[f"{m.entry}: {m.knob}" for m in sel],
                name=NAMES.get(status, status),
                text=[f"round-{m.round} ({m.category})" for m in sel],
                hovertemplate="%{y} = %{x}: %{text}<extra></extra>",
            )
        )
    return fig
