"""Room on the device for a paired A/B request that ran out of memory beside the other side.

Both sides' workers share one device for the whole A/B; while one side checks or times, the
other keeps the device memory its allocator cached for its own last request. A request that
runs out of device memory there may be the pairing's fault rather than the side's own: the
A/B then asks every other live worker to give its cached memory back, starts the failed side's
worker again (any failure kills a worker) with the same spec and log, and makes the same
request once more, alone. A second failure stands and is judged as any failure is; either way
the A/B says what happened (``progress``, and each retried timing request has its own row in
``timings.jsonl``).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

#: A failed request's category that a retry with room may cure.
ROOM_FAILURES = frozenset({"oom"})


def make_room(workers: MutableMapping[str, Any], side: str, restart: Callable[[str], Any]) -> str:
    """Release every other live worker's cached memory and start ``side``'s worker again
    (``restart(side)`` returns the new one, stored in ``workers``); what was done, in words."""
    released = []
    for other, worker in workers.items():
        if other != side and getattr(worker, "alive", False) and hasattr(worker, "release"):
            res = worker.release()
            released.append(f"{other} {'released' if res.ok else 'could not release'}")
    workers[side] = restart(side)
    gave = f" ({', '.join(released)} its cached device memory)" if released else ""
    return f"{side}'s worker restarted{gave}"


def with_room(
    res: Any,
    side: str,
    workers: MutableMapping[str, Any],
    restart: Callable[[str], Any] | None,
    again: Callable[[], Any],
    say: Callable[[str], None] | None,
) -> Any:
    """``res``, unless ``side``'s request failed for want of device memory: then the result of
    ``again()`` (the same request, made after :func:`make_room`), the retry told to ``say``."""
    if res.ok or res.category not in ROOM_FAILURES or restart is None:
        return res
    made = make_room(workers, side, restart)
    res2 = again()
    outcome = "it passed" if res2.ok else f"it failed again ({res2.category})"
    why = res.detail.splitlines()[0][:160] if res.detail else res.category
    if say is not None:
        say(f"A/B: {side}'s request ran out of device memory ({why}); {made}; retried: {outcome}")
    return res2


def checks_with_room(
    done: dict[str, tuple[Any, float]],
    workers: MutableMapping[str, Any],
    restart: Callable[[str], Any] | None,
    shape: Any,
    seed: int,
    say: Callable[[str], None] | None,
) -> None:
    """Both sides' checks of ``shape`` (``done``: side -> (result, seconds), made at once):
    each that ran out of device memory made again alone with room (:func:`with_room`)."""
    for side, (res, secs) in list(done.items()):
        again = lambda s=side: workers[s].check(shape, seed)  # noqa: E731
        done[side] = (with_room(res, side, workers, restart, again, say), secs)
