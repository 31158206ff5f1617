"""The GPU tests' turns under pytest-xdist (:mod:`tests.gpu_share`), on any machine: the lock
is a file lock, so its rules hold without a GPU."""

from __future__ import annotations

import fcntl

import pytest

from tests.gpu_share import gpu_turn, lock_path, release_failed_frames


def _free(path, exclusive: bool) -> bool:
    """Whether another holder could take ``path`` now (a second open file, not blocking)."""
    with open(path, "a+b") as f:
        try:
            fcntl.flock(f, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_ordinary_gpu_tests_share_and_a_memory_test_waits_for_them(tmp_path):
    path = tmp_path / "gpu.lock"
    with gpu_turn(path, exclusive=False):
        assert _free(path, exclusive=False)  # another worker's ordinary GPU test runs too
        assert not _free(path, exclusive=True)  # a gpu_memory test waits
    assert _free(path, exclusive=True)


def test_a_memory_test_runs_alone_and_lets_go_when_it_fails(tmp_path):
    path = tmp_path / "gpu.lock"
    with pytest.raises(RuntimeError), gpu_turn(path, exclusive=True):
        assert not _free(path, exclusive=False)
        raise RuntimeError("the test failed")
    assert _free(path, exclusive=True)


def test_workers_of_one_run_share_a_lock_file_and_runs_do_not():
    assert lock_path("run-a") == lock_path("run-a") != lock_path("run-b")


def test_a_failed_tests_frames_let_go_of_what_they_held(monkeypatch):
    """pytest keeps a failure's exception in sys.last_value for a debugger; its frames, and
    those of the exception it was raised from, hold the test's tensors until cleared."""
    import gc
    import sys
    import weakref

    class Held:  # a tensor of the test, say
        pass

    refs = []

    def lookup(table):
        inner = Held()
        refs.append(weakref.ref(inner))
        return table["missing"]

    def failing_test():
        layer = Held()
        refs.append(weakref.ref(layer))
        try:
            lookup({})
        except KeyError as e:
            raise AssertionError("the test failed") from e

    try:
        failing_test()
    except AssertionError as e:
        monkeypatch.setattr(sys, "last_value", e, raising=False)
        monkeypatch.setattr(sys, "last_exc", e, raising=False)
    gc.collect()
    assert all(r() is not None for r in refs)  # kept by the stored tracebacks
    assert release_failed_frames()
    gc.collect()
    assert all(r() is None for r in refs)
    assert not release_failed_frames()  # released once: no collection on every later test


@pytest.mark.parametrize(
    ("marks", "alone"),
    [({"gpu"}, False), ({"gpu", "gpu_memory"}, True), ({"gpu", "gpu_alone"}, True)],
)
def test_a_test_that_times_the_gpu_takes_it_alone_instead_of_being_skipped(marks, alone):
    """Timing tests (``gpu_alone``) run in a many-worker GPU run with the exclusive turn, as
    the ``gpu_memory`` ones do; they were skipped there, and so never ran in it."""
    from types import SimpleNamespace

    from tests.conftest import _needs_the_gpu_alone

    assert _needs_the_gpu_alone(SimpleNamespace(keywords=marks)) is alone
