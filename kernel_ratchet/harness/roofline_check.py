"""The roofline check of a timed call: no measured rate may beat the machine's bound.

A rate above the caller's measured peak (TFLOPS or GB/s) means work was skipped or left
outside the timer; the worker applies it to every timing request (:mod:`.worker_main`).
"""

from __future__ import annotations

from kernel_ratchet.harness.anticheat import CheatDetected


def check_roofline(
    work: float, median_ms: float, limit: float | None, unit: str, scale: float
) -> None:
    """Raise CheatDetected when ``work / time`` exceeds ``limit`` (in ``unit``, e.g. TFLOPS).

    ``scale`` converts work/second to the unit (1e12 for TFLOPS, 1e9 for GB/s). No limit, no
    work or a non-positive time skip the check.
    """
    if limit is None or work <= 0 or not median_ms > 0:
        return
    rate = work / (median_ms * 1e-3) / scale
    if rate > limit:
        raise CheatDetected(
            f"measured {rate:.3g} {unit} exceeds the machine's bound of {limit:.3g} {unit}; "
            "a time faster than the roofline means work was skipped or not timed"
        )
