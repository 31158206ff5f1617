"""The project's Python files a set of kernel files imports, directly or through each other.

An op's ``kernel_source`` names the files a round may change, not everything its kernels run: a
grouped GEMM may import the dense kernel's pipeline helpers from a file only the dense op lists.
:func:`imported_files` follows the ``import`` and ``from ... import`` statements of the given
files (relative ones too) to files under the project root, and theirs in turn, so that a change
to a helper is known to reach every op that runs it. Only what the syntax tree says is followed:
an import built at run time (``importlib`` with a computed name) is not seen, nor is a module
outside the root (an installed package).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from pathlib import Path


def imported_files(root: Path, files: Iterable[str]) -> set[str]:
    """Paths (relative to ``root``, POSIX) of the project's ``.py`` files that ``files``
    import, transitively, ``files`` themselves not included unless imported. A file that is
    missing or does not parse imports nothing."""
    root = Path(root).resolve()
    start = [Path(f) for f in files if f.endswith(".py")]
    seen: set[Path] = set()
    stack = [root / f for f in start]
    found: set[Path] = set()
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for dep in _imports_of(root, path):
            found.add(dep)
            stack.append(dep)
    return {p.relative_to(root).as_posix() for p in found}


def _imports_of(root: Path, path: Path) -> frozenset[Path]:
    try:
        stat = path.stat()
    except OSError:
        return frozenset()
    return _parsed_imports(root, path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4096)
def _parsed_imports(root: Path, path: Path, mtime_ns: int, size: int) -> frozenset[Path]:
    """The project files ``path`` imports, read once per version of the file (its
    modification time and size are in the key)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return frozenset()
    out: set[Path] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out |= _module_files(root, alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            base = _base(root, path, node)
            if base is None:
                continue
            out |= _module_files(root, base)
            for alias in node.names:  # ``from pkg import mod``: a submodule, when there is one
                if alias.name != "*":
                    out |= _module_files(root, [*base, alias.name], package_only=True)
    return frozenset(out)


def _base(root: Path, path: Path, node: ast.ImportFrom) -> list[str] | None:
    """The module ``node`` imports from, as path parts from ``root``; None above the root."""
    parts = node.module.split(".") if node.module else []
    if not node.level:
        return parts
    here = path.parent.relative_to(root).parts
    if node.level - 1 > len(here):
        return None
    return [*here[: len(here) - (node.level - 1)], *parts]


def _module_files(root: Path, parts: list[str], package_only: bool = False) -> set[Path]:
    """The file of module ``parts`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``), and the
    ``__init__.py`` of each package on the way, which Python runs first. ``package_only``: the
    module only (a name imported from a package may be a function, not a file)."""
    if not parts or not all(p.isidentifier() for p in parts):
        return set()
    out: set[Path] = set()
    for candidate in (
        root.joinpath(*parts).with_suffix(".py"),
        root.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            out.add(candidate)
    if out and not package_only:
        for i in range(1, len(parts)):
            init = root.joinpath(*parts[:i], "__init__.py")
            if init.is_file():
                out.add(init)
    return out
