"""Knobs declared in ``ratchet.yaml`` (``ops.<op>.knobs``): a name, where it lives, its values.

A declaration names a knob by ``name`` in one kernel file (``file``), optionally inside one
function or kernel (``within``). It matches, in that file: a keyword of a kernel launch
(``kernel[grid](..., name=...)``) or a key of an ``@triton.autotune`` config (both already
discovered, see :mod:`.discover`; the declaration then sets their values), or an assignment
``name = ...`` at module level (without ``within``) or inside the function ``within``.
Its ``values`` are literals written in place of the current expression; an empty list keeps
the search away from a discovered knob.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.knobs.model import Computed, Entry, Knob, Offsets, literal


@dataclass(frozen=True)
class KnobDecl:
    """One ``ops.<op>.knobs`` item (validated by :mod:`kernel_ratchet.profile.knobs`)."""

    name: str
    file: str
    values: tuple[Any, ...]
    within: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}" + (f" in {self.within}" if self.within else "")


def current(name: str, node: ast.AST, data: bytes, off: Offsets) -> Knob:
    """The knob ``name`` at the expression ``node``: its literal value, or the expression
    itself (Computed) when it is evaluated at run time."""
    ok, value = literal(node)
    start, end = off.span(node)
    return Knob(name, value if ok else Computed(data[start:end].decode()), (start, end))


def _assignments(tree: ast.Module, within: str | None) -> Iterator[tuple[str, ast.Assign]]:
    """(scope, assignment) of single-name assignments: module level, or inside ``within``."""
    if within is None:
        for node in tree.body:
            if isinstance(node, ast.Assign):
                yield "module", node
        return
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name == within:
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign):
                    yield fn.name, node


def assignment_entries(
    tree: ast.Module, rel: str, decl: KnobDecl, data: bytes, off: Offsets
) -> list[Entry]:
    """One entry per assignment ``decl.name = ...`` that the declaration matches."""
    out = []
    for scope, node in _assignments(tree, decl.within):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        if node.targets[0].id != decl.name:
            continue
        knob = current(decl.name, node.value, data, off)
        key = f"{rel}@{scope}.{decl.name}"
        if any(e.key == key for e in out):
            key += f"#{node.lineno}"
        out.append(Entry(key, (key,), "assignment", {decl.name: knob}))
    return out


def declarations_for(decls: Sequence[KnobDecl], rel: str) -> list[KnobDecl]:
    """The declarations that live in the file ``rel``."""
    return [d for d in decls if d.file == rel]
