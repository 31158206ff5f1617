"""Workers forked from the zygote: one zygote per environment, nothing of it reachable from a
worker, the tool's own process in the eyes of the escape watch, and a plain start as the way
out where the zygote cannot serve."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_ratchet.harness import forked, strays
from kernel_ratchet.harness.channel import PROTO_FD
from kernel_ratchet.harness.pinning import stopped
from kernel_ratchet.harness.worker import Worker
from tests.harness.test_redteam import SEED, SHAPE, explain, spec

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name: state, parent, ..."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _parent(pid: int) -> int:
    return int(_stat(pid)[1])


def _state(pid: int) -> str:
    return _stat(pid)[0]


def _ready(w: Worker) -> int:
    assert w.wait_ready(time.monotonic() + 120), "the worker did not start"
    assert w.info is not None
    return int(w.info["pid"])


def test_workers_of_one_environment_come_from_one_zygote(tmp_path: Path) -> None:
    with (
        Worker(spec("TinyGemm"), tmp_path / "a.log") as a,
        Worker(spec("NanOutput"), tmp_path / "b.log") as b,
    ):
        pa, pb = _ready(a), _ready(b)
        zygote = _parent(pa)
        assert zygote == _parent(pb) and zygote != os.getpid()
        assert a.check(SHAPE, SEED).ok  # each runs its own adapter: the spec is the child's
        r = b.check(SHAPE, SEED)
        assert r.category == "nan", explain(r)


def test_a_worker_holds_no_descriptor_of_the_zygote(tmp_path: Path) -> None:
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        pid = _ready(w)
        zygote = _parent(pid)
        sockets = {
            os.readlink(f"/proc/{zygote}/fd/{fd}") for fd in os.listdir(f"/proc/{zygote}/fd")
        }
        sockets = {s for s in sockets if s.startswith("socket:")}
        assert sockets, "the zygote's socket to this process"
        theirs = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert not theirs & sockets
        assert os.readlink(f"/proc/{pid}/fd/{PROTO_FD}").startswith("pipe:")
        assert os.getsid(pid) == pid  # its own session: a kill of its group ends its children


def test_a_worker_killed_by_a_signal_reports_that_signal(tmp_path: Path) -> None:
    w = Worker(spec("TinyGemm"), tmp_path / "w.log")
    pid = _ready(w)
    os.kill(pid, signal.SIGSEGV)
    r = w.check(SHAPE, SEED)
    assert r.category == "crash" and "SIGSEGV" in r.detail, explain(r)
    assert w._proc.returncode == -signal.SIGSEGV


def test_a_zygote_started_inside_a_round_is_not_an_escaped_process(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KR_TEST_FRESH_ZYGOTE", str(tmp_path))  # an environment of its own
    with strays.Watch() as watch:
        with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
            assert w.check(SHAPE, SEED).ok
        assert watch.check() == ""


def test_a_dead_zygote_is_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KR_TEST_FRESH_ZYGOTE", str(tmp_path))
    with Worker(spec("TinyGemm"), tmp_path / "a.log") as a:
        first = _parent(_ready(a))
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(z.alive for z in forked._ZYGOTES.values() if z._proc.pid == first):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with Worker(spec("TinyGemm"), tmp_path / "b.log") as b:
        second = _parent(_ready(b))
        assert second != first
        assert b.check(SHAPE, SEED).ok


def test_spawn_starts_each_worker_as_a_child_of_this_process(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(forked.START_ENV, "spawn")
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        assert _parent(_ready(w)) == os.getpid()
        assert w.check(SHAPE, SEED).ok


def test_a_forked_worker_runs_in_its_own_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KR_TEST_FRESH_ZYGOTE", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # where the zygote starts
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        pid = _ready(w)
        assert os.readlink(f"/proc/{pid}/cwd") == os.path.realpath(spec("TinyGemm").source_root)
        assert os.readlink(f"/proc/{_parent(pid)}/cwd") != os.readlink(f"/proc/{pid}/cwd")


_DRIVER = """
import os, sys, time
sys.path.insert(0, {root!r})
from kernel_ratchet.harness.pinning import stopped
from kernel_ratchet.harness.worker import Worker
from tests.harness.test_redteam import spec
w = Worker(spec("TinyGemm"), {log!r})
assert w.wait_ready(time.monotonic() + 120)
with stopped(w.info["pid"]):
    print(w.info["pid"], flush=True)
    time.sleep(600)  # killed here, its worker stopped
"""


def test_a_worker_stopped_when_its_driver_is_killed_goes_on_and_exits(tmp_path: Path) -> None:
    """A driver killed outright while the idle side of an A/B is stopped: the zygote sees its
    socket end, continues the stopped worker, which reads the end of its input and exits."""
    root = str(Path(__file__).resolve().parents[2])
    code = _DRIVER.format(root=root, log=str(tmp_path / "w.log"))
    driver = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(driver.stdout.readline())
        assert _state(pid) == "T"  # stopped
    finally:
        driver.kill()
        driver.wait()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}"):
        if _state(pid) == "Z":
            break  # exited, its zygote not yet gone
        assert time.monotonic() < deadline, "the worker stayed behind its killed driver"
        time.sleep(0.05)


def test_the_zygote_freezes_what_it_imported() -> None:
    """A full collection in a forked worker walks none of torch's import-time objects: it
    would copy every page of them that the worker shares with the zygote (115 ms, then 78
    ms a collection, against 0 frozen, measured with torch 2.13 on a CPU)."""
    code = (
        "import gc\nfrom kernel_ratchet.harness.zygote_main import preload\n"
        "preload()\nprint(gc.get_freeze_count(), sum(gc.get_count()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    frozen, tracked = map(int, out.stdout.split())
    assert frozen > 100_000 and tracked < 1_000, out.stdout


def test_a_retired_zygote_leaves_a_stopped_worker_stopped(tmp_path: Path, monkeypatch) -> None:
    """Retiring a zygote (a third environment in one driver) is not its driver's end: a worker
    stopped for the other side's timing must stay stopped until the driver continues it."""
    monkeypatch.setenv("KR_TEST_FRESH_ZYGOTE", str(tmp_path))
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        pid = _ready(w)
        zygote = next(z for z in forked._ZYGOTES.values() if z._proc.pid == _parent(pid))
        with stopped(pid):
            zygote.retire()
            time.sleep(0.5)  # the zygote has read the retirement by now
            assert _state(pid) == "T"
        assert w.check(SHAPE, SEED).ok  # continued by the driver, it serves on
    deadline = time.monotonic() + 30
    while zygote._proc.poll() is None:  # retired, it exits after its last worker
        assert time.monotonic() < deadline, "the retired zygote outlived its last worker"
        time.sleep(0.05)
