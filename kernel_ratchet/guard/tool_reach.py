"""Tool-reach audit of one round's change: a kernel file has no business with the tool.

The checks run in the candidate's process (see docs/threat-model.md). A kernel file that
imports the tool's own modules (``kernel_ratchet.harness``, ``.campaign``, ``.guard``...,
directly, through ``importlib`` or ``sys.modules``; the adapter API ``harness.adapter`` is
public), or writes what a function runs (``__code__``, defaults, closure cells), or walks the
interpreter's frames and objects (``sys._getframe``, ``gc.get_objects``, ``inspect.stack``), is
reaching for the checker, not computing its op. Imports under ``if TYPE_CHECKING:`` never run
and are not counted. :func:`tool_reach` names what the change *adds* of these (what the
incumbent already has is not counted); such a round is rolled back as a cheat before anything
is measured.

The bundled kernel pack imports ``kernel_ratchet.kernels``: that is the op's own package, not
the tool. Limits: the audit reads the syntax tree and the strings given to ``importlib``; a
name built at run time is not seen (the Sentinel and the spot checks remain).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from kernel_ratchet.guard.syntax import dotted

#: The tool's packages a kernel file may not import (``kernel_ratchet.kernels`` may be).
TOOL_PACKAGES = tuple(
    f"kernel_ratchet.{p}"
    for p in ("harness", "campaign", "guard", "scoring", "report", "profile", "optimizers", "cli")
)
#: What a kernel file may import of the tool: the adapter API its docs name (Shape, SNR_*).
PUBLIC = ("kernel_ratchet.harness.adapter",)
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
_IMPORTERS = frozenset({"importlib.import_module", "import_module", "__import__"})


def _tool_name(text: str) -> bool:
    if any(text == p or text.startswith(p + ".") for p in PUBLIC):
        return False
    return any(text == p or text.startswith(p + ".") for p in TOOL_PACKAGES)


def _import_finding(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        tool = [a.name for a in node.names if _tool_name(a.name)]
        return f"import {tool[0]}" if tool else None
    if isinstance(node, ast.ImportFrom) and node.module:
        if _tool_name(node.module):
            return f"from {node.module} import ..."
        if node.module == "kernel_ratchet":
            tool = [a.name for a in node.names if _tool_name(f"kernel_ratchet.{a.name}")]
            return f"from kernel_ratchet import {', '.join(tool)}" if tool else None
    if isinstance(node, ast.Call) and dotted(node.func) in _IMPORTERS and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _tool_name(arg.value):
            return f"{dotted(node.func)}({arg.value!r})"
    if isinstance(node, ast.Subscript) and dotted(node.value) == "sys.modules":
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and _tool_name(key.value):
            return f"sys.modules[{key.value!r}]"
    return None


def _finding(node: ast.AST) -> str | None:
    found = _import_finding(node)
    if found:
        return found
    # what a function runs, rewritten: reading __code__ or __globals__ is introspection, a
    # write (an assignment, setattr) changes another function's behaviour
    written = isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del))
    if isinstance(node, ast.Attribute) and node.attr in _FUNCTION_PARTS and written:
        return f"a write to a function's {node.attr}"
    if isinstance(node, ast.Call) and dotted(node.func) == "setattr" and len(node.args) > 1:
        name = node.args[1]
        if isinstance(name, ast.Constant) and name.value in _FUNCTION_PARTS:
            return f"a write to a function's {name.value}"
    if isinstance(node, ast.Attribute) and dotted(node) in _INTROSPECTION:
        return dotted(node)
    return None


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and dotted(node.test).endswith("TYPE_CHECKING"):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _findings(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()  # a candidate that does not parse is refused before this audit
    skip = _type_checking_only(tree)
    return {f for node in ast.walk(tree) if id(node) not in skip and (f := _finding(node))}


def tool_reach(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> str | None:
    """Why the change reaches for the tool (a sentence naming what it adds), or None.
    ``before``/``after``: each kernel file's text in the incumbent and the candidate; what the
    incumbent has anywhere among them is not counted (code moved between files is no addition).
    """
    had = set().union(*(_findings(t or "") for t in before.values()))
    for path, text in after.items():
        added = _findings(text or "") - had
        if added:
            return (
                f"{path} adds {', '.join(sorted(added))}: a kernel file may not reach the "
                "tool's own modules, rewrite what a function runs, or walk the interpreter's "
                "frames and objects"
            )
    return None
