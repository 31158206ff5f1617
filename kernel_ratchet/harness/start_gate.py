"""The harness's start gate: prepare beside the focused test, measure after it.

A round starts its harness as it starts the focused test, gated (``RATCHET_START_GATE`` names
a file, see :func:`kernel_ratchet.campaign.steps.start_step`): the harness imports torch, the
project and the adapter while the test runs, then waits for the file before it touches a shape,
so nothing it measures overlaps the test. Without the variable it starts at once.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

GATE_ENV = "RATCHET_START_GATE"
#: The process that will open the gate (the round's driver): when it is gone, nobody will.
DRIVER_ENV = "RATCHET_START_GATE_DRIVER"
#: How often the gate is looked at, and how long it is waited for at most.
POLL_S = 0.02
WAIT_LIMIT_S = 4 * 3600.0


def wait_for_start(limit_s: float = WAIT_LIMIT_S) -> bool:
    """Block until the gate named by ``RATCHET_START_GATE`` says "go" (True at once when no
    gate is set); False when it never did within ``limit_s``, or as soon as the driver that
    would open it (``RATCHET_START_GATE_DRIVER``) is gone, also when it died before this
    process reached its gate: a harness left waiting would hold its memory, and a GPU's,
    for hours."""
    gate = os.environ.get(GATE_ENV)
    if not gate:
        return True
    path, deadline = Path(gate), time.monotonic() + limit_s
    driver = int(os.environ.get(DRIVER_ENV) or 0)
    while time.monotonic() < deadline:
        try:
            if path.read_text().strip() == "go":
                return True
        except OSError:
            pass
        if driver and not _alive(driver):
            print(
                f"[harness] the round that started it is gone: {gate} will never open",
                file=sys.stderr,
            )
            return False
        time.sleep(POLL_S)
    print(f"[harness] start gate {gate} never opened in {limit_s:.0f} s", file=sys.stderr)
    return False


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
