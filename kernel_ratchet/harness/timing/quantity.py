"""What a campaign optimizes: the measured quantity and the L2 state of each call.

``ratchet.yaml`` states it (``measure: {quantity: ..., l2: ...}``, a project default and per op);
the campaign freezes it in its timing parameters, the ``cuda_events`` engine measures exactly
it on both sides of every paired A/B, and every decision names it.

* ``kernel_time``: the op's GPU time, from CUDA-graph replays of many calls (launch overhead
  amortised away). ``l2: warm`` replays the calls back to back (the L2 holds what the previous
  call left); ``l2: cold`` puts an L2 flush before every call inside the graph and subtracts
  the flushes' own time, measured by an identical graph of flushes in the same sample.
* ``step_time``: the eager calls' time back to back, launches included, as an eager training
  step runs them (CPU-bound launches count). The L2 is flushed before each batch, then every
  call sees what the previous one left, so only ``l2: warm`` is meaningful.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.errors import RatchetError

QUANTITIES: tuple[str, ...] = ("kernel_time", "step_time")
L2_STATES: tuple[str, ...] = ("cold", "warm")
MEASURE_KEYS: tuple[str, ...] = ("quantity", "l2")

_LABELS = {
    ("kernel_time", "cold"): "kernel GPU time, CUDA-graph replay, cold L2 (flushed per call)",
    ("kernel_time", "warm"): "kernel GPU time, CUDA-graph replay, warm L2",
    ("step_time", "warm"): "eager step time, back-to-back calls, launches included",
}


@dataclass(frozen=True)
class Measure:
    """The quantity a campaign measures and decides on."""

    quantity: str = "step_time"
    l2: str = "warm"

    def label(self) -> str:
        """One readable line naming the quantity (records and summaries use it)."""
        return _LABELS[(self.quantity, self.l2)]

    def to_dict(self) -> dict[str, str]:
        return {"quantity": self.quantity, "l2": self.l2}


#: The quantity of a profile that does not state one: what campaigns measured before it could.
DEFAULT = Measure()

#: What a CPU rehearsal measures (the host clock around batches; no graphs, no L2 control).
CPU_LABEL = "host wall time of back-to-back calls (CPU: the Triton interpreter, no GPU)"


def problems(raw: Any) -> list[tuple[str, str, str]]:
    """(key, problem, fix) for every problem of a raw ``measure`` mapping (empty: valid)."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        return [("", f"expected a mapping, got {type(raw).__name__}", _FIX_ALL)]
    out = [
        (f".{k}", "unknown key", f"remove it; allowed keys: {', '.join(MEASURE_KEYS)}")
        for k in raw
        if k not in MEASURE_KEYS
    ]
    for key, allowed in (("quantity", QUANTITIES), ("l2", L2_STATES)):
        if key in raw and raw[key] not in allowed:
            out.append((f".{key}", f"{raw[key]!r} is not allowed", f"use {' or '.join(allowed)}"))
    return out


_FIX_ALL = "write it as {quantity: kernel_time | step_time, l2: cold | warm}"


def resolve(raw: Mapping[str, Any] | None, default: Measure = DEFAULT) -> Measure:
    """The :class:`Measure` of a valid raw mapping over ``default`` (a project default under a
    per-op setting). ``step_time`` without an ``l2`` is warm; ``kernel_time`` without one
    takes the default's ``l2``. Raises ValueError (with its fix) for ``step_time`` + cold."""
    raw = raw or {}
    quantity = raw.get("quantity", default.quantity)
    implied = "warm" if quantity == "step_time" else default.l2
    l2 = raw.get("l2", implied)
    if (quantity, l2) not in _LABELS:
        raise ValueError(
            "step_time runs the calls back to back, as a step does, so each call finds the L2 "
            "the previous one left: only l2: warm is meaningful; for the GPU time of a call "
            "with a cold L2 use quantity: kernel_time"
        )
    return Measure(quantity, l2)


def engine_measure(q: str | None, l2: str | None) -> Measure | None:
    """The :class:`Measure` the engine's ``quantity``/``l2`` parameters ask for
    (None: neither given, the ``graph`` parameter decides). Raises RatchetError for bad ones."""
    if q is None and l2 is None:
        return None
    if q not in QUANTITIES:
        raise RatchetError(f"cuda_events quantity must be one of {QUANTITIES}, not {q!r}")
    if l2 is not None and l2 not in L2_STATES:
        raise RatchetError(f"cuda_events l2 must be one of {L2_STATES}, not {l2!r}")
    try:
        return resolve({"quantity": q, **({"l2": l2} if l2 else {})})
    except ValueError as exc:
        raise RatchetError(f"cuda_events: {exc}") from None


def of_params(engine: str, params: Mapping[str, Any]) -> str:
    """The label of what an engine with these parameters measures (for records)."""
    if engine != "cuda_events":
        return CPU_LABEL
    if "quantity" in params:
        return Measure(params["quantity"], params.get("l2", "warm")).label()
    graph = params.get("graph", "auto")
    if graph == "off":
        return _LABELS[("step_time", "warm")]
    return f"cuda_events graph={graph} (graphs for short ops, eager otherwise)"
