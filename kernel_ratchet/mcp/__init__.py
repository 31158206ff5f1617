"""The MCP server: campaign tools for an editor agent, a thin layer over the campaign API.

``kernel_ratchet.mcp.tools`` holds the tool functions (no SDK needed); ``server`` registers
them with the official ``mcp`` SDK (the optional extra ``kernel-ratchet[mcp]``).
"""
