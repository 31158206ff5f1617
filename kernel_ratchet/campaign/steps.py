"""Running the project's commands (rebuild, focused test, harness) with a time limit and a log.

A command that fails, times out or cannot start is a recorded outcome (``StepResult.ok`` is
False, the log says why); only a missing log directory would be an infrastructure fault.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.log_digest import failed_nodes, failure_digest
from kernel_ratchet.errors import raise_if_interrupted
from kernel_ratchet.harness import strays
from kernel_ratchet.harness.interpreter_plugin import STEP_ENV
from kernel_ratchet.harness.start_gate import DRIVER_ENV, GATE_ENV

#: Time limits of the project's commands: a rebuild or focused test, a harness run.
TEST_TIMEOUT_S = 1800.0
HARNESS_TIMEOUT_S = 3600.0
#: The environment of a focused test declared not to use the GPU (``test_gpu: false``): no
#: device is visible to it, so what the round times beside it cannot share the GPU with it.
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}


@dataclass(frozen=True)
class StepResult:
    """One command's outcome: ``ok``, its return code (None: timed out), seconds, log, reason,
    and the node ids of every test a failed pytest run reported (``failed_tests``)."""

    name: str
    command: str
    ok: bool
    returncode: int | None
    seconds: float
    log: str  # path of the log file
    reason: str
    failed_tests: tuple[str, ...] = ()


#: What a step's log says when a process ran out of device memory (PyTorch's error, the CUDA
#: driver's and runtime's messages).
OUT_OF_MEMORY = (
    "OutOfMemoryError",
    "CUDA out of memory",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation",
)


def ran_out_of_memory(log: Path) -> bool:
    """Whether the step that wrote ``log`` ran out of device memory (the log's last 1 MiB)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - (1 << 20)))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return False
    return any(marker in tail for marker in OUT_OF_MEMORY)


def run_step(
    name: str,
    command: str,
    *,
    cwd: Path,
    log_path: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> StepResult:
    """Run ``command`` through the shell in ``cwd``; stdout+stderr go to ``log_path``.

    The command runs in its own process group so a timeout or Ctrl+C stops all its children;
    while it runs, ``<log>.pgid`` holds that group's id and this machine's identity so that a
    later recovery here can stop what a killed driver left behind (``kill_leftovers``), and on
    Linux the child is also sent SIGKILL if the driver dies.
    """
    return start_step(name, command, cwd=cwd, log_path=log_path, env=env).wait(timeout_s)


def start_step(
    name: str,
    command: str,
    *,
    cwd: Path,
    log_path: Path,
    env: dict[str, str] | None = None,
    gate: Path | None = None,
    cpus: set[int] | None = None,
) -> RunningStep:
    """Start ``command`` as :func:`run_step` does, without waiting for it. ``gate``: a path
    the command is told of (``RATCHET_START_GATE``); a command that honours it prepares (its
    imports) and then waits for :meth:`RunningStep.release` before its real work. ``cpus``:
    the only CPUs the command and its children may run on (Linux)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    full_env[STEP_ENV] = "1"  # a test it runs in Triton's interpreter computes as ours does
    if gate is not None:
        gate.unlink(missing_ok=True)
        full_env[GATE_ENV] = str(gate)
        full_env[DRIVER_ENV] = str(os.getpid())
    t0 = time.monotonic()
    log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by RunningStep.wait
    log.write(f"$ {portable_command(command, Path(cwd))}\n# cwd: {_cwd_from(log_path, cwd)}\n")
    log.flush()
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
            preexec_fn=_child_setup(cpus),
        )
    except BaseException:
        log.close()
        raise
    strays.own(proc.pid)
    pgid_file = log_path.with_name(log_path.name + ".pgid")
    pgid_file.write_text(f"{proc.pid} {machine_identity()}")
    step = RunningStep(name, command, proc, log, log_path, pgid_file, t0, gate, cwd=Path(cwd))
    step._watch()
    return step


@dataclass
class RunningStep:
    """A command started by :func:`start_step`: release its gate, wait for it, or stop it."""

    name: str
    command: str
    proc: subprocess.Popen
    log: Any
    log_path: Path
    pgid_file: Path
    t0: float
    gate: Path | None = None
    released: float | None = None  # monotonic time of the release
    ended: float | None = None  # monotonic time of the exit, noted by :meth:`_watch`
    cwd: Path | None = None  # where it ran: its log is named relative to it in a reason

    def _watch(self) -> None:
        """Note the moment the command exits (a thread waits on it): a wait that comes later
        (a test run beside the measurement, waited for after it) counts only its own seconds."""

        def note_exit() -> None:
            self.proc.wait()
            self.ended = time.monotonic()

        threading.Thread(target=note_exit, name=f"kr-watch-{self.name}", daemon=True).start()

    def release(self) -> None:
        """Let a gated command start its real work (written atomically: it reads "go")."""
        if self.gate is not None and self.released is None:
            tmp = self.gate.with_name(self.gate.name + ".tmp")
            tmp.write_text("go")
            os.replace(tmp, self.gate)
        self.released = time.monotonic()

    def stop(self) -> None:
        """Kill the command's process group (a gated command not needed after all)."""
        if self.proc.poll() is None:
            _kill_group(self.proc)
        self._close()

    def _close(self) -> None:
        self.log.close()
        self.pgid_file.unlink(missing_ok=True)
        if self.gate is not None:
            self.gate.unlink(missing_ok=True)

    def _failed(self, rc: int) -> str:
        """Why a step failed: its exit code, what its log says (:func:`failure_digest`: the
        failing tests of a pytest run) and the log, relative to where the step ran."""
        log = portable_path(self.log_path, self.cwd) if self.cwd else str(self.log_path)
        digest = failure_digest(self.log_path)
        said = f": {digest}" if digest else ""
        return f"{self.name} exited with code {rc}{said} (see {log})"

    def wait(self, timeout_s: float) -> StepResult:
        """Release the gate if it is not yet, wait up to ``timeout_s`` from now, and return the
        outcome; its seconds run from the release (a gated command's preparation overlapped
        other work) or from the start."""
        self.release()
        since = self.released if self.gate is not None else self.t0
        try:
            raise_if_interrupted()  # a Ctrl+C lost while a process was started
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
            secs = time.monotonic() - since
            why = f"{self.name} timed out after {timeout_s:.0f} s"
            return StepResult(self.name, self.command, False, None, secs, str(self.log_path), why)
        except BaseException:
            _kill_group(self.proc)
            raise
        finally:
            self._close()
        secs = max(0.0, (self.ended or time.monotonic()) - since)  # a gated one may end first
        reason = "ok" if rc == 0 else self._failed(rc)
        failed = () if rc == 0 else failed_nodes(self.log_path)
        log = str(self.log_path)
        return StepResult(self.name, self.command, rc == 0, rc, secs, log, reason, failed)


def _child_setup(cpus: set[int] | None):
    """The child's set-up before it runs the command: die with the driver, keep to ``cpus``."""
    if not cpus:
        return _die_with_parent

    def setup() -> None:
        _die_with_parent()
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setaffinity(0, cpus)

    return setup


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGKILL us when the driver dies (kill -9 included)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def machine_identity() -> str:
    """This boot of this machine, and this PID namespace (a container's own): a process group id
    means something only where it was recorded."""
    parts = []
    for read in (
        lambda: Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
        lambda: os.readlink("/proc/self/ns/pid"),
    ):
        with contextlib.suppress(OSError):
            parts.append(read())
    return "/".join(parts or [socket.gethostname()]).replace(" ", "_")


def kill_leftovers(directory: Path) -> list[int]:
    """Stop the process groups recorded by ``run_step`` under ``directory`` (a killed driver's
    test or harness); returns the group ids signalled.

    Only groups recorded by this machine's current boot and PID namespace are signalled: a
    campaign carried to another machine or container (or resumed after a reboot) holds ids that
    name unrelated processes there, and a record without the identity (written before it was
    kept) cannot be trusted either. Those records are dropped: their processes died with their
    machine."""
    killed = []
    here = machine_identity()
    for f in Path(directory).rglob("*.pgid"):
        with contextlib.suppress(ValueError, ProcessLookupError, PermissionError, OSError):
            pgid, _, where = f.read_text().strip().partition(" ")
            if where == here:
                os.killpg(int(pgid), signal.SIGKILL)
                killed.append(int(pgid))
        f.unlink(missing_ok=True)
    return killed


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def python_command(script: Path, *args: str) -> str:
    """A shell command running ``script`` with this interpreter."""
    parts = [sys.executable, str(script), *args]
    return " ".join(_quote(p) for p in parts)


def recorded_python_command(root: Path, script: Path, *args: str | Path) -> str:
    """The command :func:`python_command` runs, as the records name it: the interpreter as
    ``python`` and paths under the project ``root`` relative to it, so that a campaign directory
    reads the same on any machine (the executed command keeps its absolute paths)."""
    parts = ["python", *(portable_path(a, root) for a in (script, *args))]
    return " ".join(_quote(p) for p in parts)


def portable_command(command: str, root: Path) -> str:
    """``command`` as the records show it: this interpreter as ``python`` and absolute paths
    under ``root`` relative to it (the command itself runs as given)."""
    try:
        words = set(shlex.split(command))
    except ValueError:  # unbalanced quotes: shown as given
        return command
    shown = command
    for word in sorted(words, key=len, reverse=True):
        if word == sys.executable:
            shown = shown.replace(word, "python")
        elif os.path.isabs(word) and (rel := portable_path(word, root)) != word:
            shown = shown.replace(word, rel)
    return shown


def _cwd_from(log_path: Path, cwd: str | Path) -> str:
    """Where a step ran, from the folder of its log (a step log reads the same anywhere)."""
    rel = os.path.relpath(Path(cwd).resolve(), Path(log_path).parent.resolve())
    return f"{Path(rel).as_posix()} (from this log's folder)"


def portable_path(path: str | Path, root: Path) -> str:
    """``path`` relative to ``root`` when it lies inside it (symbolic links resolved if need
    be); anything else (an option, a path outside the project) as given."""
    p = Path(path)
    if not p.is_absolute():
        return str(path)
    for inner, outer in ((p, Path(root)), (p.resolve(), Path(root).resolve())):
        if inner.is_relative_to(outer):
            return inner.relative_to(outer).as_posix()
    return str(path)


def _quote(s: str) -> str:
    return shlex.quote(s)
