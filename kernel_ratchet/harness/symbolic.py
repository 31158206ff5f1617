"""Symbolic shapes, dtypes and work formulas of an op described in ``ratchet.yaml``.

A tensor is written ``"[M, N] bfloat16"``: dimensions are symbols (or integers) bound by each
shape, the dtype a torch dtype name, or ``dtype`` for the shape's own dtype. A work formula is
an arithmetic expression over the symbols (``"2*M*N*K"``), evaluated without ``eval``: only
numbers, symbols, ``+ - * / // % **`` and parentheses are allowed.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernel_ratchet.harness.input_values import Marks, parse_marks

if TYPE_CHECKING:  # torch is imported where a dtype is needed: reading a profile needs none
    import torch

#: dtype names an op description may use (torch's names), and the SPEC section 5 SNR threshold
#: (dB) of each.
DTYPES: Mapping[str, float] = {
    "float32": 80.0,
    "float16": 40.0,
    "bfloat16": 40.0,
    "float8_e4m3fn": 25.0,
    "float8_e5m2": 20.0,
    "int64": math.inf,  # integers and bools: every entry equal (correctness._agreement)
    "int32": math.inf,
    "int8": math.inf,
    "bool": math.inf,
}
#: Short spellings accepted for the names above.
ALIASES: Mapping[str, str] = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "half": "float16",
    "float": "float32",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
}
#: The dtype token that stands for the shape's own dtype.
SHAPE_DTYPE = "dtype"

_TENSOR = re.compile(r"^\s*\[([^\]]*)\]\s*([A-Za-z0-9_]+)\s*(?:<\s*(\S.*?))?\s*$")
_SYMBOL = re.compile(r"^[A-Za-z_]\w*$")
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def dtype_name(name: str) -> str:
    """The canonical dtype name of ``name`` (or an alias); ValueError listing the known ones."""
    canon = ALIASES.get(name, name)
    if canon not in DTYPES and canon != SHAPE_DTYPE:
        known = [*DTYPES, *ALIASES]
        near = difflib.get_close_matches(str(name), known, n=1)
        guess = f"did you mean {near[0]!r}? " if near else ""
        raise ValueError(
            f"unknown dtype {name!r}; {guess}use one of {', '.join(known)} (in an input's text, "
            f"'{SHAPE_DTYPE}' takes each shape's own)"
        )
    return canon


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a canonical or alias name."""
    import torch

    canon = dtype_name(name)
    if canon not in DTYPES:
        raise KeyError(f"{name!r} is not a concrete dtype")
    return getattr(torch, canon)


def default_snr_db(name: str) -> float:
    """The SPEC threshold (dB) of a dtype name."""
    return DTYPES[dtype_name(name)]


