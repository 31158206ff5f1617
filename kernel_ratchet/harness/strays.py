"""Processes that escaped a worker: code of a round running beside the paired A/B.

A worker's own children are checked inside the worker (:mod:`.process_guard`), and the idle
side of a paired A/B is stopped as a process group (:func:`.pinning.stopped`). A process that
leaves both, started with ``setsid`` (or forked twice) by code of the round, keeps running
outside the worker's group: it can stop, slow or load the incumbent's worker exactly while
the incumbent is timed, and fake a gain. On Linux the driver makes itself a child subreaper
(``prctl(PR_SET_CHILD_SUBREAPER)``) while a round runs, so such a process, once orphaned,
becomes the driver's child instead of init's. :class:`Watch` lists the driver's children that
it did not have when the round started and did not start itself (:func:`own`: its workers and
harness steps): every such process (running, or already exited) is one that escaped them.
Elsewhere (no ``prctl``, no ``/proc``) it finds nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterable, Iterator

#: ``prctl`` options: orphaned descendants become this process's children; whether they do.
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
#: The detail of an A/B that found processes escaped from its workers.
ESCAPED = (
    "processes outside both workers ran beside the timing (started with setsid or forked "
    "twice by code of the round, they escape the idle worker's stop and could slow the other "
    "side), killed; nothing this A/B timed can be credited: "
)


def prctl(option: int, arg: object) -> bool:
    """``prctl(option, arg)`` succeeded; False where the platform has none."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (``on``) or stop being one; False where the
    platform cannot."""
    return prctl(PR_SET_CHILD_SUBREAPER, int(on))


def _is_subreaper() -> bool:
    import ctypes

    flag = ctypes.c_int(0)
    return prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) and bool(flag.value)


def children(pid: int | str = "self") -> set[int]:
    """A process's children (any thread's; default this process's), exited ones not yet
    reaped included."""
    kids: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                kids.update(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return kids


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, theirs, ...), whatever their process group."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for kid in children(todo.pop()) - found:
            found.add(kid)
            todo.append(kid)
    return found


def state_and_cmdline(pid: int) -> tuple[str, str]:
    """A process's state letter (``Z``: exited, not reaped) and command line; ``("gone",
    "")`` when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except (OSError, IndexError):
        return "gone", ""
    return state, cmd


def describe(pid: int) -> str:
    """``pid N (command line)``, or ``pid N (exited)``."""
    state, cmd = state_and_cmdline(pid)
    return f"pid {pid} ({'exited' if state in ('Z', 'X', 'gone') else cmd[:100] or '?'})"


def end(pids: Iterable[int]) -> None:
    """Kill ``pids`` and reap them."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


#: Children this process started on purpose (workers, harness steps): never escapes.
_OWN: set[int] = set()
#: The watches open now, innermost last.
_OPEN: list[Watch] = []


def own(pid: int) -> None:
    """Note ``pid`` as a child this process started itself (a worker, a harness step)."""
    _OWN.add(pid)


class Watch:
    """The escaped processes of a round or an A/B (context manager: subreaper while open).

    Open it before any code of the round runs: a process that escapes before the watch opens
    is orphaned to init, out of sight. Children started through :func:`own` and those this
    process had when the watch opened are not escapes."""

    def __init__(self) -> None:
        self._before: set[int] = set()
        self._was_on = False
        self.found: list[str] = []

    def __enter__(self) -> Watch:
        self._was_on = _is_subreaper()
        set_subreaper(True)
        self._before = children()
        _OWN.intersection_update(self._before)  # a finished child's pid may come back
        _OPEN.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _OPEN.remove(self)
        self.check()  # escaped processes do not outlive the watch, found or not
        if not self._was_on:
            set_subreaper(False)

    def check(self) -> str:
        """The escaped processes found now, in a sentence (:data:`ESCAPED`), each killed and
        reaped and added to :attr:`found`; "" when none."""
        new = sorted(children() - self._before - _OWN)
        if not new:
            return ""
        seen = [describe(p) for p in new]
        end(new)
        self.found += seen
        return ESCAPED + "; ".join(seen)


@contextlib.contextmanager
def joined() -> Iterator[Watch]:
    """The innermost open watch (a round's, opened before its workers started), or a new one
    for the duration."""
    if _OPEN:
        yield _OPEN[-1]
        return
    with Watch() as w:
        yield w
