"""Isolated worker processes: every candidate run happens in a child process with a time limit.

The caller (campaign engine, paired A/B) never imports the candidate and never holds a CUDA
context of its own for it. A :class:`Worker` starts one ``kernel_ratchet.harness.worker_main``
process (forked from a zygote that imported torch once: :mod:`.forked`), talks JSON lines
over its stdin/stdout (the candidate's own prints are redirected to stderr, which goes to
``log_path``), and turns every failure into a :class:`WorkerResult` with a category:

========================  ============================================================
category                  detected by
========================  ============================================================
``ok``                    the request finished and every check passed
``hang``                  no answer within ``timeout_s`` (the parent kills the process group)
``illegal_memory``        "illegal memory access" / "misaligned address" in the exception
                          or, after a fatal exit, in the log tail
``oom``                   ``torch.OutOfMemoryError`` or "out of memory" in the message/log
``compile``               Triton ``CompilationError`` (and its subclasses), ``OutOfResources``,
                          ``PTXASError``, inductor/dynamo compile failures, a ``SyntaxError`` or
                          ``ImportError`` while importing the candidate
``nan``                   NaN/Inf in an output of the correctness check
``crash``                 any other exception, a fatal signal (SIGSEGV, SIGABRT, ...) or exit
``cheat``                 an anti-cheat check (:mod:`kernel_ratchet.harness.anticheat`), or
                          the answer channel replaced (:mod:`kernel_ratchet.harness.channel`)
``wrong``                 an output below its SNR threshold in ``check``
========================  ============================================================

After any result other than ``ok`` the worker is gone (``alive`` False); start a new one.
Calling a dead worker raises :class:`WorkerDeadError` (a caller bug).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.harness import channel, forked, strays
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.outcome import classify_exit
from kernel_ratchet.harness.pinning import pin, stopped

CATEGORIES: tuple[str, ...] = (
    "ok",
    "hang",
    "illegal_memory",
    "oom",
    "compile",
    "nan",
    "crash",
    "cheat",
    "wrong",
)

#: Extra seconds the first request may wait for the worker to import torch and the adapter.
STARTUP_GRACE_S = 120.0

#: How much of the worker's stderr log a result carries.
LOG_TAIL_BYTES = 6000

_TOOL_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerDeadError(RatchetError):
    """A request was sent to a worker that already failed or was closed."""


@dataclass(frozen=True)
class WorkerSpec:
    """How to start a worker.

    ``source_root`` goes first on ``sys.path`` in the worker (the project checkout, or an
    incumbent git worktree); ``adapter`` is ``"module:Class"``; ``engine`` / ``engine_params``
    name a timing engine of :func:`kernel_ratchet.harness.timing.registry.engines`; ``device`` is
    ``"cpu"`` or ``"cuda"``; ``interpret`` sets ``TRITON_INTERPRET=1`` in the worker (and
    ``False`` removes it); a request running past ``timeout_s`` kills the worker (``"hang"``);
    ``cpus``: the CPUs the worker is pinned to from its first timing request on
    (:mod:`.pinning`; empty: wherever the scheduler puts it).
    """

    source_root: str
    adapter: str
    engine: str
    engine_params: dict
    device: str
    interpret: bool
    timeout_s: float = 300.0
    cpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class WorkerResult:
    """Outcome of one request.

    ``payload`` of ``check``: ``{"snr": {name: dB}, "passed": bool, "checks": [...]}``;
    of ``time``: ``{"median_ms", "stddev_ms", "samples_ms": [...], "engine": {...},
    "clock_mhz": [...], "dropped": int, "flags": [...], "spot_checks": int}``.
    """

    ok: bool
    category: str
    detail: str
    log: str
    payload: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown worker result category {self.category!r}: {CATEGORIES}")
        if self.ok != (self.category == "ok"):
            raise ValueError(f"ok={self.ok} contradicts category {self.category!r}")


# -- the parent side ------------------------------------------------------------------------------


class Worker:
    """One worker subprocess for one candidate (context manager).

    Requests are synchronous; each waits at most ``spec.timeout_s`` (the first one also waits
    for the worker to import torch and the adapter, up to ``timeout_s + STARTUP_GRACE_S``).
    The worker's stderr (and the candidate's prints) are appended to ``log_path``.
    """

    def __init__(self, spec: WorkerSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 -- lives as long as the process
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_TOOL_ROOT, env.get("PYTHONPATH")) if p)
        env["PYTHONSAFEPATH"] = "1"  # the cwd (maybe an old worktree) must not shadow the tool
        env["PYTHONUNBUFFERED"] = "1"
        env["KR_WORKER_SPEC"] = json.dumps(asdict(spec))
        if spec.interpret:
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        self._proc = forked.start(env, spec.source_root, self._log)
        strays.own(self._proc.pid)
        self.pinned = ""  # set by the first timing request (:meth:`time`)
        self._nonce = secrets.token_hex(16)  # the ready line must echo it
        self._send_line({"op": "hello", "nonce": self._nonce})
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="kr-worker-reader", daemon=True)
        self._reader.start()
        self._info: dict[str, Any] | None = None
        self._failed: WorkerResult | None = None
        self._closed = False

    # -- public API --

    def check(self, shape: Shape, seed: int) -> WorkerResult:
        """Fresh inputs from ``seed``; outputs vs the reference plus the anti-cheat checks."""
        return self._request({"op": "check", "shape": shape.to_dict(), "seed": int(seed)})

    def time(
        self,
        shape: Shape,
        seed: int,
        phase: str,
        *,
        max_tflops: float | None = None,
        max_gbps: float | None = None,
        spot_checks: int | None = None,
        graph: str | None = None,
    ) -> WorkerResult:
        """One timing sample set of ``phase`` (``"fwd"`` or ``"bwd"``) on fresh inputs.

        ``max_tflops`` / ``max_gbps`` (the machine's measured peaks) reject a faster result as
        ``"cheat"``. ``spot_checks``: how many secretly chosen samples have their outputs
        compared with the adapter's ``spot_reference`` (None: the worker's default, 3; at
        least 1). ``graph`` (``"on"``/``"off"``): the engine's CUDA-graph mode for this request
        where the engine chooses one (None: its own setting). Raises ValueError for another
        phase, or ``"bwd"`` on a forward-only op.
        """
        if phase not in ("fwd", "bwd"):
            raise ValueError(f"phase must be 'fwd' or 'bwd', not {phase!r}")
        msg: dict[str, Any] = {"op": "time", "shape": shape.to_dict(), "seed": int(seed)}
        msg |= {"phase": phase, "max_tflops": max_tflops, "max_gbps": max_gbps}
        if spot_checks is not None:
            msg["spot_checks"] = int(spot_checks)
        if graph is not None:
            msg["graph"] = str(graph)
        if not self.pinned:  # start-up and checks use every CPU, timing the spec's
            self.pinned = pin(self._proc.pid, tuple(self.spec.cpus))
            self._log.write(f"[ratchet] worker {self.pinned}\n".encode())
            self._log.flush()
        return self._request(msg)

    def transfer(
        self,
        shape: Shape,
        seed: int,
        *,
        steps: int = 8,
        repeats: int = 5,
        cache_modules: tuple[str, ...] = (),
    ) -> WorkerResult:
        """The training-idiom traces on ``shape``: benchmark idiom (same tensors) against
        training idiom (fresh activations and grad_out, weight updated in place), with the
        cache hits of ``cache_modules``. The payload is
        :meth:`~kernel_ratchet.harness.training_sim.IdiomTraces.to_payload` (per-repeat step
        times, cache counts); the guard judges it. Needs the adapter's ``training_roles``."""
        msg: dict[str, Any] = {"op": "transfer", "shape": shape.to_dict(), "seed": int(seed)}
        msg |= {"steps": steps, "repeats": repeats, "cache_modules": list(cache_modules)}
        return self._request(msg)

    def release(self) -> WorkerResult:
        """Free the device memory the worker's allocator keeps cached."""
        return self._request({"op": "release"})

    def paused(self) -> contextlib.AbstractContextManager[None]:
        """Stopped while the other side of a paired A/B times (:func:`.pinning.stopped`)."""
        return stopped(self._proc.pid) if self._proc.poll() is None else contextlib.nullcontext()

    def wait_ready(self, deadline: float) -> bool:
        """Block until the worker has started (True) or failed to start by the monotonic
        ``deadline`` (False: the worker is then dead, its failure recorded)."""
        if self._info is not None:
            return True
        dead = self._closed or self._failed is not None
        return not dead and self._await_ready(deadline) is None

    @property
    def alive(self) -> bool:
        """True while the process runs and no request has failed."""
        return not self._closed and self._failed is None and self._proc.poll() is None

    @property
    def info(self) -> dict[str, Any] | None:
        """What the worker said when ready (``has_backward``, ``schema``, ``pid``), else None."""
        return self._info

    def close(self, grace_s: float = 5.0) -> None:
        """Ask the worker to exit; kill its process group if it does not within ``grace_s``."""
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(b'{"op": "exit"}\n')
                self._proc.stdin.flush()
                self._proc.stdin.close()
                self._proc.wait(timeout=grace_s)
            except (OSError, subprocess.TimeoutExpired):
                self._kill()
        self._log.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort: never leave a worker behind
        with contextlib.suppress(Exception):
            if not self._closed and self._proc.poll() is None:
                self._kill()

    # -- internals --

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._lines.put(raw.decode("utf-8", "replace"))
        self._lines.put(None)

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10)

    def _tail(self) -> str:
        try:
            self._log.flush()
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _fail(self, category: str, detail: str, payload: dict | None = None) -> WorkerResult:
        if self._proc.poll() is None:
            self._kill()
        self._failed = result = WorkerResult(False, category, detail, self._tail(), payload or {})
        return result

    def _send_line(self, msg: dict[str, Any]) -> str:  # the line's digest: channel.digest
        line = json.dumps(msg) + "\n"
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except OSError:
            pass  # the process died; _receive reports how
        return channel.digest(line)

    def _unrequested_line(self) -> bool:
        """True when a protocol line arrived that no request asked for (a second answer)."""
        try:
            line = self._lines.get_nowait()
        except queue.Empty:
            return False
        if line is None:  # end of output: the next _receive reports how it ended
            self._lines.put(None)
        return line is not None

    def _receive(self, deadline: float, what: str) -> dict[str, Any] | WorkerResult:
        """The next protocol message carrying the expected nonce, or the failure result (hang,
        death, or a line on the channel that the worker did not write: "cheat")."""
        msg = self._receive_any(deadline, what)
        if isinstance(msg, WorkerResult) or msg.get("nonce") == self._nonce:
            return msg
        return self._fail(
            "cheat",
            f"forged protocol answer to {what}: a line on the worker's protocol channel did not "
            "carry the request's nonce (the candidate wrote on the channel)",
        )

    def _receive_any(self, deadline: float, what: str) -> dict[str, Any] | WorkerResult:
        """The next protocol message, or the failure result (hang / death)."""
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                return self._fail(
                    "hang",
                    f"no answer to {what} within {self.spec.timeout_s:g} s; the worker was "
                    "killed (a hang or a far too slow candidate)",
                )
            if line is None:
                try:
                    rc = self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    rc = None
                return self._fail(*classify_exit(rc, self._tail()))
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue  # not a protocol line (cannot happen with fd 1 redirected; be safe)

    def _await_ready(self, deadline: float) -> WorkerResult | None:
        """Wait for the start-up answer: None once ready, else the start-up failure."""
        ready = self._receive(deadline, "start-up")
        if isinstance(ready, WorkerResult):
            return ready
        if not ready.get("ok"):
            return self._fail(ready["category"], ready["detail"])
        self._info = dict(ready.get("info") or {})
        return None

    def _request(self, msg: dict[str, Any]) -> WorkerResult:
        if self._closed or self._failed is not None:
            why = self._failed.detail if self._failed else "it was closed"
            raise WorkerDeadError(
                f"this worker is dead ({why}); start a new Worker for the next request"
            )
        if self._info is None:
            failed = self._await_ready(time.monotonic() + self.spec.timeout_s + STARTUP_GRACE_S)
            if failed is not None:
                return failed
        if self._unrequested_line():
            return self._fail(
                "cheat",
                "forged protocol answer: a second answer line arrived for one request (the "
                "candidate wrote on the worker's protocol channel)",
            )
        self._nonce = secrets.token_hex(16)
        sent = self._send_line({**msg, "nonce": self._nonce})
        answer = self._receive(time.monotonic() + self.spec.timeout_s, f"the {msg['op']} request")
        if isinstance(answer, WorkerResult):
            return answer
        assert self._proc.stdout is not None
        if why := channel.tampered(self._proc.pid, self._proc.stdout.fileno(), answer, sent):
            return self._fail("cheat", why)
        if not answer.get("ok"):
            return self._fail(answer["category"], answer["detail"], answer.get("payload"))
        return WorkerResult(True, "ok", answer.get("detail", ""), self._tail(), answer["payload"])