@dataclass(frozen=True)
class TensorSpec:
    """One declared tensor: its dimensions (an int, a symbol, or arithmetic over symbols such
    as ``2*N``: a gated activation's [M, 2*N] input), its dtype name and, for an integer input,
    the bound its values are drawn under (``"[N] int64 < V"``: class ids in [0, V))."""

    dims: tuple[str | int, ...]
    dtype: str
    high: str | int | None = None
    #: What the values hold beyond the default draw (:mod:`.input_values`): sentinels of an
    #: integer input (``"[N] int64 < V | -100"``), a scale, filled rows, a layout.
    marks: Marks = Marks()

    @classmethod
    def parse(cls, text: str) -> TensorSpec:
        """Parse ``"[M, 2*N] bfloat16"`` (``"[N] int64 < V | -100"``: an integer input's
        bound and sentinels; other marks after ``|``: :mod:`.input_values`); ValueError
        saying the expected form."""
        head, *extra = text.split("|") if isinstance(text, str) else (text,)
        m = _TENSOR.match(head) if isinstance(head, str) else None
        if m is None:
            raise ValueError(f"{text!r} is not of the form '[M, N] bfloat16'")
        dims: list[str | int] = []
        for part in (p.strip() for p in m.group(1).split(",") if p.strip()):
            if part.isdigit():
                dims.append(int(part))
                continue
            try:
                expression_symbols(part)
            except ValueError:
                raise ValueError(
                    f"dimension {part!r} of {text!r} is neither an int, a symbol nor "
                    "arithmetic over symbols (e.g. 2*N)"
                ) from None
            dims.append(part)
        dtype, high = dtype_name(m.group(2)), _bound(m.group(3), text)
        integer = bool(_INTEGER.match(dtype))
        if high is not None and dtype in DTYPES and not integer:
            raise ValueError(f"{text!r}: a bound '< ...' is for integer inputs only")
        floating = dtype == SHAPE_DTYPE or dtype.startswith("float")
        return cls(tuple(dims), dtype, high, parse_marks(extra, text, integer, floating))

    @property
    def sentinels(self) -> tuple[int, ...]:
        """Values an integer input also takes (``| -100``), one entry in eight."""
        return self.marks.sentinels

    @property
    def integer(self) -> bool:
        """Whether the declared dtype is an integer one (a bound or sentinels may apply)."""
        return bool(_INTEGER.match(self.dtype))

    @property
    def symbols(self) -> set[str]:
        exprs = [d for d in (*self.dims, self.high) if isinstance(d, str)]
        return set().union(*(expression_symbols(d) for d in exprs))

    def value_high(self, symbols: Mapping[str, int]) -> int | None:
        """The exclusive upper bound of an integer input's values for bound ``symbols``, or
        None where none was declared; ValueError when it is not at least 1."""
        if self.high is None:
            return None
        high = self.high if isinstance(self.high, int) else _dim(self.high, symbols)
        if high < 1:
            raise ValueError(f"the values' bound {self.high!r} is {high} here: nothing to draw")
        return high

    def size(self, symbols: Mapping[str, int]) -> tuple[int, ...]:
        """The concrete size for bound ``symbols`` (KeyError names an unbound one; ValueError
        for a dimension that is not a non-negative whole number)."""
        return tuple(d if isinstance(d, int) else _dim(d, symbols) for d in self.dims)

    def resolved_dtype(self, shape_dtype: str | None) -> str:
        """This tensor's dtype name; ``dtype`` takes the shape's (ValueError if it has none)."""
        if self.dtype != SHAPE_DTYPE:
            return self.dtype
        if shape_dtype is None:
            raise ValueError("a tensor declared with dtype 'dtype' needs shapes that give a dtype")
        return dtype_name(shape_dtype)


_INTEGER = re.compile(r"^u?int\d+$")


def _bound(text: str | None, whole: str) -> str | int | None:
    """The ``< EXPR`` bound of a tensor's text: an int, an expression over symbols, or None."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    try:
        expression_symbols(text)
    except ValueError:
        raise ValueError(
            f"the bound {text!r} of {whole!r} is neither an int nor arithmetic over symbols"
        ) from None
    return text


def _dim(expr: str, symbols: Mapping[str, int]) -> int:
    value = evaluate(expr, symbols) if not _SYMBOL.match(expr) else symbols[expr]
    if value != int(value) or value < 0:
        raise ValueError(f"dimension {expr!r} is {value} here, not a non-negative whole number")
    return int(value)


def expression_symbols(expr: str) -> set[str]:
    """The symbols an expression uses; ValueError when it is not plain arithmetic."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"{expr!r} is not an arithmetic expression ({exc.msg})") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd))
        ok = ok or type(node) in _BINARY
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant):
            ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        elif not ok and not isinstance(node, ast.Load):
            raise ValueError(f"{expr!r}: only numbers, symbols, + - * / // % ** and ( )")
    return names


def evaluate(expr: str, symbols: Mapping[str, float]) -> float:
    """The value of an arithmetic expression over ``symbols`` (checked by expression_symbols)."""
    expression_symbols(expr)

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return symbols[node.id]
        if isinstance(node, ast.UnaryOp):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        assert isinstance(node, ast.BinOp)
        return _BINARY[type(node.op)](ev(node.left), ev(node.right))

    return float(ev(ast.parse(expr, mode="eval")))
