"""Which threads left by a call are the candidate's work: an idle thread pool is not."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from kernel_ratchet.harness.sentinel import _idle_pool_worker


def _workers(pool: ThreadPoolExecutor) -> list[threading.Thread]:
    return list(pool._threads)


def test_a_pool_is_idle_only_when_every_worker_waits_and_nothing_is_queued():
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=2) as pool:
        busy = pool.submit(release.wait)
        queued = [pool.submit(release.wait) for _ in range(2)]
        assert not any(_idle_pool_worker(t) for t in _workers(pool))
        release.set()
        busy.result(timeout=10)
        for f in queued:
            f.result(timeout=10)
        # the workers release their idle slot right after each item: wait for them to settle
        for _ in range(200):
            if all(_idle_pool_worker(t) for t in _workers(pool)):
                break
            threading.Event().wait(0.01)
        assert all(_idle_pool_worker(t) for t in _workers(pool))


def test_a_plain_thread_is_never_an_idle_pool_worker():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert not _idle_pool_worker(t)
    finally:
        stop.set()
        t.join(timeout=10)


FORKED = """
import os, sys
import numpy as np
from kernel_ratchet.harness import process_guard
pid = os.fork()  # a worker forked from the zygote: numpy's BLAS threads are not copied
if pid == 0:
    if sys.argv[1] == "warm":
        process_guard.warm_torch()
    state = process_guard.ProcessState.capture()
    a = np.ones((512, 512), dtype=np.float32)
    (a @ a).sum()  # what Triton's interpreter does for a tl.dot of a 128-wide tile
    os._exit(10 + len(state.new_os_threads()))
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_numpys_blas_threads_are_started_before_the_baseline_of_a_forked_worker():
    """Without the warm-up a forked worker's first large numpy product starts a BLAS thread
    after the baseline (where the machine has two cores or more), taken for the candidate's."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    env.pop("OPENBLAS_NUM_THREADS", None)
    warm = subprocess.run([sys.executable, "-c", FORKED, "warm"], env=env, timeout=120)
    assert warm.returncode == 10  # no thread the baseline lacks
    cold = subprocess.run([sys.executable, "-c", FORKED, "cold"], env=env, timeout=120)
    # the premise: the pool starts lazily after a fork, one thread per core but the caller's
    # (15 on 16 cores), none on one core
    assert cold.returncode >= 10 and (cold.returncode > 10) == ((os.cpu_count() or 1) > 1)
