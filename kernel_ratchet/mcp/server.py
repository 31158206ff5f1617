"""``ratchet mcp``: the campaign tools served over stdio with the official ``mcp`` SDK.

The SDK is the optional extra ``kernel-ratchet[mcp]`` and is imported only here, when the
server is built; without it :func:`serve` raises RatchetError naming the extra. Every tool is a
thin wrapper over :class:`kernel_ratchet.mcp.tools.RatchetTools`; a RatchetError raised by a
tool comes back to the client as a tool error (``isError``) whose text is the error's class
and message. With mcp 2.x the stdio transport points fd 0 at the null device and fd 1 at
stderr while serving, so the tests and harnesses the tools start cannot touch the wire.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.mcp.tools import TOOL_NAMES, RatchetTools

INSTALL_HINT = "pip install 'kernel-ratchet[mcp]'"
INSTRUCTIONS = (
    "kernel-ratchet drives a disciplined GPU-kernel optimization campaign. The tool decides, "
    "you propose: edit only the campaign's kernel files, one change per round, state the "
    "hypothesis in validate_round. Read campaign_status, query_trend, "
    "list_ineffective_directions, read_best_summary and query_tips before proposing; "
    "run_quick_validation measures the working tree without making a round. A campaign "
    "started with `ratchet init` takes its BASELINE with baseline (known_failure: the bug a "
    "fix round is to fix)."
)


def _sdk() -> tuple[type, type[Exception]]:
    """(server class, tool error class) of the installed SDK: MCPServer (2.x) or FastMCP (1.x)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError

        return MCPServer, ToolError
    except ImportError:
        pass
    try:
        from mcp.server.fastmcp import FastMCP
        from mcp.server.fastmcp.exceptions import ToolError

        return FastMCP, ToolError
    except ImportError:
        raise RatchetError(
            f"the MCP server needs the official `mcp` SDK, an optional extra: {INSTALL_HINT}"
        ) from None


def _as_tool(fn: Callable[..., Any], tool_error: type[Exception]) -> Callable[..., Any]:
    """``fn`` with RatchetError turned into the SDK's tool error (same signature for the SDK)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RatchetError as exc:
            raise tool_error(f"{type(exc).__name__}: {exc}") from exc

    return call


def build_server(profile_path: Path | None = None) -> Any:
    """The MCP server object with every tool of :data:`TOOL_NAMES` registered (not started).

    Raises RatchetError naming the extra when the SDK is missing.
    """
    server_cls, tool_error = _sdk()
    tools = RatchetTools(profile_path)
    server = server_cls("kernel-ratchet", instructions=INSTRUCTIONS)
    for name in TOOL_NAMES:
        fn = getattr(tools, name)
        server.add_tool(_as_tool(fn, tool_error), name=name, description=fn.__doc__)
    return server


def serve(profile_path: Path | None = None) -> None:
    """Serve the tools over stdio until the client closes the connection.

    ``profile_path``: the ratchet.yaml (None: found from the cwd at each call). Logs go to
    stderr; stdout carries the protocol only.
    """
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    server = build_server(profile_path)
    server.run("stdio")


if __name__ == "__main__":
    import sys

    serve(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
