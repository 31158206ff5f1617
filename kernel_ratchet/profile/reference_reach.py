"""Whether a round can change the op's truth: the files its reference reads, read by ``ast``.

Every round is checked against the reference. Where the reference is defined in, or imports
from, a file a round may change (``kernel_source``), a candidate changes the kernel and its
truth together: a helper ``mean_square`` shared by the kernel file and the reference,
rewritten to read 64 of 1024 columns, keeps both agreeing on a wrong answer, and the round is
accepted. :func:`reach` follows the imports that run when the reference's module is imported
(``import a.b``, ``from .c import d``; in class bodies and ``if``/``try`` blocks too, not in
the bodies of other functions, ``if TYPE_CHECKING:`` or ``if __name__ == "__main__":``), and
those in the reference function's own body, through each project module they import in
turn. A name taken from a package (``from pkg import
helper``) follows the package's ``__init__`` only as far as the module that name comes from,
so a package that re-exports its kernels does not put them in reach of a reference that
imports a constant; a package imported whole (``import pkg``) is its ``__init__`` alone.

The adapter of an op described by a class holds its reference in its own file (or imports it
from another): :func:`check_reach` refuses an adapter file that a round may change, and the
described op's ``reference`` module with everything it reaches.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernel_ratchet.harness.described_spec import description_of
from kernel_ratchet.harness.import_roots import roots
from kernel_ratchet.profile.items import CheckItem, item
from kernel_ratchet.profile.schema import OpProfile, Profile

_Found = dict[str, str]  # relative path -> how the reference reaches it


def _module_file(bases: list[Path], name: str) -> Path | None:
    parts = name.split(".")
    for base in bases:
        for f in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if f.is_file():
                return f
    return None


def _package_of(path: Path, module: str) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(
    tree: ast.AST, module: str, path: Path, function: str | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names taken from it) of every import statement in ``tree`` that runs (not
    those under ``if TYPE_CHECKING:``, which only a type checker reads)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for node in _running(tree, function):
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


class _Reach:
    def __init__(self, root: Path, top: str) -> None:
        self.root = root
        self.bases = [Path(r) for r in roots(str(root), top)] or [root]
        self.found: _Found = {}

    def rel(self, f: Path) -> str:
        return f.resolve().relative_to(self.root.resolve()).as_posix()

    def visit(
        self, module: str, why: str, names: tuple[str, ...] = (), only: str | None = None
    ) -> None:
        f = _module_file(self.bases, module)
        if f is None:
            return  # not the project's (torch, numpy) or not found
        try:
            tree = ast.parse(f.read_text())
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        package = f.name == "__init__.py"
        if package and not names:  # ``import pkg``: which of its names is used is not read
            self._note(f, why)
            return
        if package:  # follow only where the imported names come from
            for name in names:
                sub = f"{module}.{name}"
                if _module_file(self.bases, sub) is not None:
                    self.visit(sub, why)
            wanted = [
                (m, ns)
                for m, ns in _imports(tree, module, f)
                if set(ns) & set(names) and m != module
            ]
            self._note(f, why)
            for m, ns in wanted:
                self.visit(m, f"{why}, through {self.rel(f)}", tuple(set(ns) & set(names)))
            return
        if not self._note(f, why):
            return
        for m, ns in _imports(tree, module, f, only):
            self.visit(m, f"{why}, which imports {m}", ns)

    def _note(self, f: Path, why: str) -> bool:
        rel = self.rel(f)
        if rel in self.found:
            return False
        self.found[rel] = why
        return True


def reach(root: Path, module: str, function: str | None = None) -> _Found:
    """Project files the module ``module`` reaches by the imports that run when it is
    imported (and those of ``function``, the reference, in its body), each with how."""
    r = _Reach(root, module.split(".", 1)[0])
    r.visit(module, f"the reference's module {module}", only=function)
    return r.found


def _of_reference(root: Path, reference: str) -> _Found:
    """:func:`reach` of a reference ``module:function``."""
    module, _, function = reference.partition(":")
    return reach(root, module, function.split(".", 1)[0] or None)


def changeable_truth(root: Path, reference: str, kernel_source: list[str]) -> list[str]:
    """Why each file of ``kernel_source`` that the reference (``module:function``) reaches
    is in its reach; [] when none is."""
    return _in_sources(_of_reference(root, reference), kernel_source)


def _in_sources(found: _Found, kernel_source: list[str] | tuple[str, ...]) -> list[str]:
    sources = {Path(s).as_posix() for s in kernel_source}
    return [f"{rel} ({found[rel]})" for rel in found if rel in sources]


def check_reach(profile: Profile, op: OpProfile) -> CheckItem:
    """The checklist line: no file a round may change holds or feeds the op's reference."""
    what = "reference out of a round's reach"
    try:
        desc = description_of(op.adapter)
    except ValueError:  # the loader names a description that does not validate
        return item(op, what, True, "not read (the op's description does not validate)")
    if desc is not None:
        found = _of_reference(profile.root, desc.reference)
        bad = _in_sources(found, op.kernel_source)
        fix = (
            "move what the reference uses into a module outside kernel_source (the kernel may "
            "import from the reference's side, never the other way), or take the file out of "
            f"ops.{op.name}.kernel_source"
        )
        if bad:
            return item(op, what, False, f"{desc.reference} reads {'; '.join(bad)}", fix)
        detail = f"{desc.reference}: {len(found)} project file(s), none in kernel_source"
        return item(op, what, True, detail)
    module = op.adapter.split(":", 1)[0]
    r = _Reach(profile.root, module.split(".", 1)[0])
    own_file = _module_file(r.bases, module)
    own = r.rel(own_file) if own_file else None
    if own in {Path(s).as_posix() for s in op.kernel_source}:
        return item(
            op,
            what,
            False,
            f"the adapter {module} ({own}), whose reference() is the truth, is in kernel_source",
            f"take {own} out of ops.{op.name}.kernel_source: a round must not change its truth",
        )
    return item(op, what, True, f"the adapter's file {own or module} is not in kernel_source")
