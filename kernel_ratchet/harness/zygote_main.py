"""The worker zygote: a process that imported torch once and forks every worker from there.

A worker spends most of its start-up importing torch (1.5-2 s of CPU per worker); a campaign
starts two workers per A/B and a new one after every failed candidate. The zygote
(``python -m kernel_ratchet.harness.zygote_main``, started by :mod:`.forked` with the
workers' environment less their own variables) imports torch, never initializes CUDA, and
then serves fork requests on the socket whose descriptor its argument names: each request
carries the worker's environment, working directory and its stdin, stdout and stderr
descriptors. The child starts a new session, takes those descriptors as 0, 1 and 2, closes
every other one (the zygote's socket included, so no candidate can reach the zygote), takes
the environment and directory, and runs ``kernel_ratchet.harness.worker_main`` as ``python
-m`` would; it never returns into the zygote's loop. The zygote reports each child's pid,
then its exit status as :func:`os.waitstatus_to_exitcode` gives it (a negative signal number
for a fatal signal, as :class:`subprocess.Popen` does).

No candidate code ever runs in the zygote, and it is not dumpable (no process of the same
user can read or write its memory); a child is dumpable again, as a freshly started worker
is, so the driver can still read its descriptors (:mod:`.channel`). The end of its socket
(the driver exited or was killed) continues every child that was stopped; that or a
retirement (:data:`RETIRE`: the driver wants no more workers from it) ends the zygote once
its last child has exited.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys

from kernel_ratchet.harness.strays import prctl

#: The module every child runs.
WORKER_MODULE = "kernel_ratchet.harness.worker_main"
#: The driver's message that asks for no more workers (the zygote exits after its last).
RETIRE = {"retire": True}
#: Largest request message (JSON: an environment and a directory).
MAX_MESSAGE = 1 << 20
_PR_SET_DUMPABLE = 4


def _dumpable(on: bool) -> None:
    prctl(_PR_SET_DUMPABLE, int(on))


def _run_worker(request: dict, fds: list[int], started: int) -> None:
    """In the forked child: become the worker that ``request`` describes (``started``: a
    pipe to close once it leads its own session). Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.close(started)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096)
        _dumpable(True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import runpy

        sys.argv = [WORKER_MODULE]  # as `python -m` leaves it: its file, no argument
        runpy.run_module(WORKER_MODULE, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 -- a child must never return into the zygote
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _send(sock: socket.socket, msg: dict) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(json.dumps(msg).encode() + b"\n")


def _fork(sock: socket.socket, request: dict, fds: list[int]) -> int | None:
    """Fork the worker of one request; its pid (None when the request was malformed)."""
    rid = request.get("id")
    if rid is None or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        _send(sock, {"id": rid, "error": f"a request with an id and 3 descriptors, got {fds}"})
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(started_r)
        _run_worker(request, fds, started_w)
    os.close(started_w)
    with contextlib.suppress(OSError):
        os.read(started_r, 1)  # the child leads its own session before the driver has its pid
    os.close(started_r)
    for fd in fds:
        os.close(fd)
    _send(sock, {"id": rid, "pid": pid})
    return pid


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _continue(children: set[int]) -> None:
    """Continue every child's process group: a worker stopped while the other side of an A/B
    timed, whose driver is gone (killed outright), then reads the end of its input and exits
    rather than staying stopped with its memory (:func:`.pinning.continue_when_orphaned` does
    this for a worker whose parent dies; a forked worker's parent is the zygote)."""
    for pid in children:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGCONT)


def serve(sock: socket.socket) -> None:
    """Fork a worker for every request until the driver retires the zygote (:data:`RETIRE`)
    or its socket ends, then serve on until the last child exited."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    forking = driver = True
    while (forking and driver) or children:
        ready, _, _ = select.select([sock, wake_r] if driver else [wake_r], [], [], 1.0)
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError, InterruptedError):
                os.read(wake_r, 4096)
        if sock in ready:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 3)
            except (OSError, ValueError):
                data, fds = b"", []
            try:
                request = json.loads(data) if data else {}
            except ValueError:
                request = {}  # refused by _fork, its descriptors closed
            if not data:  # the driver is gone: nothing will continue what it stopped
                driver = False
                _continue(children)
            elif request == RETIRE:  # its children stay the driver's to stop and continue
                forking = False
            elif forking and (pid := _fork(sock, request, fds)) is not None:
                children.add(pid)
        _reap(sock, children)


def preload() -> None:
    """Import what every worker imports first, then freeze the objects it made: the garbage
    collector of a worker never walks them, so a full collection neither copies the pages the
    worker shares with the zygote nor takes tens of milliseconds inside a timed sample."""
    import gc

    import torch  # noqa: F401 -- the import every worker would otherwise repeat

    gc.collect()
    gc.freeze()


def main() -> None:
    _dumpable(False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's Ctrl-C is the driver's
    preload()
    sock = socket.socket(fileno=int(sys.argv[1]))  # its socket to the driver
    _send(sock, {"ready": os.getpid()})
    serve(sock)
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: whoever reads its stderr sees the end at once


if __name__ == "__main__":
    main()
