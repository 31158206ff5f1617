"""Serving a folder of dashboard pages on localhost (the standard library's HTTP server)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass


def make_server(folder: Path, port: int) -> ThreadingHTTPServer:
    """An HTTP server of ``folder`` on 127.0.0.1:``port`` (0: any free port), not started."""
    handler = functools.partial(_Quiet, directory=str(folder))
    return ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve_folder(folder: Path, port: int, say: Callable[[str], None]) -> None:
    """Serve ``folder`` until Ctrl+C (which ends it quietly)."""
    server = make_server(folder, port)
    say(f"serving {folder} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl+C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say("stopped")
    finally:
        server.server_close()
