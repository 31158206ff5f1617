"""The CPU both sides of a paired A/B run on.

A launch-bound op's time is the host's time: Python, the framework and the driver on one CPU
core. Two worker processes the scheduler places on different cores, or on different sockets,
start with different host speeds and keep them for the whole A/B, and pairing cannot cancel
a difference that lasts as long as the processes: on an H200 host two paired A/Bs of the same
change to a launch-bound GEMM, run minutes apart, read 1.27x and 0.96x with CIs that exclude
each other, while the same change timed in one process, interleaved, read 0.94-0.97x on the
forward.

So the paired workers of a GPU campaign are both pinned to one CPU from their first timing
request on (they time one request at a time, the idle one waits on its pipe; their start-up,
imports and compilation, still use every CPU): one of the GPU's NUMA node where Linux says which,
the highest-numbered the process may use (CPU 0 takes the most interrupts and housekeeping).
Where the platform has no CPU affinity (macOS, Windows) nothing is pinned.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from kernel_ratchet.harness.strays import descendants, prctl

#: ``prctl`` option: the signal this process gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1

_PCI = Path("/sys/bus/pci/devices")
_NODES = Path("/sys/devices/system/node")


def parse_cpulist(text: str) -> set[int]:
    """CPUs of a Linux cpulist (``"0-3,8,10-11"``)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def gpu_numa_cpus(pci_bus_id: str | None, pci: Path = _PCI, nodes: Path = _NODES) -> set[int]:
    """CPUs of the NUMA node of the PCI device ``pci_bus_id`` (``"0000:1b:00.0"``); empty
    when unknown."""
    if not pci_bus_id:
        return set()
    try:
        node = int((pci / pci_bus_id.lower() / "numa_node").read_text())
        if node < 0:
            return set()
        return parse_cpulist((nodes / f"node{node}" / "cpulist").read_text())
    except (OSError, ValueError):
        return set()


def cuda_bus_id(index: int = 0) -> str | None:
    """The PCI address of CUDA device ``index`` as sysfs names it, or None."""
    import torch

    props = torch.cuda.get_device_properties(index)
    fields = [getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
    if any(f is None for f in fields):
        return None
    domain, bus, device = fields
    return f"{domain:04x}:{bus:02x}:{device:02x}.0"


def pick_cpu(allowed: set[int], near: set[int]) -> int:
    """The CPU to pin to: the highest of ``allowed`` that is ``near`` the GPU, else the highest
    of ``allowed``."""
    pool = (allowed & near) or allowed
    return max(pool)


@functools.cache
def paired_cpus(index: int = 0) -> tuple[int, ...]:
    """``(cpu,)`` for the workers of a paired A/B on CUDA device ``index``; ``()`` where this
    platform cannot pin. Chosen once per process, so every caller (the workers' specs, the
    round's log) names the same CPU."""
    if not hasattr(os, "sched_getaffinity"):
        return ()
    allowed = set(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return ()
    return (pick_cpu(allowed, gpu_numa_cpus(cuda_bus_id(index))),)


def beside_cpus(nodes: Path = _NODES) -> set[int] | None:
    """The CPUs a process running beside a paired A/B may use (a focused test without the
    GPU): every allowed CPU but those :func:`paired_cpus` could pick, the highest of each NUMA
    node and the highest of all, found without asking the GPU. A thread pool sized to every
    core would otherwise put a thread on the workers' CPU and stall at each barrier while they
    time. None where nothing can be pinned or too few CPUs would be left."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = set(os.sched_getaffinity(0))
    taken = {max(allowed)}
    for node in nodes.glob("node[0-9]*"):
        try:
            near = parse_cpulist((node / "cpulist").read_text()) & allowed
        except (OSError, ValueError):
            continue
        taken |= {max(near)} if near else set()
    left = allowed - taken
    return left if len(left) >= 2 else None


def _threads(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (Linux ``/proc``), or just ``pid``."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")] or [pid]
    except OSError:
        return [pid]


def pin(pid: int, cpus: tuple[int, ...]) -> str:
    """Pin process ``pid``, every thread it has and the ones they start, to ``cpus``; returns
    what happened, for the worker's log."""
    if not cpus:
        return "not pinned"
    try:
        for tid in _threads(pid):
            os.sched_setaffinity(tid, cpus)
    except (AttributeError, OSError) as err:
        return f"not pinned ({err})"
    return f"pinned to CPU {','.join(map(str, cpus))}"


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """Process group ``pid`` and every process below ``pid`` stopped (SIGSTOP) for the
    duration, continued after: the idle side of a paired A/B while the other side is timed.
    A thread the candidate started at import that burns the CPU, or launches GPU work, only
    while its worker waits would slow the incumbent's samples and fake a gain, and so would a
    child it started in a process group of its own. Nothing where the platform has no SIGSTOP
    or the process has ended."""
    stop = getattr(signal, "SIGSTOP", None)
    below: set[int] = set()
    try:
        if stop is not None:
            os.killpg(pid, stop)
            _until_stopped(pid)
            below = _stop_below(pid, stop)
    except (ProcessLookupError, PermissionError, OSError):
        stop = None
    try:
        yield
    finally:
        if stop is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.killpg(pid, signal.SIGCONT)
            for p in below:
                with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                    os.kill(p, signal.SIGCONT)


def _stop_below(pid: int, stop: int) -> set[int]:
    """Stop every process below ``pid``, again until no new one appears (a stopped process
    starts none); the pids stopped."""
    done: set[int] = set()
    for _ in range(16):
        new = descendants(pid) - done
        if not new:
            break
        for p in new:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.kill(p, stop)
        done |= new
    return done


def continue_when_orphaned() -> None:
    """Ask Linux to send this process SIGCONT when the thread that started it ends: a worker
    stopped by :func:`stopped` whose driver was killed outright (SIGKILL, the OOM killer)
    would otherwise stay stopped, holding its memory; continued, it reads the end of its
    input and exits (a forked worker's parent is the zygote, which continues its children
    when the driver's end of its socket closes). Nothing elsewhere."""
    prctl(PR_SET_PDEATHSIG, int(signal.SIGCONT))


def _until_stopped(pid: int, timeout_s: float = 0.2) -> None:
    """Wait until Linux reports process ``pid`` stopped (a signal is delivered, not at once)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t", "Z", "X"):
                    return
        except (OSError, IndexError):
            return  # no /proc here, or the process is gone
        time.sleep(0.0005)
