"""One pass over one kernel file's syntax tree: its caches, their keys, and its kernel structure.

:func:`scan_source` returns a :class:`FileScan`; the kernel structure is read by
:mod:`.kernel_facts`. The static audit runs it on the incumbent and on the candidate version of
each kernel file and keeps what the candidate adds.

What counts as a cache (state that outlives one call):

* containers assigned at module level, in a class body, on an object or function attribute
  (``self._c = {}``, ``fn.cache = {}``) or in an enclosing function and used by a nested one:
  dict/set/list literals and ``dict``/``OrderedDict``/``defaultdict``/``WeakKeyDictionary``/
  ``WeakValueDictionary``/``set``/``list``/``deque``/``Counter`` calls, and dataclass or attrs
  fields made by one (``field(default_factory=dict)``); state made any other way
  (``cachetools.LRUCache()``, ``x or {}``, a class of the project) that a function stores into
  (item assignment, a mutating call); names declared ``global`` or ``nonlocal``; a parameter
  whose default is a container (``def f(x, _memo={})``: one object shared by every call);
* memoizing decorators (functools', cachetools', imported under any alias) and functions
  memoized by a call (``f = functools.lru_cache()(_impl)``);
* attributes stored on a tensor (``w._fp8 = ...``, ``setattr(a, ...)``): a cache keyed on the
  tensor object itself.

A *key* is the subscript of such a container, the first argument of ``.get``/``.setdefault``/
``.pop``, the left side of ``in``, the other side of an ``is``/``==`` test against state or
against a loop variable iterating over state (a list searched by content), the parameters of a
memoized function, or the arguments of a call to one that carry a fresh tensor. Key
components are read by :class:`.keys.KeyReader`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kernel_ratchet.guard.cache_sites import fixed_slot, key_sites, tensor_attr_sites
from kernel_ratchet.guard.cache_state import (
    MUTATORS,
    containers,
    memo_names,
    memo_wrapped,
    written,
)
from kernel_ratchet.guard.cache_values import (
    geometry_functions,
    imported_geometry,
    make_reader,
    value_class,
    worst,
)
from kernel_ratchet.guard.kernel_facts import kernel_facts
from kernel_ratchet.guard.keys import KeyComponent, KeyReader
from kernel_ratchet.guard.roles import annotations, names_linear_b, role_of
from kernel_ratchet.guard.syntax import FunctionNode, functions, own_nodes, short_name

#: The role of a parameter name (``weight``, ``activation`` ...), or None.
Role = Callable[[str | None], str | None]


@dataclass(frozen=True)
class CacheUse:
    """One keyed use of a cache: ``file:line``, the container, the function, the key parts."""

    file: str
    line: int
    container: str
    kind: str  # container | memo | memo-call | tensor-attr | compare | search
    function: str
    key_text: str
    components: tuple[KeyComponent, ...]
    value: str = ""  # what the cache holds when its key has geometry: plan | tensor | unknown

    def shown(self) -> str:
        """The use as code: ``C[key]``, ``C is key``, ``@lru_cache f(args)``, ``t.<attr>``."""
        if self.kind == "compare":
            return f"{self.container} is/== {self.key_text}"
        if self.kind == "search":
            return f"{self.container} searched for == {self.key_text}"
        if self.kind in ("memo", "memo-call"):
            return f"{self.container}({self.key_text})"
        if self.kind == "tensor-attr":
            return f"{self.container} (key: {self.key_text})"
        return f"{self.container}[{self.key_text}]"

    @property
    def signature(self) -> tuple[str, str, str, str]:
        """Identity of the use independent of line numbers (for the before/after diff)."""
        return (self.container, self.kind, self.function, self.key_text)


@dataclass
class FileScan:
    """What one file holds. ``masked`` is the tree dump with every constant blanked."""

    path: str
    containers: dict[str, tuple[str, int]] = field(default_factory=dict)  # short -> (text, line)
    globals: set[tuple[str, str]] = field(default_factory=set)  # (function, name)
    uses: list[CacheUse] = field(default_factory=list)
    saved: set[str] = field(default_factory=set)  # save_for_backward / ctx.* / forward state
    layout_names: set[str] = field(default_factory=set)
    jit_kernels: set[str] = field(default_factory=set)
    launches: list[tuple[str, frozenset[str]]] = field(default_factory=list)  # kernel, roles
    uniform_hints: list[tuple[int, str]] = field(default_factory=list)
    masked: str = ""
    written: set[str] = field(default_factory=set)
    memoized: dict[str, str] = field(default_factory=dict)  # function name -> decorator
    memo_names: frozenset[str] = frozenset()  # memoizing decorators' names here, aliases too
    memo_wrapped: dict[str, str] = field(default_factory=dict)  # memoized by a call
    geometry_fns: frozenset[str] = frozenset()  # as called here, imported ones included
    geometry_defs: frozenset[str] = frozenset()  # the file's own geometry functions
    values: dict[str, str] = field(default_factory=dict)  # container or memo name -> held


def _short_of(text: str) -> str:
    return text.rsplit(".", 1)[-1].split("[", 1)[0]


def _memo_decorated(fn: FunctionNode, scan: FileScan) -> str | None:
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if short_name(f) in scan.memo_names:
            return ast.unparse(d)
    return scan.memo_wrapped.get(fn.name)


def _with_version_checks(
    parts: list[KeyComponent], checked: set[str], qual: str
) -> list[KeyComponent]:
    """``parts`` plus a ``version`` component for every tensor keyed by identity or address
    whose ``._version`` the function reads anywhere (e.g. a WeakKeyDictionary keyed on w
    holding (version, value) and compared on lookup validates the entry)."""
    have = {p.tensor for p in parts if p.kind == "version"}
    out = list(parts)
    for p in parts:
        if p.kind in ("identity", "address") and p.tensor in checked - have:
            have.add(p.tensor)
            out.append(
                KeyComponent(
                    f"{p.tensor}._version (checked in {qual})", "version", p.tensor, p.role
                )
            )
    return out


def _memo_parts(fn: FunctionNode, reader: KeyReader) -> list[KeyComponent]:
    """The key components of a memoized function: its parameters (``self``/``cls`` aside)."""
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return [c for name in names for c in reader.read(ast.Name(id=name, ctx=ast.Load()))]


def _keyed_uses(
    scan: FileScan, nodes: list[ast.AST], reader: KeyReader
) -> list[tuple[ast.AST, str, ast.expr | None, str, list[KeyComponent]]]:
    """(node, container, key, kind, key parts) of the keyed accesses to state that are
    cache lookups, and of the attributes stored on tensors."""
    out = []
    for node, container, key, kind in key_sites(nodes, set(scan.containers)):
        if fixed_slot(key):
            continue  # `_LAST[0]`, `_STATS["hits"]`, `CONFIGS[:3]`: a fixed slot, not a key
        parts = reader.read(key)
        tensor_key = any(
            p.kind in ("identity", "address", "args", "content", "geometry") for p in parts
        )
        if kind in ("compare", "search") and not tensor_key:
            continue  # `x is None`, `n == 0`: not a key
        if not tensor_key and _short_of(container) not in scan.written:
            continue  # a lookup in a constant table, not a cache
        out.append((node, container, key, kind, parts))
    for node, target in tensor_attr_sites(nodes, reader):
        out.append((node, f"{target.id}.<attr>", None, "tensor-attr", reader.read(target)))
    return out


def _memo_calls(
    scan: FileScan, nodes: list[ast.AST], reader: KeyReader
) -> list[tuple[ast.AST, str, ast.expr | None, str, list[KeyComponent]]]:
    """Calls of this file's memoized functions whose arguments carry a fresh tensor (its
    identity or its content, e.g. ``_product(a.numpy().tobytes(), ...)``): the memo is keyed
    on that tensor, whatever the memoized function's parameters are annotated as."""
    out = []
    for n in nodes:
        if isinstance(n, ast.Call) and short_name(n.func) in scan.memoized:
            parts = [c for a in [*n.args, *(k.value for k in n.keywords)] for c in reader.read(a)]
            kinds = ("identity", "address", "content", "geometry")
            fresh = [p for p in parts if p.kind in kinds and p.fresh]
            if fresh:
                container = f"@{scan.memoized[short_name(n.func) or '']} {ast.unparse(n.func)}"
                out.append((n, container, None, "memo-call", parts))
    return out


