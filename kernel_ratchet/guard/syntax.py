"""Small helpers over Python syntax trees, shared by the static scans of a kernel file."""

from __future__ import annotations

import ast

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef

#: Packages whose decorator named ``jit`` compiles something other than a Triton kernel.
_OTHER_JITS = frozenset({"numba", "jax", "torch", "cupy", "tensorflow", "tf"})


def dotted(node: ast.expr) -> str:
    """``torch.nn.functional.linear`` for that attribute chain ('' parts where it is not
    names and attributes all the way down)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def short_name(node: ast.expr) -> str | None:
    """The last name of ``x`` or ``a.b.x``; None for any other expression."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def own_nodes(fn: ast.AST) -> list[ast.AST]:
    """Nodes of a function body without the bodies of nested functions and classes."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def functions(tree: ast.Module) -> list[tuple[str, FunctionNode]]:
    """Every function of the module with its qualified name (``Class.method``, ``outer.inner``)."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def jit_aliases(tree: ast.Module) -> frozenset[str]:
    """The names a module gives Triton's or Gluon's ``jit`` on import (``from triton import jit
    as tjit``), for :func:`is_jit`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            out |= {a.asname for a in node.names if a.name == "jit" and a.asname}
    return frozenset(out)


def is_jit(fn: ast.AST, aliases: frozenset[str] = frozenset()) -> bool:
    """Whether a decorator makes ``fn`` a Triton or Gluon JIT function: one named ``jit`` last
    (``@triton.jit``, ``@jit``, ``@gluon.jit``, ``@triton.jit(do_not_specialize=...)``; not
    numba's, JAX's or TorchScript's), or a name of ``aliases`` (:func:`jit_aliases`). An
    autotuner, heuristics or a library's own wrapper (``@libentry()``) stacked on it does not
    matter; alone, it makes no kernel."""
    for dec in getattr(fn, "decorator_list", ()):
        name = dotted(dec.func if isinstance(dec, ast.Call) else dec)
        parts = name.split(".")
        if name in aliases or (parts[-1] == "jit" and parts[0] not in _OTHER_JITS):
            return True
    return False


def module_values(tree: ast.Module) -> dict[str, ast.expr]:
    """The values of single-name assignments at module level, by name."""
    return {
        n.targets[0].id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    }
