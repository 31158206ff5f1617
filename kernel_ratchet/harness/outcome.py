"""How a failing candidate's outcome is named: the category and one readable sentence for an
exception raised inside the worker (:func:`classify_exception`) or for a worker process that
died without answering (:func:`classify_exit`)."""

from __future__ import annotations

import os
import signal

from kernel_ratchet.harness.channel import CHANNEL_REPLACED
from kernel_ratchet.harness.interpreter import hint

_ILLEGAL = ("illegal memory access", "misaligned address", "illegal address")
_COMPILE_TYPES = {
    "CompilationError",
    "CompileTimeAssertionFailure",
    "UnsupportedLanguageConstruct",
    "OutOfResources",
    "PTXASError",
    "InductorError",
    "BackendCompilerFailed",
    "SyntaxError",
    "IndentationError",
    "ImportError",
    "ModuleNotFoundError",
}


def exception_line(exc: BaseException, limit: int = 400) -> str:
    """``Type: first line of the message``; for an exception without a message (a bare
    ``assert``), where it was raised: ``AssertionError (raised at kernel.py:42)``."""
    lines = str(exc).strip().splitlines()
    if lines:
        return f"{type(exc).__name__}: {lines[0]}"[:limit]
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" (raised at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"
    return f"{type(exc).__name__}{where if tb is not None else ''}"[:limit]


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """(category, detail) for an exception raised by the op inside a worker (either side of a
    paired A/B: the detail names neither, the failure's sentence says which side it was)."""
    names = {k.__name__ for k in type(exc).__mro__}
    what = exception_line(exc)
    low = str(exc).lower()
    if "CheatDetected" in names:
        return "cheat", str(exc)
    if "WrongOutput" in names:
        return "wrong", f"outputs disagree with the reference: {exc}"
    if "OutOfMemoryError" in names or "out of memory" in low:
        return "oom", f"the op ran out of device memory ({what})"
    if any(s in low for s in _ILLEGAL):
        return "illegal_memory", f"the op made an illegal memory access ({what})"
    if names & _COMPILE_TYPES:
        return "compile", f"the op failed to compile or import ({what})"
    todo = hint(str(exc))
    return "crash", f"the op raised an exception ({what})" + (f"; {todo}" if todo else "")


def classify_exit(returncode: int | None, log_tail: str) -> tuple[str, str]:
    """(category, detail) for a worker process that died without answering."""
    if returncode == CHANNEL_REPLACED:
        return "cheat", (
            "the worker's protocol channel was replaced while it ran (its descriptor pointed "
            "at another file, as a relay that rewrites answers does); the worker ended itself"
        )
    low = log_tail.lower()
    if any(s in low for s in _ILLEGAL):
        return "illegal_memory", (
            f"the worker died (status {returncode}) after an illegal memory access (see log)"
        )
    if "out of memory" in low or "outofmemoryerror" in low:
        return "oom", f"the worker died (status {returncode}) out of memory (see log)"
    if returncode is not None and returncode < 0:
        try:
            sig = signal.Signals(-returncode).name
        except ValueError:
            sig = f"signal {-returncode}"
        extra = " (the host OOM killer or an external kill)" if sig == "SIGKILL" else ""
        return "crash", f"the worker was killed by {sig}{extra} in the middle of a request"
    return "crash", (
        f"the worker exited with status {returncode} in the middle of a request "
        "(the candidate called exit or the interpreter failed; see log)"
    )