def _held(scan: FileScan, container: str, kind: str) -> str:
    """What the cache of one use holds (see :mod:`.cache_values`)."""
    if kind == "memo-call":
        return scan.values.get(container.rsplit(" ", 1)[-1].rsplit(".", 1)[-1], "unknown")
    return scan.values.get(_short_of(container), "unknown")


def _scan_function(scan: FileScan, qual: str, fn: FunctionNode, role: Role) -> None:
    reader = make_reader(fn, role, scan.geometry_fns)
    nodes = own_nodes(fn)
    for n in nodes:
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            scan.globals.update((qual, name) for name in n.names)
    checked = {
        ast.unparse(n.value) for n in nodes if isinstance(n, ast.Attribute) and n.attr == "_version"
    }
    uses = _keyed_uses(scan, nodes, reader) + _memo_calls(scan, nodes, reader)
    memo = _memo_decorated(fn, scan)
    if memo:
        uses.append((fn, f"@{memo} {qual}", None, "memo", _memo_parts(fn, reader)))
    for node, container, key, kind, parts in uses:
        if kind != "memo":
            parts = _with_version_checks(parts, checked, qual)
        text = ", ".join(p.text for p in parts)
        if key is not None:
            shown = reader.assigned.get(key.id) if isinstance(key, ast.Name) else None
            text = ast.unparse(key) + (f" = {ast.unparse(shown)}" if shown is not None else "")
        line = getattr(node, "lineno", fn.lineno)
        located = any(p.kind in ("geometry", "address") for p in parts)
        held = _held(scan, container, kind) if located else ""
        use = CacheUse(scan.path, line, container, kind, qual, text, tuple(parts), held)
        scan.uses.append(use)


