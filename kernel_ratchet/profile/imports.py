"""The project's Python files that importing a module runs, read by ``ast``.

:func:`reach` follows the imports that run when a module is imported (``import a.b``, ``from
.c import d``; in class bodies and ``if``/``try`` blocks too; not in the bodies of functions,
but for one named function's, such as a reference's; not under ``if TYPE_CHECKING:`` or ``if
__name__ == "__main__":``), through each project module they import in turn, each package on
the way noted (its ``__init__`` runs first). A name taken from a package (``from pkg import
helper``) follows the package's ``__init__`` only as far as the module that name comes from,
so a package that re-exports its kernels does not put them in reach of a module that imports a
constant; a package imported whole (``import pkg``) is its ``__init__`` alone. Modules
outside the project (torch, an installed package) and imports built at run time are not
followed.

Two checks read it: whether a round may change an op's truth (:mod:`.reference_reach`), and
which other ops run a file a round changed (:func:`imported_files`, :mod:`.sharing`).
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Iterable
from pathlib import Path

from kernel_ratchet.harness.import_roots import roots

Found = dict[str, str]  # relative path -> how the module reaches it


@functools.lru_cache(maxsize=4096)
def _parsed_version(path: Path, mtime_ns: int, size: int) -> ast.Module:
    try:
        return ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return ast.Module(body=[], type_ignores=[])


def module_file(bases: list[Path], name: str) -> Path | None:
    parts = name.split(".")
    for base in bases:
        for f in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if f.is_file():
                return f
    return None


def _package_of(path: Path, module: str) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(
    path: Path, module: str, function: str | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names taken from it) of every import statement of the file ``path`` (module
    ``module``) that runs (not those under ``if TYPE_CHECKING:``, which only a type checker
    reads), read once per version of the file."""
    try:
        st = path.stat()
    except OSError:
        return []
    return _imports_version(path, st.st_mtime_ns, st.st_size, module, function)


@functools.lru_cache(maxsize=4096)
def _imports_version(
    path: Path, mtime_ns: int, size: int, module: str, function: str | None
) -> list[tuple[str, tuple[str, ...]]]:
    out: list[tuple[str, tuple[str, ...]]] = []
    for node in _running(_parsed_version(path, mtime_ns, size), function):
        if isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _package_of(path, module).split(".")
                pkg = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                base = ".".join([*pkg, *([base] if base else [])])
            out.append((base, tuple(a.name for a in node.names)))
    return out


def _running(tree: ast.AST, function: str | None = None) -> list[ast.AST]:
    """The nodes of ``tree`` that run when the module is imported: not the bodies of its
    functions and methods (but ``function``'s, the reference itself), not ``if
    TYPE_CHECKING:`` or ``if __name__ == "__main__":`` blocks (their ``else`` kept)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and _not_run(node.test):
            todo.extend(node.orelse)
            continue
        is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if is_function and getattr(node, "name", None) != function:
            todo.extend(getattr(node, "decorator_list", []))  # they run at definition
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _not_run(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` (``typing.TYPE_CHECKING``) or ``__name__ == "__main__"``."""
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    if name == "TYPE_CHECKING":
        return True
    return (
        isinstance(test, ast.Compare)
        and getattr(test.left, "id", None) == "__name__"
        and any(getattr(c, "value", None) == "__main__" for c in test.comparators)
    )


class Reach:
    def __init__(self, root: Path, top: str) -> None:
        self.root = Path(root).resolve()
        self.bases = [Path(r).resolve() for r in roots(str(root), top)] or [self.root]
        self.found: Found = {}
        self._files: dict[str, Path | None] = {}

    def rel(self, f: Path) -> str:
        return f.relative_to(self.root).as_posix()

    def file(self, module: str) -> Path | None:
        if module not in self._files:
            self._files[module] = module_file(self.bases, module)
        return self._files[module]

    def visit(
        self, module: str, why: str, names: tuple[str, ...] = (), only: str | None = None
    ) -> None:
        f = self.file(module)
        if f is None:
            return  # not the project's (torch, numpy) or not found
        package = f.name == "__init__.py"
        if package and not names:  # ``import pkg``: which of its names is used is not read
            if self._note(f, why):
                self._packages(module, why)
            return
        if package:  # follow only where the imported names come from
            for name in names:
                sub = f"{module}.{name}"
                if self.file(sub) is not None:
                    self.visit(sub, why)
            wanted = [
                (m, ns) for m, ns in _imports(f, module) if set(ns) & set(names) and m != module
            ]
            if self._note(f, why):
                self._packages(module, why)
            for m, ns in wanted:
                self.visit(m, f"{why}, through {self.rel(f)}", tuple(set(ns) & set(names)))
            return
        if not self._note(f, why):
            return
        self._packages(module, why)
        for m, ns in _imports(f, module, only):
            self.visit(m, f"{why}, which imports {m}", ns)

    def _packages(self, module: str, why: str) -> None:
        """Note the ``__init__`` of each package above ``module``: it runs first."""
        parts = module.split(".")
        for i in range(1, len(parts)):
            init = self.file(".".join(parts[:i]))
            if init is not None and init.name == "__init__.py":
                self._note(init, f"{why} (its package {'.'.join(parts[:i])} runs first)")

    def _note(self, f: Path, why: str) -> bool:
        rel = self.rel(f)
        if rel in self.found:
            return False
        self.found[rel] = why
        return True


def reach(root: Path, module: str, function: str | None = None, label: str = "the module") -> Found:
    """Project files the module ``module`` reaches by the imports that run when it is
    imported (and those in ``function``'s body), each with how (``label`` names the start)."""
    r = Reach(root, module.split(".", 1)[0])
    r.visit(module, f"{label} {module}", only=function)
    return r.found


def imported_files(root: Path, files: Iterable[str], memo: dict | None = None) -> set[str]:
    """Paths (relative to ``root``, POSIX) of the project files that importing each of
    ``files`` (Python files relative to ``root``) runs, beside that file itself: :func:`reach`
    of its module. A file outside the project's import roots imports nothing here. ``memo``:
    each file's result, kept across calls that read the same files unchanged."""
    memo = {} if memo is None else memo
    out: set[str] = set()
    for rel in files:
        rel = Path(os.path.normpath(rel)).as_posix()
        if rel not in memo:
            module = _module_name(Path(root), rel) if rel.endswith(".py") else None
            memo[rel] = set(reach(Path(root), module)) - {rel} if module else set()
        out |= memo[rel]
    return out


def _module_name(root: Path, rel: str) -> str | None:
    """The dotted module of the file ``rel`` under the import root that holds it (the project
    root, or a directory one level below it: ``src/pkg/mod.py`` -> ``pkg.mod``)."""
    parts = Path(rel).with_suffix("").parts
    for skip in (0, 1):
        names = list(parts[skip:])
        if names and names[-1] == "__init__":
            names.pop()
        if not names:
            continue
        base = (root / Path(*parts[:skip])).resolve() if skip else root.resolve()
        if any(Path(b).resolve() == base for b in roots(str(root), names[0])):
            return ".".join(names)
    return None
