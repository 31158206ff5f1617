"""Small optional fields of an ``ops.<name>`` entry, each checked with a fix to print."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kernel_ratchet.profile.problems import Problems, short, show


def weights(raw: Any, dotted: str, problems: Problems) -> dict[str, float]:
    """``weights``: shape label -> positive number (how often a step runs that shape)."""
    if raw is None:
        return {}
    fix = f"write {dotted} as a mapping of shape label to a positive number, e.g. {{m4096: 2}}"
    if not isinstance(raw, Mapping):
        problems.add(dotted, f"expected a mapping, got {show(raw)}", fix)
        return {}
    out = {}
    for label, w in raw.items():
        key = f"{dotted}.{short(str(label))}"
        ok = isinstance(w, (int, float)) and not isinstance(w, bool) and 0 < w < math.inf
        if not isinstance(label, str) or not label.strip():
            problems.add(key, f"shape label {show(label)} is not a non-empty string", fix)
        elif not ok:
            problems.add(key, f"weight {show(w)} is not a positive finite number", fix)
        else:
            out[label.strip()] = float(w)
    return out


def flag(raw: Any, dotted: str, problems: Problems, default: bool = False) -> bool:
    """An optional ``true`` / ``false`` (absent: ``default``)."""
    if raw is None:
        return default
    if not isinstance(raw, bool):
        fix = f"write {dotted}: {'false' if default else 'true'}"
        problems.add(dotted, f"expected true or false, got {show(raw)}", fix)
        return default
    return raw
