"""The kernel structure of one file, read from its syntax tree.

What the static audit compares between the incumbent and the candidate besides caches: the
Triton kernels (``@triton.jit``/``@triton.autotune``), the names that speak of a layout
(transposed, k-major ...), the launches of those kernels with the roles of their operands,
hints that a grouped op treats all groups as one size, and the state a forward saves for the
backward (``save_for_backward``, ``ctx.*``, a returned state dict).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from kernel_ratchet.guard.syntax import (
    functions,
    is_jit,
    jit_aliases,
    own_nodes,
    short_name,
)

_LAYOUT_TOKENS = {
    "nt",
    "nn",
    "tn",
    "tt",
    "kmajor",
    "trans",
    "transpose",
    "transposed",
    "colmajor",
    "rowmajor",
    "mmajor",
    "nmajor",
}
_UNIFORM_TOKENS = ("per_group", "per_expert", "group_size", "uniform", "equal_")


@dataclass
class KernelFacts:
    """What :func:`kernel_facts` found (the kernel-structure fields of a file scan)."""

    saved: set[str] = field(default_factory=set)  # save_for_backward / ctx.* / forward state
    layout_names: set[str] = field(default_factory=set)
    jit_kernels: set[str] = field(default_factory=set)
    launches: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # kernel, roles
    uniform_hints: list[tuple[int, str]] = field(default_factory=list)


def _layout_named(name: str) -> bool:
    """Whether ``name`` names an operand layout (``B_KMAJOR``, ``TRANS_A``, ``matmul_nt``).
    ``layout`` alone does not: a Gluon or Triton kernel's ``*_LAYOUT`` constexprs are the
    register and shared-memory layouts of its tiles, which every tile change touches."""
    return bool(set(name.lower().split("_")) & _LAYOUT_TOKENS)


def kernel_facts(tree: ast.Module, role: Callable[[str | None], str | None]) -> KernelFacts:
    """The kernel structure of one parsed file; ``role`` names the role of a parameter."""
    scan = KernelFacts()
    funcs = functions(tree)
    aliases = jit_aliases(tree)
    scan.jit_kernels = {fn.name for _, fn in funcs if is_jit(fn, aliases)}
    for qual, fn in funcs:
        a = fn.args
        for p in [fn.name, *(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)]:
            if _layout_named(p):
                scan.layout_names.add(p)
        if fn.name in scan.jit_kernels:
            for p in a.args + a.kwonlyargs:
                low = p.arg.lower()
                if (
                    p.annotation is not None
                    and "constexpr" in ast.unparse(p.annotation)
                    and any(t in low for t in _UNIFORM_TOKENS)
                ):
                    scan.uniform_hints.append((fn.lineno, f"constexpr {p.arg} in {fn.name}"))
        for n in own_nodes(fn):
            _node_facts(scan, qual, n, role)
    return scan


def _node_facts(
    scan: KernelFacts, qual: str, n: ast.AST, role: Callable[[str | None], str | None]
) -> None:
    if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "save_for_backward":
        scan.saved.add(f"{qual}: save_for_backward({', '.join(map(ast.unparse, n.args))})")
    if isinstance(n, ast.Assign):
        for t in n.targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "ctx"
            ):
                scan.saved.add(f"{qual}: ctx.{t.attr}")
    is_fwd = "forward" in qual or "fwd" in qual
    if is_fwd and isinstance(n, ast.Return) and isinstance(n.value, (ast.Tuple, ast.Dict)):
        for d in ast.walk(n.value):
            if isinstance(d, ast.Dict):
                keys = sorted(ast.unparse(k) for k in d.keys if k is not None)
                scan.saved.add(f"{qual}: state {{{', '.join(keys)}}}")
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
        kernel = short_name(n.func.value)
        if kernel in scan.jit_kernels:
            roles = {role(short_name(a)) for a in n.args if short_name(a)}
            roles |= {role(short_name(k.value)) for k in n.keywords if short_name(k.value)}
            scan.launches.append((kernel, frozenset(roles)))
            scan.layout_names.update(k.arg for k in n.keywords if k.arg and _layout_named(k.arg))
    if (
        isinstance(n, ast.Subscript)
        and isinstance(n.slice, ast.Constant)
        and isinstance(n.slice.value, int)
        and short_name(n.value)
        and role(short_name(n.value)) == "routing"
    ):
        scan.uniform_hints.append((n.lineno, f"{ast.unparse(n)}: one group's count used for all"))
