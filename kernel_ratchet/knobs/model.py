"""What every knob source shares: a knob, an entry (the knobs of one site), byte offsets.

A knob's ``value`` is a literal (``int``, ``float``, ``bool``, ``str``), a :class:`Computed`
expression (a launch argument computed at run time, e.g. ``num_warps`` from a helper), or a
scale factor of such an expression (``base`` is then the expression's source: the value ``2.0``
is written ``base * 2``, ``0.5`` is ``max(base // 2, 1)``, ``1.0`` is ``base`` itself, so a move
and its reverse restore the file byte for byte). A scaled value stays in the range the hardware
takes: never below 1, and ``num_warps`` never above 32 (``min(base * 2, 32)``: 1,024 threads).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.errors import RatchetError

LITERALS = (bool, int, float, str)
#: The largest value a scaled launch argument may take (NVIDIA: 1,024 threads per program).
UPPER = {"num_warps": 32}


class KnobError(RatchetError):
    """A kernel or tunables file cannot be read for knobs, or a knob cannot be rewritten."""


@dataclass(frozen=True)
class Computed:
    """The current value of a knob whose source is an expression evaluated at run time."""

    source: str

    def __repr__(self) -> str:
        return self.source


@dataclass(frozen=True)
class Knob:
    """One knob of one entry: its current value and where its expression sits (None: a
    default, appended as ``name=value`` when moved)."""

    name: str
    value: Any
    span: tuple[int, int] | None  # byte offsets of the expression in the file
    base: str | None = None  # the computed expression a scale factor multiplies

    def render(self, value: Any) -> str:
        """The source text that gives this knob ``value``."""
        if isinstance(value, Computed):
            return value.source
        if self.base is None:
            return repr(value)
        return scaled(self.base, value, UPPER.get(self.name))


@dataclass(frozen=True)
class Entry:
    """The knobs of one site: a config call in a dict literal, the module constants, one
    ``@triton.autotune`` config or one kernel launch."""

    key: str  # "CONFIGS/bf16/large", "module", "pkg/k.py@_fwd.configs[0]", ...
    path: tuple[str, ...]  # dict keys after the variable name: ("bf16", "large")
    cls: str
    knobs: dict[str, Knob]
    insert_at: int | None = None  # byte offset where a new keyword argument goes
    fields_known: bool = False
    scope: tuple[str, ...] = ()  # the function and kernel names a site lives in

    def runs_with(self, launched: set[str]) -> bool:
        """Whether this site runs when the op launches the kernels ``launched``: it is outside
        any kernel's scope (module constants, tables) or in the scope of one of them."""
        return not self.scope or bool(launched & set(self.scope))

    @property
    def kind(self) -> str | None:
        return self.path[0] if len(self.path) > 1 else None

    @property
    def bucket(self) -> str | None:
        return self.path[-1] if self.path else None


def scaled(base: str, factor: float, upper: int | None = None) -> str:
    """``base`` times ``factor`` as integer source: ``base * k`` (``min(base * k, upper)``
    with a bound), ``max(base // k, 1)`` or ``base``."""
    if factor == 1:
        return base
    try:
        node = ast.parse(base, mode="eval").body
    except SyntaxError:
        node = None
    if not isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant):
        base = f"({base})"
    if factor > 1:
        up = f"{base} * {round(factor)}"
        return f"min({up}, {upper})" if upper else up
    return f"max({base} // {round(1 / factor)}, 1)"


def factor_of(node: ast.AST) -> tuple[ast.AST, float]:
    """(the expression, the factor) of ``e * k`` / ``e // k`` (k an int > 1), also inside the
    bounds :func:`scaled` writes (``min(e * k, c)``, ``max(e // k, 1)``), else (node, 1)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("min", "max")
        and len(node.args) == 2
        and not node.keywords
        and isinstance(node.args[1], ast.Constant)
        and type(node.args[1].value) is int
    ):
        expr, factor = _plain_factor(node.args[0])
        if factor != 1 and (factor > 1) == (node.func.id == "min"):
            return expr, factor
    return _plain_factor(node)


def _plain_factor(node: ast.AST) -> tuple[ast.AST, float]:
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult | ast.FloorDiv)
        and isinstance(node.right, ast.Constant)
        and type(node.right.value) is int
        and node.right.value > 1
    ):
        k = node.right.value
        return node.left, float(k) if isinstance(node.op, ast.Mult) else 1.0 / k
    return node, 1.0


def literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a plain literal, else (False, None)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    if isinstance(value, list):  # e.g. the candidates an autotuner picks from
        return bool(value) and all(isinstance(v, LITERALS) for v in value), value
    return isinstance(value, LITERALS), value


def neighbours(value: Any) -> list[Any]:
    """Power-of-two neighbours of a positive int, the flip of a bool, else nothing."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int) and value >= 1:
        below = 1 << ((value - 1).bit_length() - 1) if value > 1 else 0  # largest 2^k < value
        above = 1 << value.bit_length()  # smallest 2^k > value
        return [v for v in (below, above) if v >= 1]
    return []


def parse_python(text: str, what: str) -> ast.Module:
    """``ast.parse`` with a KnobError naming ``what`` when the text is not valid Python."""
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise KnobError(f"{what} does not parse: {exc}") from exc


class Offsets:
    """Maps ast (line, utf-8 byte column) positions to byte offsets of the whole file."""

    def __init__(self, data: bytes) -> None:
        self.starts = [0]
        for i, b in enumerate(data):
            if b == 0x0A:
                self.starts.append(i + 1)

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.at(node.lineno, node.col_offset),
            self.at(node.end_lineno, node.end_col_offset),
        )
