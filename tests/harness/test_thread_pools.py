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
