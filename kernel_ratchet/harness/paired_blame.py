"""Whose failure a failed timing request of the candidate is.

A crash or an out-of-memory error in the candidate's timing request can come from the harness,
the adapter or the machine as well as from the candidate. Before the candidate is blamed, the
incumbent makes the same request (same shape, seed and phase): failing it the same way, the
failure is both sides' (side ``both``: the round is the infrastructure's, not the
candidate's); otherwise the candidate's, and its detail says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel_ratchet.harness.paired_run import Failure

#: Failures of a candidate's timing request that the harness, the adapter or the machine can
#: cause too. Never a cheat, a wrong or NaN result, a hang or a bad timing: those stay the
#: candidate's.
SHARED_FAILURES = frozenset({"crash", "oom"})


def blame(
    incumbent: Any,
    logs: Mapping[str, str],
    r: int,
    label: str,
    phase: str,
    cat: str,
    detail: str,
) -> Failure:
    """The failure of the candidate's request (category ``cat``, ``detail``) given the result
    of the incumbent's same request."""
    if not incumbent.ok and incumbent.category == cat:
        both = (
            f"both sides failed the same timing request: candidate: {detail}; incumbent: "
            f"{incumbent.detail}; the harness, the adapter or the machine, not the candidate"
        )
        paths = f"{logs['candidate']}, {logs['incumbent']}"
        return Failure("both", "time", label, cat, both, paths, r, phase)
    said = "passed" if incumbent.ok else f"failed otherwise ({incumbent.category})"
    detail += f" (the incumbent's same request {said})"
    return Failure("candidate", "time", label, cat, detail, logs["candidate"], r, phase)
