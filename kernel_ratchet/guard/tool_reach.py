"""Tool-reach audit of one round's change: a kernel file has no business with the tool.

The checks run in the candidate's process (see docs/threat-model.md). A kernel file that
imports the tool's own modules (``kernel_ratchet.harness``, ``.campaign``, ``.guard``...), or
rewrites what a function runs (``__code__``, defaults, closure cells), or walks the
interpreter's frames and objects (``sys._getframe``, ``gc.get_objects``, ``inspect.stack``), or
loads native code (``ctypes``), is reaching for the checker, not computing its op.
:func:`tool_reach` names what the change *adds* of these (what the incumbent already has is
not counted); such a round is rolled back as a cheat before anything is measured.

The bundled kernel pack imports ``kernel_ratchet.kernels``: that is the op's own package, not
the tool. Limits: the audit reads the syntax tree and the string constants; a name built at run
time is not seen (the Sentinel and the spot checks remain).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from kernel_ratchet.guard.syntax import dotted

#: The tool's packages a kernel file may not name (``kernel_ratchet.kernels`` may be).
TOOL_PACKAGES = tuple(
    f"kernel_ratchet.{p}"
    for p in ("harness", "campaign", "guard", "scoring", "report", "profile", "optimizers", "cli")
)
_FUNCTION_PARTS = frozenset(
    {"__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "cell_contents"}
)
_INTROSPECTION = frozenset(
    {
        "sys._getframe",
        "sys.settrace",
        "sys.setprofile",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "inspect.currentframe",
        "inspect.stack",
        "inspect.getouterframes",
    }
)


def _tool_name(text: str) -> bool:
    return any(text == p or text.startswith(p + ".") for p in TOOL_PACKAGES)


def _finding(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _tool_name(alias.name) or alias.name == "ctypes":
                return f"import {alias.name}"
    if isinstance(node, ast.ImportFrom) and node.module:
        if _tool_name(node.module) or node.module == "ctypes":
            return f"from {node.module} import ..."
        if node.module == "kernel_ratchet":
            tool = [a.name for a in node.names if _tool_name(f"kernel_ratchet.{a.name}")]
            if tool:
                return f"from kernel_ratchet import {', '.join(tool)}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _tool_name(node.value):
        return f"the name {node.value!r}"
    if isinstance(node, ast.Attribute) and node.attr in _FUNCTION_PARTS:
        return f"a function's {node.attr}"
    if isinstance(node, ast.Attribute) and dotted(node) in _INTROSPECTION:
        return dotted(node)
    return None


def _findings(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()  # a candidate that does not parse is refused before this audit
    return {f for node in ast.walk(tree) if (f := _finding(node))}


def tool_reach(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> str | None:
    """Why the change reaches for the tool (a sentence naming the file and what it adds), or
    None. ``before``/``after``: each kernel file's text in the incumbent and the candidate."""
    for path, text in after.items():
        added = _findings(text or "") - _findings(before.get(path) or "")
        if added:
            return (
                f"{path} adds {', '.join(sorted(added))}: a kernel file may not reach the "
                "tool's own modules, rewrite what a function runs, or walk the interpreter's "
                "frames and objects"
            )
    return None
