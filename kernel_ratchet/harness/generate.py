"""Render the campaign's ``quick_test_bench.py`` from its template.

``path`` is where the file will live (relative paths are taken relative to ``project_root``);
the generated file finds the project root relative to itself, so a moved checkout works.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jinja2

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("kernel_ratchet.harness", "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
# Values are written as Python literals (repr), so the generated file is plain Python.
_ENV.filters["py"] = repr


def render_quick_bench(
    *,
    campaign: str,
    op: str,
    backend: str,
    path: str,
    project_root: str,
    adapter: str,
    schema: str,
    engine: str,
    engine_params: dict[str, Any],
    seed: int,
    shapes: Sequence[dict],
    target_shapes: Sequence[dict],
    quick_params: dict[str, Any] | None = None,
) -> str:
    return _ENV.get_template("quick_test_bench.py.j2").render(
        campaign=campaign,
        op=op,
        backend=backend,
        path=path,
        root_from_here=os.path.relpath(
            project_root, os.path.dirname(os.path.join(project_root, path))
        ),
        adapter=adapter,
        schema=schema,
        engine=engine,
        engine_params=engine_params,
        seed=seed,
        shapes=list(shapes),
        target_shapes=list(target_shapes),
        quick_params=dict(quick_params or {}),
    )
