"""Symbolic shapes, dtypes and work formulas of an op described in ``ratchet.yaml``.

A tensor is written ``"[M, N] bfloat16"``: dimensions are symbols (or integers) bound by each
shape, the dtype a torch dtype name, or ``dtype`` for the shape's own dtype. A work formula is
an arithmetic expression over the symbols (``"2*M*N*K"``), evaluated without ``eval``: only
numbers, symbols, ``+ - * / // % **`` and parentheses are allowed.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    "int64": 80.0,
    "int32": 80.0,
    "int8": 80.0,
    "bool": 80.0,
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

_TENSOR = re.compile(r"^\s*\[([^\]]*)\]\s*([A-Za-z0-9_]+)\s*$")
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
        known = ", ".join([*DTYPES, *ALIASES])
        raise ValueError(f"unknown dtype {name!r}; use one of {known} (or 'dtype': the shape's)")
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
    as ``2*N``: a gated activation's [M, 2*N] input) and its dtype name."""

    dims: tuple[str | int, ...]
    dtype: str

    @classmethod
    def parse(cls, text: str) -> TensorSpec:
        """Parse ``"[M, 2*N] bfloat16"``; ValueError saying the expected form."""
        m = _TENSOR.match(text) if isinstance(text, str) else None
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
        return cls(tuple(dims), dtype_name(m.group(2)))

    @property
    def symbols(self) -> set[str]:
        return set().union(*(expression_symbols(d) for d in self.dims if isinstance(d, str)))

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
