"""Constants of a described op that follow the shape: ``kwargs: {group_size: "${G}"}``.

A constant in ``args``, ``kwargs`` or ``reference_kwargs`` is passed as written, the same on
every shape. A text ``"${expr}"`` is arithmetic over the shape's symbols instead (``"${G}"``,
``"${N // 128}"``), evaluated for each case: a group size, a top-k ``k`` or a head count that
differs between shapes. Its symbols must be given by every shape, like a tensor's dimensions.
Parsing needs no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kernel_ratchet.harness.symbolic import evaluate, expression_symbols

_REF = re.compile(r"^\$\{(.+)\}$", re.S)


def expression(value: Any) -> str | None:
    """The expression of a ``"${expr}"`` constant, None for a plain one."""
    m = _REF.match(value) if isinstance(value, str) else None
    return m.group(1).strip() if m else None


def symbols(values: Iterable[Any]) -> set[str]:
    """The symbols the ``"${expr}"`` constants among ``values`` use; ValueError naming one
    that is not arithmetic."""
    out: set[str] = set()
    for v in values:
        expr = expression(v)
        if expr is not None:
            out |= expression_symbols(expr)
    return out


def resolved(value: Any, sym: Mapping[str, int]) -> Any:
    """``value`` for a shape binding ``sym``: a ``"${expr}"`` evaluated (an int where whole)."""
    expr = expression(value)
    if expr is None:
        return value
    if isinstance(sym.get(expr), bool):  # "${causal}": the shape's flag itself
        return sym[expr]
    v = evaluate(expr, sym)
    return int(v) if float(v).is_integer() else v
