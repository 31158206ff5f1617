"""One run's budget and interruptions: ``--max-duration`` parsing, the rule that starts a round
only when the time left holds a typical one, and the first and second Ctrl+C."""

from __future__ import annotations

import contextlib
import math
import re
import signal
import statistics
import threading
from collections.abc import Callable, Iterator

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.errors import CampaignError

Say = Callable[[str], None]


@contextlib.contextmanager
def graceful_interrupt(stop_flag: threading.Event, say: Say) -> Iterator[None]:
    """First SIGINT sets ``stop_flag`` (finish the round, then REPORT); the second raises
    KeyboardInterrupt. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        if stop_flag.is_set():
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        stop_flag.set()
        say("Ctrl+C: finishing the current round, then the REPORT (Ctrl+C again: stop now)")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def too_short(left_s: float, took_s: list[float]) -> str | None:
    """Why the time left cannot hold another round, or None: a round is started only when the
    time left is at least the median of this run's rounds so far (the first always starts).
    Stopping between rounds keeps a ``--max-duration`` run from being cut inside one (a cut
    round is closed as interrupted and its measurement is lost)."""
    if not took_s or math.isinf(left_s):
        return None
    typical = statistics.median(took_s)
    if left_s >= typical:
        return None
    return f"has {left_s:.0f} s left, less than a typical round of this run ({typical:.0f} s)"


def parse_duration(text: str | None) -> float | None:
    """Seconds of ``"2h"``, ``"90m"``, ``"1h30m"``, ``"45s"`` or a bare number of seconds.
    Raises CampaignError for anything else."""
    if not text:
        return None
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", t)
    if not parts or "".join(a + b for a, b in parts) != t:
        raise CampaignError(f"--max-duration {text!r}: use e.g. 2h, 90m, 1h30m or 45s")
    return sum(float(a) * {"h": 3600, "m": 60, "s": 1}[b] for a, b in parts)


#: Rounds in a row whose incumbent could not be measured before a run pauses.
INCUMBENT_FAILURES_TO_PAUSE = 2


def incumbent_unmeasurable(rounds: list[RoundRecord]) -> str | None:
    """Why a run pauses when the incumbent itself failed the last rounds' paired measurement
    (no candidate can be decided until that is fixed), else None."""
    last = rounds[-INCUMBENT_FAILURES_TO_PAUSE:]
    if len(last) < INCUMBENT_FAILURES_TO_PAUSE or any(
        r.category is not Category.INCUMBENT for r in last
    ):
        return None
    return (
        f"the incumbent failed its paired measurement in {len(last)} rounds in a row "
        f"(round-{last[-1].round}: {last[-1].reason}); no candidate can be decided until it "
        "measures: fix the cause, then `ratchet resume`"
    )
