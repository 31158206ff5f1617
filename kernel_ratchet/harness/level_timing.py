"""How the harness times at each level of a round."""

from __future__ import annotations

from typing import Any

#: Samples per timing at the quick level. A quick round is decided by the paired A/B; its
#: harness checks correctness and writes the round's CSV, whose times are diagnostics, so it
#: takes as many samples as a paired request (two; a cold-L2 pair that disagrees gets a third
#: from the engine) and fewer than the full level (the BASELINE's record).
QUICK_SAMPLES = 2
#: A memory-bound op's GPU timing in a paired request and in a quick harness: 20 ms samples after
#: a 10 ms warm-up settled on 2 clock reads within 30 MHz (H200, bf16 RMS norm, cold L2: A/A
#: per-shape CI half-widths 0.03-0.40%, against 0.02-0.32% at 50 ms and the default warm-up,
#: in half the time).
MEMORY_TIMING = {"sample_ms": 20.0, "warmup_ms": 10.0, "settle_window": 2, "settle_tol_mhz": 30.0}


def quick_timing(engine_params: dict[str, Any], campaign_type: str) -> dict[str, Any]:
    """What a quick harness changes in the campaign's timing: a memory-bound campaign's GPU
    samples and warm-up are a paired request's (:data:`MEMORY_TIMING`); nothing else."""
    if campaign_type == "memory" and "sample_ms" in engine_params:
        return dict(MEMORY_TIMING)
    return {}


def level_params(
    engine_params: dict[str, Any], level: str, quick: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The timing parameters the harness uses at ``level``: at the quick level at most
    :data:`QUICK_SAMPLES` samples, and ``quick`` (:func:`quick_timing`) over the campaign's
    own; those at the full level."""
    params = dict(engine_params)
    if level == "quick":
        params.update(quick or {})
        if "samples" in params:
            params["samples"] = min(int(params["samples"]), QUICK_SAMPLES)
    return params
