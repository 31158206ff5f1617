"""How each shape of a paired A/B is timed: CUDA-graph replays or eager calls, the same on both
sides.

The first timing of a shape and phase fixes the engine's mode for every later request of both
sides (:data:`GRAPH_SWITCH`): with ``graph: auto`` an engine chooses per request by the op's
device time, and an op at its threshold would be timed as a graph in one request and as eager
calls in the next. A first timing whose capture failed fixes nothing. Sides timed in different
modes all the same (a capture that fails on one side only) fail the side that fell back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: An engine's timing mode -> the ``graph`` every later request of that shape and phase asks for.
GRAPH_SWITCH = {"graph": "on", "eager": "off"}


@dataclass
class Modes:
    """The modes seen per (label, phase) and side, and the mode each (label, phase) is fixed to."""

    seen: dict[tuple[str, str], dict[str, tuple[Any, Any]]] = field(default_factory=dict)
    pinned: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def request(self, label: str, phase: str) -> dict[str, str]:
        """The keyword arguments of a ``time`` request of ``label``'s ``phase``."""
        return self.pinned.get((label, phase), {})

    def mismatch(self, label: str, phase: str, side: str, eng: Any) -> tuple[str, str] | None:
        """Record ``side``'s timing (its engine details ``eng``); where the two sides were timed
        differently, (the side that fell back, why the A/B fails), else None."""
        eng = eng if isinstance(eng, dict) else {}
        seen = self.seen.setdefault((label, phase), {})
        seen[side] = (eng.get("mode"), eng.get("fallback"))
        if eng.get("mode") in GRAPH_SWITCH and not eng.get("fallback"):
            self.pinned.setdefault((label, phase), {"graph": GRAPH_SWITCH[eng["mode"]]})
        if len(seen) < 2 or len({m for m, _ in seen.values()}) == 1:
            return None
        odd = next((s for s, (_, fb) in seen.items() if fb), "candidate")
        other = next(s for s in seen if s != odd)
        return odd, (
            f"timed as {seen[odd][0]} ({seen[odd][1] or 'no reason given'}) while the other "
            f"side was timed as {seen[other][0]}: the A/B must measure the same quantity on "
            "both sides"
        )
