"""The worker's answer channel: one pipe from the worker's fixed descriptor to the driver.

A candidate runs inside the worker and could point that descriptor at a pipe of its own,
with a thread that relays each answer after rewriting its numbers: every Python object the
Sentinel keeps stays as it was. So the worker answers on :data:`PROTO_FD` and ends itself
(status :data:`CHANNEL_REPLACED`) when the descriptor no longer leads to the file it led to
at start, and the driver checks after every answer that the worker's descriptor leads to its
own pipe (:func:`replaced`), which no code of the worker can answer for.
"""

from __future__ import annotations

import os

#: The descriptor the worker's answers go out on.
PROTO_FD = 100
#: Exit status of a worker that found its channel replaced.
CHANNEL_REPLACED = 86


def replaced(pid: int, read_fd: int) -> str:
    """Why process ``pid``'s :data:`PROTO_FD` no longer leads to the pipe this process reads
    on ``read_fd``, or "" (also where ``/proc`` cannot tell)."""
    ours = f"pipe:[{os.fstat(read_fd).st_ino}]"
    try:
        theirs = os.readlink(f"/proc/{pid}/fd/{PROTO_FD}")
    except OSError:
        return ""
    if theirs == ours:
        return ""
    return (
        f"the worker's protocol channel (descriptor {PROTO_FD}) leads to {theirs}, not to the "
        "tool's pipe: a relay inside the worker can rewrite its answers"
    )
