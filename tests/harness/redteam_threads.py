"""Red-team candidates that leave threads running past the call: a Python thread, a busy
pool, torch's native pool grown, a thread under a debugger's name or one that says it is
dead. Imported through :mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import threading
import time
from typing import Any

import torch

from tests.harness.redteam_base import Case, TinyGemm, matmul_nt


class BackgroundThread(TinyGemm):
    """Starts a background thread (work off the timed path) and leaves it running."""

    def __init__(self) -> None:
        self.started = False

    def forward(self, case: Case) -> torch.Tensor:
        if not self.started:
            self.started = True
            threading.Thread(target=time.sleep, args=(60,), name="prefetch", daemon=True).start()
        return matmul_nt(case.a, case.b)


class NativePool(TinyGemm):
    """Grows torch's native thread pool on its first call: OS threads the call leaves."""

    def forward(self, case: Case) -> torch.Tensor:
        grow_native_pool()
        return matmul_nt(case.a, case.b)


def grow_native_pool() -> None:
    """Start native (non-Python) threads, as a library's OpenMP pool does when it grows."""
    if not getattr(grow_native_pool, "done", False):
        grow_native_pool.done = True  # type: ignore[attr-defined]
        n = torch.get_num_threads()
        torch.set_num_threads(n + 2)
        torch.ones(1 << 20).add_(1.0)
        torch.set_num_threads(n)  # the threads stay, idle in the pool


class BusyPool(TinyGemm):
    """Hands work to a thread pool that is still busy when the call returns."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=1)

    def forward(self, case: Case) -> torch.Tensor:
        self.pool.submit(time.sleep, 60)
        return matmul_nt(case.a, case.b)


class DebuggerNamedThread(TinyGemm):
    """Leaves a thread running under a debugger's thread name."""

    def forward(self, case: Case) -> torch.Tensor:
        if not hasattr(self, "thread"):
            self.thread = threading.Thread(
                target=time.sleep, args=(60,), name="pydevd.Reader", daemon=True
            )
            self.thread.start()
        return matmul_nt(case.a, case.b)


class _SaysItIsDead(threading.Thread):
    def is_alive(self) -> bool:
        return False


class HiddenThread(TinyGemm):
    """A thread whose class says it is not alive fills the outputs off the timed path."""

    def forward(self, case: Case) -> torch.Tensor:
        if not hasattr(self, "thread"):
            self.jobs: Any = __import__("queue").SimpleQueue()
            self.thread = _SaysItIsDead(target=self._serve, daemon=True)
            self.thread.start()
        out = torch.zeros(case.a.shape[0], case.b.shape[0])
        self.jobs.put((case.a, case.b, out))
        return out

    def _serve(self) -> None:
        while True:
            a, b, out = self.jobs.get()
            out.copy_((a[:, None, :].double() * b[None].double()).sum(-1))
