"""Whether the project's functions in memory are the ones their files hold.

The import watch (:mod:`.import_watch`) records each project module's functions as its import
ends; what it records is what was executed. A candidate that writes another ``reference.py``,
imports it and puts the file back (its text and its modification time) leaves a wrong reference
in memory and a clean tree on disk: the scope check sees nothing, and the import watch recorded
the swapped module as the original. :class:`FileCode` compiles each recorded function's file
as it stands and compares the function's code object with the one compiled from its lines
(bytecode, constants, names; nested functions too). A function whose file holds other code, or
no function at its name and line, is named.

A file edited while the worker runs is named too (its code in memory is not the file's): the
round is not judged on code that no file holds. A function built by ``exec`` from text (its
code names no file) is named where its module's file defines a function of that name (a
module generating its helpers, which its file does not define, is left alone).
"""

from __future__ import annotations

import hashlib
import os
import types
from collections.abc import Iterable
from typing import Any

_Key = tuple[str, int]  # (qualified name, first line)


def fingerprint(code: types.CodeType) -> tuple[Any, ...]:
    """What a code object computes: its bytecode, names and constants, nested code objects
    by their own fingerprint."""
    return (code.co_code, code.co_names, tuple(_const(c) for c in code.co_consts))


def _const(c: Any) -> Any:
    if isinstance(c, types.CodeType):
        return fingerprint(c)
    if isinstance(c, frozenset):  # its order follows the hashes: compare the elements
        return ("frozenset", tuple(sorted(map(repr, c))))
    return (type(c).__name__, repr(c))


def _defined(code: types.CodeType, out: dict[_Key, set[tuple[Any, ...]]]) -> None:
    """Every function compiled in ``code``, nested ones included (two lambdas of one line
    share a key)."""
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.setdefault((_qualname(c), c.co_firstlineno), set()).add(fingerprint(c))
            _defined(c, out)


def _qualname(code: types.CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)


class FileCode:
    """Compiles project files as they stand (cached by their bytes) and compares functions."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[str, dict[_Key, set[tuple[Any, ...]]] | None]] = {}

    def _functions(self, path: str) -> dict[_Key, set[tuple[Any, ...]]] | None:
        """The functions compiled from ``path`` now, by (qualified name, line); None where the
        file cannot be read or compiled."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        sha = hashlib.sha256(data).hexdigest()
        hit = self._cache.get(path)
        if hit is not None and hit[0] == sha:
            return hit[1]
        try:
            module = compile(data, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            found = None
        else:
            found = {}
            _defined(module, found)
        self._cache[path] = (sha, found)
        return found

    def unlike(
        self, functions: Iterable[tuple[str, types.CodeType, str | None]], is_project
    ) -> list[str]:
        """Labels of the ``(label, code, home)`` triples whose code is not what their file
        compiles to now, or that were built from text (``exec``: the code names no file)
        where their module's file ``home`` defines a function of that name;
        ``is_project(path)`` says which files are the project's."""
        found = []
        read: dict[str, Any] = {}  # each file read, hashed and judged once per call

        def functions_of(path: str) -> dict[_Key, set[tuple[Any, ...]]] | None:
            if path not in read:
                read[path] = self._functions(path)
            return read[path]

        project: dict[str, bool] = {}
        for label, code, home in functions:
            path = code.co_filename
            if not os.path.isabs(path):
                defined = functions_of(home) if home and os.path.isfile(home) else None
                if defined and any(q == _qualname(code) for q, _ in defined):
                    found.append(f"{label} (built from text no file holds: {path})")
                continue
            if path not in project:
                project[path] = bool(is_project(path)) and os.path.isfile(path)
            if not project[path]:
                continue
            compiled = functions_of(path)
            if compiled is None:
                found.append(f"{label} (its file no longer compiles)")
                continue
            if fingerprint(code) not in compiled.get((_qualname(code), code.co_firstlineno), ()):
                found.append(f"{label} (not the code of {os.path.basename(path)})")
        return found
