"""How the GPU tests share one GPU between pytest-xdist workers.

Each worker is its own process with its own CUDA caching allocator: memory a test freed stays
reserved by that worker until ``torch.cuda.empty_cache()``, so a worker that ran a large
case starves the others of memory they would fit in. Under several workers every GPU test
therefore hands its cached blocks back when it ends, and holds a lock on a file the workers
share: shared for an ordinary GPU test, exclusive for one marked ``gpu_memory`` (a case that
needs most of the GPU's memory) or ``gpu_alone`` (one that times the GPU), which then runs
while no other GPU test does.

A failed test keeps its frames alive: pytest stores the exception in ``sys.last_value`` (for
post-mortem debugging), and with it every tensor the test's frames held, tens of GB for a
large layer, until the worker's next failure. Every test after it, on any worker, then finds
the GPU's memory taken; :func:`release_failed_frames` lets those tensors go.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path


def lock_path(run_id: str) -> Path:
    """The lock file of one test run (every worker of the run gets the same ``run_id``)."""
    return Path(tempfile.gettempdir()) / f"kernel-ratchet-gpu-{run_id}.lock"


@contextlib.contextmanager
def gpu_turn(path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold ``path`` locked (``flock``: shared or exclusive) for the duration; blocks until
    the lock is free. An exclusive holder waits for every shared one and the reverse."""
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_released: list[BaseException | None] = [None]  # the last failure released (kept, frames cleared)


def release_failed_frames() -> bool:
    """Clear the locals of the frames of the last failed test's exception (pytest keeps it in
    ``sys.last_value``/``sys.last_exc``, its report already written), and of the exceptions
    it was raised from, so what they held is freed; the exception itself stays for a
    debugger, without its locals. True when that failure was not released before (worth a
    garbage collection)."""
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if last is None or last is _released[0]:
        return False
    _released[0] = last
    seen: set[int] = set()
    exc: BaseException | None = last
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
    return True
