"""Red-team candidates that relay the worker's protocol channels through pipes of their own,
rewriting the answers' timings or the requests' problems on the way. Imported through
:mod:`tests.harness.redteam_candidates`."""

from __future__ import annotations

import contextlib
import os

from tests.harness.redteam_base import TinyGemm


def _relay(read_fd: int, out_fd: int) -> None:
    """Pass each answer line on, its timings scaled by 0.7."""
    import json as _json

    with os.fdopen(read_fd, "rb") as src:
        for line in src:
            try:
                msg = _json.loads(line)
                payload = msg.get("payload") or {}
                if "median_ms" in payload:
                    payload["median_ms"] *= 0.7
                line = (_json.dumps(msg) + "\n").encode()
            except ValueError:
                pass
            os.write(out_fd, line)


class ChannelRelay(TinyGemm):
    """Points the worker's answer descriptor at a pipe of its own, from a thread started
    below ``threading``, and relays every answer with faster timings."""

    def __init__(self) -> None:
        import _thread
        import stat

        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd <= 2:
                continue
            with contextlib.suppress(OSError):
                mode = os.fstat(fd).st_mode
                if stat.S_ISFIFO(mode) and os.readlink(f"/proc/self/fd/{fd}") != os.readlink(
                    "/proc/self/fd/0"
                ):
                    keep = os.dup(fd)
                    r, w = os.pipe()
                    os.dup2(w, fd)
                    os.close(w)
                    _thread.start_new_thread(_relay, (r, keep))
                    return


def _shrink_requests(src_fd: int, out_fd: int) -> None:
    """Pass each request line on, a timing request's problem cut to half its rows."""
    import json as _json

    with os.fdopen(src_fd, "rb") as src:
        for line in src:
            try:
                msg = _json.loads(line)
                if msg.get("op") == "time":
                    msg["shape"]["M"] = max(1, msg["shape"]["M"] // 2)
                    line = (_json.dumps(msg) + "\n").encode()
            except (ValueError, KeyError, TypeError):
                pass
            os.write(out_fd, line)


class RequestRelay(TinyGemm):
    """Points the worker's input (descriptor 0) at a pipe of its own and relays each request,
    timing requests with a smaller problem, from a thread started below ``threading``."""

    def __init__(self) -> None:
        import _thread

        src = os.dup(0)
        r, w = os.pipe()
        os.dup2(r, 0)
        os.close(r)
        _thread.start_new_thread(_shrink_requests, (src, w))
