"""One process drives one campaign: an exclusive, non-blocking lock on ``<campaign>/.lock``.

The lock is an OS advisory lock (flock), so it is released when its process dies, kill -9
included: a crashed driver never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from kernel_ratchet.errors import LockError


class CampaignLock:
    """The exclusive lock on ``<campaign>/.lock``; ``acquire`` raises LockError, naming the
    holder, when another process drives the campaign."""

    def __init__(self, campaign_dir: Path) -> None:
        self.path = Path(campaign_dir) / ".lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
            os.close(fd)
            raise LockError(
                f"campaign {self.path.parent.name} is being driven by another process "
                f"({holder}); wait for it to finish, or stop it (Ctrl+C) and run the command again"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> CampaignLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
