"""Which of a timed call's outputs a spot check compares with which output of the reference."""

from __future__ import annotations

from typing import Any


def match_outputs(
    outs: list[tuple[str, Any]],
    ref: dict[str, Any],
    phase: str,
    returned: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """Map the timed call's outputs to reference names: by the adapter's ``returned`` names
    (:meth:`~kernel_ratchet.harness.adapter.Adapter.returned_names`) when it gives them, else
    by name, ``out`` for a single forward tensor, or in order of the non-``out`` names for a
    backward tuple; {} when they cannot be matched."""
    if returned is not None and len(returned) == len(outs) and all(n in ref for n in returned):
        return {n: t for n, (_, t) in zip(returned, outs, strict=True)}
    names = [n for n, _ in outs]
    if all(n in ref for n in names):
        return dict(outs)
    if phase == "fwd" and len(outs) == 1:
        key = "out" if "out" in ref else (next(iter(ref)) if len(ref) == 1 else None)
        return {key: outs[0][1]} if key else {}
    order = [n for n in ref if n != "out"] if phase == "bwd" else list(ref)
    if len(order) == len(outs):
        return {n: t for n, (_, t) in zip(order, outs, strict=True)}
    return {}


def checked_outputs(
    adapter: Any, case: Any, outs: list[tuple[str, Any]], ref: dict[str, Any], phase: str
) -> dict[str, Any]:
    """A timed call's outputs by reference name (:func:`match_outputs` with the adapter's
    ``returned_names``), each cut to the part the adapter's ``outputs`` checks
    (:meth:`~kernel_ratchet.harness.adapter.Adapter.checked_part`)."""
    pairs = match_outputs(outs, ref, phase, adapter.returned_names(phase))
    return {n: adapter.checked_part(n, t, case) for n, t in pairs.items()}
