"""How the harness times at each level of a round."""

from __future__ import annotations

from typing import Any

#: Samples per timing at the quick level. A quick round is decided by the paired A/B; its
#: harness checks correctness and writes the round's CSV, whose times are diagnostics, so it
#: takes as many samples as a paired request (two; a cold-L2 pair that disagrees gets a third
#: from the engine) and fewer than the full level (the BASELINE's record).
QUICK_SAMPLES = 2


def level_params(engine_params: dict[str, Any], level: str) -> dict[str, Any]:
    """The timing parameters the harness uses at ``level``: at most :data:`QUICK_SAMPLES`
    samples at the quick level, the campaign's own at the full level."""
    params = dict(engine_params)
    if level == "quick" and "samples" in params:
        params["samples"] = min(int(params["samples"]), QUICK_SAMPLES)
    return params