def _stores(nodes: list[ast.AST], state: set[str]) -> list[tuple[str, ast.expr]]:
    """(container, value) of every store into state: ``C[k] = v``, ``C.setdefault(k, v)``,
    ``C.append(v)`` ..., and ``C = v`` of a name declared ``global``/``nonlocal``."""
    declared = {x for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for x in n.names}
    out = []
    for n in nodes:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript) and short_name(t.value) in state:
                    out.append((short_name(t.value) or "", n.value))
                elif isinstance(t, ast.Name) and t.id in declared:
                    out.append((t.id, n.value))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args:
            name = short_name(n.func.value)
            if name in state and n.func.attr in MUTATORS and n.func.attr != "update":
                out.append((name or "", n.args[-1]))
    return out


def _values(tree: ast.Module, scan: FileScan, role: Role) -> None:
    """What each container and memoized function of the file holds (:func:`value_class`)."""
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    held: dict[str, list[str]] = {}
    for _, fn in functions(tree):
        reader = make_reader(fn, role, scan.geometry_fns)
        for name, value in _stores(own_nodes(fn), set(scan.containers)):
            held.setdefault(name, []).append(value_class([value], reader, classes))
        if fn.name in scan.memoized:
            rets = [n.value for n in own_nodes(fn) if isinstance(n, ast.Return) and n.value]
            held.setdefault(fn.name, []).append(value_class(rets, reader, classes, fn.returns))
    scan.values = {name: worst(found) for name, found in held.items()}


class _Mask(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.copy_location(ast.Constant(value="#"), node)


def scan_source(
    path: str, source: str, exports: Mapping[str, frozenset[str]] | None = None
) -> FileScan:
    """Scan one file's text. ``exports``: the geometry helpers of the change's other files, by
    module (:attr:`FileScan.geometry_defs`), so a key built with an imported one reads as
    geometry too. Raises SyntaxError when the text does not parse."""
    tree = ast.parse(source, filename=path)
    scan = FileScan(path)
    overrides = annotations(source)
    params = [p.arg for _, fn in functions(tree) for p in fn.args.posonlyargs + fn.args.args]
    linear_b = names_linear_b(params)
    role = lambda name: role_of(name, linear_b=linear_b, overrides=overrides)  # noqa: E731
    scan.containers.update(containers(tree))
    scan.written = written(tree, set(scan.containers))
    scan.memo_names = memo_names(tree)
    scan.memo_wrapped = memo_wrapped(tree, scan.memo_names)
    for _, fn in functions(tree):
        memo = _memo_decorated(fn, scan)
        if memo:
            scan.memoized[fn.name] = memo
    imported = imported_geometry(tree, path, exports) if exports else frozenset()
    scan.geometry_fns = geometry_functions(tree, role, set(scan.containers), imported)
    scan.geometry_defs = scan.geometry_fns - imported
    _values(tree, scan, role)
    for qual, fn in functions(tree):
        _scan_function(scan, qual, fn, role)
    facts = kernel_facts(tree, role)
    scan.saved, scan.layout_names = facts.saved, facts.layout_names
    scan.jit_kernels, scan.launches = facts.jit_kernels, facts.launches
    scan.uniform_hints = facts.uniform_hints
    scan.masked = ast.dump(_Mask().visit(ast.parse(source)), include_attributes=False)
    return scan
