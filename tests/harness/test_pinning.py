"""Both workers of a paired A/B on one CPU: the CPU chosen, and the pin applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from kernel_ratchet.harness import pinning
from kernel_ratchet.harness.worker import WorkerSpec
from kernel_ratchet.method import planted


def test_cpulists_parse_as_linux_writes_them() -> None:
    assert pinning.parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert pinning.parse_cpulist("5") == {5}
    assert pinning.parse_cpulist("") == set()


def _sysfs(tmp_path: Path, node: str, cpulist: str) -> tuple[Path, Path]:
    pci, nodes = tmp_path / "pci", tmp_path / "nodes"
    (pci / "0000:1b:00.0").mkdir(parents=True)
    (pci / "0000:1b:00.0" / "numa_node").write_text(node + "\n")
    (nodes / "node1").mkdir(parents=True)
    (nodes / "node1" / "cpulist").write_text(cpulist + "\n")
    return pci, nodes


def test_the_gpus_numa_node_names_its_cpus(tmp_path: Path) -> None:
    pci, nodes = _sysfs(tmp_path, "1", "8-15")
    assert pinning.gpu_numa_cpus("0000:1B:00.0", pci, nodes) == set(range(8, 16))
    assert pinning.gpu_numa_cpus("0000:99:00.0", pci, nodes) == set()  # no such device
    assert pinning.gpu_numa_cpus(None, pci, nodes) == set()
    pci, nodes = _sysfs(tmp_path / "unknown", "-1", "8-15")  # a one-node machine says -1
    assert pinning.gpu_numa_cpus("0000:1b:00.0", pci, nodes) == set()


def test_the_cpu_is_near_the_gpu_and_not_cpu_0() -> None:
    assert pinning.pick_cpu(set(range(16)), set(range(8, 16))) == 15
    assert pinning.pick_cpu({0, 1, 2, 3, 12}, set(range(8, 12))) == 12  # none near: highest
    assert pinning.pick_cpu({0, 1, 2, 3}, set()) == 3


THREADED = "import sys, threading; threading.Thread(target=sys.stdin.read).start(); print(1)"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_pinned_process_runs_only_on_that_cpu_with_all_its_threads() -> None:
    cpu = max(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", THREADED], stdin=-1, stdout=-1)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"1"
        tasks = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert len(tasks) == 2  # the main thread and the one it started
        assert pinning.pin(child.pid, (cpu,)) == f"pinned to CPU {cpu}"
        assert all(os.sched_getaffinity(t) == {cpu} for t in tasks)
        assert pinning.pin(child.pid, ()) == "not pinned"
        assert pinning.pin(child.pid, (10**6,)).startswith("not pinned (")  # no such CPU
        assert os.sched_getaffinity(child.pid) == {cpu}
    finally:
        child.communicate(b"", timeout=30)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_worker_starts_on_every_cpu_and_times_on_its_own(tmp_path: Path) -> None:
    from dataclasses import replace

    from kernel_ratchet.harness.worker import Worker
    from tests.redteam.expect import SEED, SHAPE, cpu_spec

    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    with Worker(replace(cpu_spec("TinyGemm"), cpus=(cpu,)), tmp_path / "w.log") as w:
        assert w.check(SHAPE, SEED).ok
        assert os.sched_getaffinity(w._proc.pid) == allowed and not w.pinned
        assert w.time(SHAPE, SEED + 1, "fwd").ok
        assert os.sched_getaffinity(w._proc.pid) == {cpu} and w.pinned == f"pinned to CPU {cpu}"
    assert f"[ratchet] worker pinned to CPU {cpu}" in (tmp_path / "w.log").read_text()


def test_both_sides_of_a_gpu_a_b_get_the_same_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planted, "paired_cpus", lambda: (13,))
    inc = planted.worker_spec(planted.base_adapter(True), True, {})
    cand = planted.worker_spec("kernel_ratchet.method.planted:SlowerBf16", True, {})
    assert inc.cpus == cand.cpus == (13,)
    assert planted.worker_spec(planted.base_adapter(False), False, {}).cpus == ()


def test_the_spec_carries_its_cpus_to_the_worker() -> None:
    spec = WorkerSpec("/src", "m:A", "cuda_events", {}, "cuda", False, cpus=(3,))
    assert json.loads(json.dumps(asdict(spec)))["cpus"] == [3]


def test_unpinned_method_workers_stay_where_the_scheduler_puts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(planted, "paired_cpus", lambda: (13,))
    assert planted.worker_spec(planted.base_adapter(True), True, {}, pinned=False).cpus == ()


def test_a_process_beside_the_a_b_keeps_off_every_cpu_its_workers_could_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = tmp_path / "nodes"
    for name, cpulist in (("node0", "0-7"), ("node1", "8-15")):
        (nodes / name).mkdir(parents=True)
        (nodes / name / "cpulist").write_text(cpulist + "\n")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    left = pinning.beside_cpus(nodes)
    assert left == set(range(16)) - {7, 15}
    for near in (set(range(8)), set(range(8, 16)), set()):  # wherever the GPU sits
        assert pinning.pick_cpu(set(range(16)), near) not in left
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 9}, raising=False)
    assert pinning.beside_cpus(nodes) == {0, 1}  # each node's highest allowed one is kept off
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {6, 7}, raising=False)
    assert pinning.beside_cpus(nodes) is None  # one CPU would be left: nothing is restricted


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_step_started_on_some_cpus_runs_there_with_its_children(tmp_path: Path) -> None:
    from kernel_ratchet.campaign.steps import start_step

    cpu = min(os.sched_getaffinity(0))
    code = "import os, subprocess, sys; print(sorted(os.sched_getaffinity(0)))"
    cmd = f'{sys.executable} -c "{code}" && {sys.executable} -c "{code}"'
    res = start_step("child", cmd, cwd=tmp_path, log_path=tmp_path / "c.log", cpus={cpu})
    assert res.wait(60).ok
    assert (tmp_path / "c.log").read_text().splitlines()[-2:] == [f"[{cpu}]"] * 2


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_the_idle_side_is_stopped_while_the_other_is_timed_and_continued_after():
    import subprocess
    import sys
    import time

    from kernel_ratchet.harness.pinning import stopped

    busy = "import threading\nwhile True: pass\n"  # a spinner that would share the CPU
    proc = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
    try:
        time.sleep(0.2)
        with stopped(proc.pid):
            assert _state(proc.pid) == "T"
        time.sleep(0.05)
        assert _state(proc.pid) in ("R", "S")
    finally:
        proc.kill()
        proc.wait()
    with stopped(proc.pid):  # an ended process: nothing to stop, no error
        pass


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_a_child_in_a_process_group_of_its_own_is_stopped_with_its_worker():
    """A worker's child started in a session of its own sits outside the worker's process
    group: it is stopped too, or it could slow the other side while its worker idles."""
    import subprocess
    import time

    from kernel_ratchet.harness.pinning import stopped

    spawn = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'while True: pass'], "
        "start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", spawn], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    helper = int(proc.stdout.readline())
    try:
        assert os.getpgid(helper) != os.getpgid(proc.pid)
        with stopped(proc.pid):
            time.sleep(0.05)
            assert _state(helper) == "T" and _state(proc.pid) == "T"
        time.sleep(0.05)
        assert _state(helper) in ("R", "S")
    finally:
        os.kill(helper, 9)
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_stopped_worker_whose_driver_is_killed_is_continued(tmp_path):
    """A worker stopped while the other side times, its driver then killed outright: Linux
    sends it SIGCONT as the driver goes, so it does not stay stopped holding its memory."""
    import signal
    import time

    out = tmp_path / "worker.txt"
    worker = (
        "import os, signal, sys, time\n"
        "from kernel_ratchet.harness.pinning import continue_when_orphaned\n"
        "continue_when_orphaned()\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
        f"open({str(out)!r}, 'w').write('continued')\n"
    )
    driver = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {worker!r}])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    d = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    pid = int(d.stdout.readline())
    deadline = time.monotonic() + 10
    while _state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _state(pid) == "T"
    d.send_signal(signal.SIGKILL)
    d.wait()
    deadline = time.monotonic() + 10
    # the file exists once opened, and holds the word once written: wait for the word
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert out.read_text() == "continued"
