"""The JIT functions of a kernel file, the branches around each line, and their conditions.

A line of a ``@triton.jit`` (or ``@gluon.jit``) function runs only where every ``if`` around it
goes its way. Where those conditions name the function's own parameters (``if WRITE_QT:``,
``if MODE == 2 and not SPLIT:``), a launch's argument values decide them: :func:`evaluate`
computes such a condition in three values (true, false, or :data:`UNKNOWN` where it names
anything else), so a condition is only called false where the arguments make it so.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.guard.syntax import is_jit, jit_aliases

#: A condition's value where the arguments do not decide it.
UNKNOWN: Any = object()

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}


@dataclass(frozen=True)
class Branch:
    """One ``if`` a line sits under: its condition and whether the line is in its body (True)
    or its ``else`` (False)."""

    test: ast.expr
    body: bool

    def text(self) -> str:
        cond = ast.unparse(self.test)
        return f"`if {cond}`" if self.body else f"the else of `if {cond}`"


def jit_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """Every JIT function of a module, nested ones included."""
    aliases = jit_aliases(tree)
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and is_jit(n, aliases)]


def enclosing(funcs: list[ast.FunctionDef], line: int) -> ast.FunctionDef | None:
    """The innermost JIT function whose lines (decorators included) hold ``line``."""
    best = None
    for fn in funcs:
        first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        inside = first <= line <= (fn.end_lineno or fn.lineno)
        if inside and (best is None or first >= best.lineno):
            best = fn
    return best


def branches(fn: ast.FunctionDef, line: int) -> list[Branch]:
    """The ``if`` statements of ``fn`` that ``line`` sits under, outermost first."""
    out: list[Branch] = []
    body: list[ast.stmt] = fn.body
    while True:
        stmt = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if stmt is None:
            return out
        if isinstance(stmt, ast.If):
            if stmt.body and stmt.body[0].lineno <= line <= (stmt.body[-1].end_lineno or 0):
                out.append(Branch(stmt.test, True))
                body = stmt.body
                continue
            if stmt.orelse and stmt.orelse[0].lineno <= line:
                out.append(Branch(stmt.test, False))
                body = stmt.orelse
                continue
            return out  # the condition's own line: reached with the if
        inner = [getattr(stmt, k, None) for k in ("body", "orelse", "finalbody", "handlers")]
        nested = [s for part in inner if isinstance(part, list) for s in part]
        if not nested or not any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in nested):
            return out
        body = nested


def evaluate(node: ast.expr, env: Mapping[str, Any]) -> Any:
    """The value of ``node`` with the names ``env`` holds; :data:`UNKNOWN` where anything else
    (a name it lacks, a call, an attribute, an error) decides it."""
    try:
        return _eval(node, env)
    except Exception:  # a comparison of unlike types, a division by zero: undecided
        return UNKNOWN


def _eval(node: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, UNKNOWN)
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, env)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if v is UNKNOWN:
            return UNKNOWN
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else UNKNOWN
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, env)
            if left is UNKNOWN or right is UNKNOWN or type(op) not in _COMPARE:
                return UNKNOWN
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _eval(node.left, env), _eval(node.right, env)
        return UNKNOWN if a is UNKNOWN or b is UNKNOWN else _BINARY[type(node.op)](a, b)
    if isinstance(node, ast.Tuple):
        items = [_eval(e, env) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
    return UNKNOWN


def _bool_op(node: ast.BoolOp, env: Mapping[str, Any]) -> Any:
    """``and`` / ``or`` in three values: a false term decides ``and``, a true one ``or``."""
    decided = isinstance(node.op, ast.Or)  # the term value that settles the whole
    unknown = False
    for term in node.values:
        v = _eval(term, env)
        if v is UNKNOWN:
            unknown = True
        elif bool(v) is decided:
            return decided
    return UNKNOWN if unknown else not decided
