"""The worker's answer channel: one pipe from the worker's fixed descriptor to the driver.

A candidate runs inside the worker and could point that descriptor at a pipe of its own,
with a thread that relays each answer after rewriting its numbers: every Python object the
Sentinel keeps stays as it was. So the worker answers on :data:`PROTO_FD` and ends itself
(status :data:`CHANNEL_REPLACED`) when the descriptor no longer leads to the file it led to
at start, and the driver checks after every answer that the worker's descriptor leads to its
own pipe (:func:`replaced`), which no code of the worker can answer for. The same relay on
the request side (stdin) could shrink the problem a timing request names: every answer
carries the digest of the request line the worker read (:func:`digest`), and the driver
compares it with the line it sent (:func:`tampered`).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

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


def digest(line: str) -> str:
    """The digest of one protocol line as written (its newline included)."""
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


def tampered(pid: int, read_fd: int, answer: dict[str, Any], sent: str) -> str:
    """Why the answer of process ``pid`` cannot be trusted (its answer channel replaced, or
    it answered another request than the line whose digest is ``sent``), or ""."""
    if why := replaced(pid, read_fd):
        return why
    if answer.get("request") != sent:
        return (
            "the worker answered another request than the tool sent (the digest of the line "
            "it read differs): a relay on its input can rewrite requests"
        )
    return ""
