"""How the GPU tests share one GPU between pytest-xdist workers.

Each worker is its own process with its own CUDA caching allocator: memory a test freed stays
reserved by that worker until ``torch.cuda.empty_cache()``, so a worker that ran a large
case starves the others of memory they would fit in. Under several workers every GPU test
therefore hands its cached blocks back when it ends, and holds a lock on a file the workers
share: shared for an ordinary GPU test, exclusive for one marked ``gpu_memory`` (a case that
needs most of the GPU's memory), which then runs while no other GPU test does.
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
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
