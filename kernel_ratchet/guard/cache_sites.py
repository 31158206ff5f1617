"""Where a function's syntax reaches state by key: the lookup sites the cache scan reads.

:func:`key_sites` finds subscripts, ``.get``-style lookups, ``in`` tests, identity/equality
tests against state and equality tests against a loop variable that iterates over state (a
list searched by content); :func:`tensor_attr_sites` finds attributes stored on tensors.
"""

from __future__ import annotations

import ast

from kernel_ratchet.guard.keys import KeyReader
from kernel_ratchet.guard.syntax import short_name

_NOT_CACHE_ATTRS = {"data", "grad", "requires_grad", "retains_grad"}
_NO_ATTR_CACHE = {"self", "cls", "ctx"}
_LOOKUPS = {"get", "setdefault", "pop", "__getitem__", "__setitem__", "__contains__"}


def fixed_slot(key: ast.expr) -> bool:
    """A constant index or a slice (``_LAST[0]``, ``CONFIGS[:3]``): a fixed slot, not a key."""
    if isinstance(key, ast.UnaryOp):
        key = key.operand
    return isinstance(key, (ast.Constant, ast.Slice))


def _refers_state(node: ast.expr, state: set[str]) -> bool:
    return any(_state_name(n) in state for n in ast.walk(node))


def _state_name(n: ast.AST) -> str | None:
    """The name ``n`` reads: ``x``, ``o.x``, or ``getattr(o, "x"[, default])``."""
    if isinstance(n, (ast.Name, ast.Attribute)):
        return short_name(n)
    if isinstance(n, ast.Call) and short_name(n.func) == "getattr" and len(n.args) >= 2:
        name = n.args[1]
        return (
            name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
        )
    return None


def _searched(nodes: list[ast.AST], state: set[str]) -> dict[str, str]:
    """Loop variables bound by iterating over state (``for k, out in seen:``), mapped to the
    container's text: comparing one with ``==``/``is`` is a lookup by search."""
    out: dict[str, str] = {}
    for n in nodes:
        if isinstance(n, (ast.For, ast.comprehension)) and _refers_state(n.iter, state):
            for t in ast.walk(n.target):
                if isinstance(t, ast.Name):
                    out[t.id] = ast.unparse(n.iter)
    return out


def _search_site(n: ast.Compare, searched: dict[str, str]) -> tuple[str, ast.expr] | None:
    left, right = n.left, n.comparators[0]
    for mine, other in ((left, right), (right, left)):
        own = isinstance(mine, ast.Name) and mine.id in searched
        if isinstance(other, ast.Name) and other.id in searched and not own:
            return searched[other.id], mine
    return None


def key_sites(nodes: list[ast.AST], state: set[str]) -> list[tuple[ast.AST, str, ast.expr, str]]:
    """(node, container, key expression, kind) of every keyed access to state in ``nodes``."""
    out = []
    searched = _searched(nodes, state)
    for n in nodes:
        if isinstance(n, ast.Subscript) and short_name(n.value) in state:
            out.append((n, ast.unparse(n.value), n.slice, "container"))
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in _LOOKUPS
            and short_name(n.func.value) in state
            and n.args
        ):
            out.append((n, ast.unparse(n.func.value), n.args[0], "container"))
        elif isinstance(n, ast.Compare) and len(n.ops) == 1:
            left, right, op = n.left, n.comparators[0], n.ops[0]
            if isinstance(op, (ast.In, ast.NotIn)) and short_name(right) in state:
                out.append((n, ast.unparse(right), left, "container"))
            elif isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
                site = _search_site(n, searched)
                if site is not None:
                    out.append((n, site[0], site[1], "search"))
                    continue
                for mine, other in ((left, right), (right, left)):
                    if _refers_state(other, state) and not _refers_state(mine, state):
                        out.append((n, ast.unparse(other), mine, "compare"))
    return out


def tensor_attr_sites(nodes: list[ast.AST], reader: KeyReader) -> list[tuple[ast.AST, ast.expr]]:
    out = []
    for n in nodes:
        target = None
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute) and t.attr not in _NOT_CACHE_ATTRS:
                    target = t.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
            target = n.args[0] if n.args else None
        if (
            isinstance(target, ast.Name)
            and target.id not in _NO_ATTR_CACHE
            and reader.role(target)[0] is not None
        ):
            out.append((n, target))
    return out
