"""Start worker processes, forked from a zygote that imported torch once (:mod:`.zygote_main`).

:func:`start` returns an object with the part of :class:`subprocess.Popen` a
:class:`~kernel_ratchet.harness.worker.Worker` uses (``pid``, ``stdin``, ``stdout``,
``poll``, ``wait``, ``returncode``). One zygote serves every worker of one environment and
interpreter in this process; another environment starts another zygote (at most
:data:`MAX_ZYGOTES` kept, the oldest retired). Where the zygote cannot serve (not Linux, it
failed to start, it died) the worker is started as its own ``python -m`` process, as it is
everywhere with ``RATCHET_WORKER_START=spawn``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from typing import IO

from kernel_ratchet.harness import strays, zygote_main
from kernel_ratchet.harness.zygote_main import WORKER_MODULE

#: Environment variable: ``spawn`` starts every worker as its own process (no zygote).
START_ENV = "RATCHET_WORKER_START"
#: The variables that may differ between workers of one zygote (set in the child only):
#: the worker's own, and pytest's name of the test running (which torch's import never reads).
PER_WORKER = ("KR_WORKER_SPEC", "TRITON_INTERPRET", "PYTEST_CURRENT_TEST")
#: Zygotes kept alive in one process (each holds an imported torch).
MAX_ZYGOTES = 2
#: Seconds a zygote may take to import torch and say it is ready.
READY_S = 120.0


class Forked:
    """A worker forked by a zygote: its pipes, and its exit status as the zygote reports it."""

    def __init__(self, zygote: Zygote, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None
        self._zygote = zygote

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(WORKER_MODULE, timeout or 0.0)
            self._zygote.wait_exit(self.pid, left)
        assert self.returncode is not None
        return self.returncode


class Zygote:
    """One zygote process and the thread that reads its reports."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Condition()
        self._pids: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._next = 0
        self._dead = False
        self._proc = subprocess.Popen(
            [sys.executable, "-m", zygote_main.__name__, str(theirs.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        strays.own(self._proc.pid)  # the tool's own child, not a process escaped from a round
        self._ready = threading.Event()
        threading.Thread(target=self._read, name="kr-zygote-reader", daemon=True).start()
        if not self._ready.wait(READY_S) or self._dead:
            self.retire()
            raise OSError("the worker zygote did not start")

    @property
    def alive(self) -> bool:
        return not self._dead and self._proc.poll() is None

    def spawn(self, env: dict[str, str], cwd: str, stderr: IO[bytes]) -> Forked:
        """Fork one worker; raise OSError when the zygote cannot."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            with self._lock:
                self._next += 1
                rid = self._next
            msg = json.dumps({"id": rid, "env": env, "cwd": cwd}).encode()
            socket.send_fds(self._sock, [msg], [in_r, out_w, stderr.fileno()])
            pid = self._await(lambda: self._pids.pop(rid, None), READY_S)
        finally:
            os.close(in_r)
            os.close(out_w)
        if pid is None or pid < 0:
            os.close(in_w)
            os.close(out_r)
            raise OSError("the worker zygote did not fork the worker")
        return Forked(self, pid, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"))

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            if pid in self._exits:
                return self._exits[pid]
        if self._dead and not _exists(pid):
            return -9  # its zygote died before it could say how the worker ended
        return None

    def wait_exit(self, pid: int, timeout: float | None) -> None:
        self._await(lambda: self.exit_code(pid), 0.5 if timeout is None else min(timeout, 0.5))

    def retire(self) -> None:
        """No more workers from this zygote; it exits once its last child has, its children
        still stopped and continued by this process alone."""
        with contextlib.suppress(OSError):
            self._sock.send(json.dumps(zygote_main.RETIRE).encode())

    def _await(self, got, timeout: float):
        deadline = time.monotonic() + timeout
        with self._lock:
            while (value := got()) is None and not self._dead:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(left)
            return value

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            with self._lock:
                if "ready" in msg:
                    self._ready.set()
                elif "exit" in msg:
                    self._exits[msg["exit"]] = msg["code"]
                elif "id" in msg:
                    self._pids[msg["id"]] = msg.get("pid", -1)
                self._lock.notify_all()
        with self._lock:
            self._dead = True
            self._lock.notify_all()
        self._ready.set()


_ZYGOTES: OrderedDict[tuple, Zygote] = OrderedDict()
_LOCK = threading.Lock()


def _exists(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def _zygote(env: dict[str, str]) -> Zygote | None:
    key = (os.getpid(), sys.executable, tuple(sorted(env.items())))
    with _LOCK:
        z = _ZYGOTES.get(key)
        if z is not None and z.alive:
            _ZYGOTES.move_to_end(key)
            return z
        try:
            z = Zygote(env)
        except OSError:
            return None
        _ZYGOTES[key] = z
        while len(_ZYGOTES) > MAX_ZYGOTES:
            _ZYGOTES.popitem(last=False)[1].retire()
        return z


def start(env: dict[str, str], cwd: str, stderr: IO[bytes]):
    """The worker process of ``env`` in ``cwd``, its stderr on ``stderr``: forked by the
    zygote of this environment where one can serve, else started with ``python -m``."""
    if os.environ.get(START_ENV) != "spawn" and sys.platform.startswith("linux"):
        base = {k: v for k, v in env.items() if k not in PER_WORKER}
        z = _zygote(base)
        if z is not None:
            with contextlib.suppress(OSError):
                return z.spawn(env, cwd, stderr)
    return subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=cwd,
        env=env,
        start_new_session=True,  # one process group: a kill also ends the candidate's children
    )
