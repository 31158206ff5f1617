"""``measure`` in ``ratchet.yaml``: what a campaign optimizes, a project default and per op.

The values and their meaning are :mod:`kernel_ratchet.harness.timing.quantity`'s; this module
only reads them into the profile, every problem one line with its fix.
"""

from __future__ import annotations

from typing import Any

from kernel_ratchet.harness.timing import quantity
from kernel_ratchet.profile.problems import Problems, show


def parse_measure(
    raw: Any, dotted: str, default: quantity.Measure, problems: Problems
) -> quantity.Measure:
    """The :class:`~kernel_ratchet.harness.timing.quantity.Measure` of ``raw`` over
    ``default`` (absent: ``default``); problems are recorded, ``default`` returned then."""
    found = quantity.problems(raw)
    for key, problem, fix in found:
        problems.add(dotted + key, problem, fix)
    if found:
        return default
    try:
        return quantity.resolve(raw, default)
    except ValueError as exc:
        problems.add(dotted, f"{show(dict(raw or {}))} is not a measurable quantity", str(exc))
        return default
