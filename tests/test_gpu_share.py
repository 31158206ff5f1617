"""The GPU tests' turns under pytest-xdist (:mod:`tests.gpu_share`), on any machine: the lock
is a file lock, so its rules hold without a GPU."""

from __future__ import annotations

import fcntl

import pytest

from tests.gpu_share import gpu_turn, lock_path


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
