"""One pass over one kernel file's syntax tree: its caches, their keys, and its kernel structure.

:func:`scan_source` returns a :class:`FileScan`. The static audit runs it on the incumbent and on
the candidate version of each kernel file and keeps what the candidate adds.

What counts as a cache (state that outlives one call):

* containers assigned at module level, in a class body, on an object or function attribute
  (``self._c = {}``, ``fn.cache = {}``) or in an enclosing function and used by a nested one:
  dict/set/list literals and ``dict``/``OrderedDict``/``defaultdict``/``WeakKeyDictionary``/
  ``WeakValueDictionary``/``set``/``list``/``deque``/``Counter`` calls; names declared ``global``
  or ``nonlocal``;
* memoizing decorators: ``functools.lru_cache``/``functools.cache``/``lru_cache``/``cache``;
* attributes stored on a tensor (``w._fp8 = ...``, ``setattr(a, ...)``): a cache keyed on the
  tensor object itself.

A *key* is the subscript of such a container, the first argument of ``.get``/``.setdefault``/
``.pop``, the left side of ``in``, the other side of an ``is``/``==`` test against state, or the
parameters of a memoized function. Key components are read by :class:`.keys.KeyReader`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernel_ratchet.guard.keys import KeyComponent, KeyReader
from kernel_ratchet.guard.roles import annotations, names_linear_b, role_of

_CTORS = {
    "dict",
    "OrderedDict",
    "defaultdict",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "set",
    "list",
    "deque",
    "Counter",
    "WeakSet",
}
_MEMO = {"lru_cache", "cache"}
_MUTATORS = {
    "setdefault",
    "update",
    "__setitem__",
    "append",
    "add",
    "extend",
    "insert",
    "popitem",
    "move_to_end",
}
_LOOKUPS = {"get", "setdefault", "pop", "__getitem__", "__setitem__", "__contains__"}
_NOT_CACHE_ATTRS = {"data", "grad", "requires_grad", "retains_grad"}
_NO_ATTR_CACHE = {"self", "cls", "ctx"}
_LAYOUT_TOKENS = {
    "nt",
    "nn",
    "tn",
    "tt",
    "kmajor",
    "trans",
    "transpose",
    "transposed",
    "layout",
    "colmajor",
    "rowmajor",
    "mkajor",
    "nmajor",
}
_UNIFORM_TOKENS = ("per_group", "per_expert", "group_size", "uniform", "equal_")


@dataclass(frozen=True)
class CacheUse:
    """One keyed use of a cache: ``file:line``, the container, the function, the key parts."""

    file: str
    line: int
    container: str
    kind: str  # container | memo | tensor-attr | compare
    function: str
    key_text: str
    components: tuple[KeyComponent, ...]

    def shown(self) -> str:
        """The use as code: ``C[key]``, ``C is key``, ``@lru_cache f(args)``, ``t.<attr>``."""
        if self.kind == "compare":
            return f"{self.container} is/== {self.key_text}"
        if self.kind == "memo":
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


def _is_ctor(node: ast.expr | None) -> bool:
    if isinstance(node, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.List)):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in _CTORS
    return False


def _short(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """Nodes of a function body without the bodies of nested functions and classes."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
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


def _containers(tree: ast.Module, scan: FileScan) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_ctor(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                short = _short(t)
                if short and (isinstance(t, ast.Attribute) or _is_state_name(tree, node, t)):
                    scan.containers.setdefault(short, (ast.unparse(t), node.lineno))
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                scan.containers.setdefault(name, (name, node.lineno))


def _is_state_name(tree: ast.Module, assign: ast.AST, target: ast.expr) -> bool:
    """Module- or class-level name, or a function local that a nested function uses."""
    for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
        if assign in getattr(node, "body", []):
            return True
    name = _short(target)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and assign in _own_nodes(fn):
            inner = [n for n in _own_nodes(fn) if isinstance(n, (ast.FunctionDef, ast.Lambda))]
            return any(isinstance(x, ast.Name) and x.id == name for i in inner for x in ast.walk(i))
    return False


def _reader(fn: ast.FunctionDef | ast.AsyncFunctionDef, role) -> KeyReader:
    a = fn.args
    params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
    varargs = {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    typed = {
        p.arg: ast.unparse(p.annotation)
        for p in a.posonlyargs + a.args + a.kwonlyargs
        if p.annotation is not None
    }
    tensor = {name for name, t in typed.items() if "Tensor" in t}
    plain = {name for name, t in typed.items() if "Tensor" not in t}
    for loop in (n for n in _own_nodes(fn) if isinstance(n, (ast.For, ast.comprehension))):
        it = loop.iter
        if isinstance(it, ast.Call) and _short(it.func) in ("range", "enumerate"):
            target = loop.target.elts[0] if isinstance(loop.target, ast.Tuple) else loop.target
            if isinstance(target, ast.Name):
                plain.add(target.id)  # a loop counter is an int
    assigned: dict[str, ast.expr] = {}
    for node in sorted(
        (n for n in _own_nodes(fn) if isinstance(n, ast.Assign)), key=lambda n: n.lineno
    ):
        for t in node.targets:
            for name in [t] if isinstance(t, ast.Name) else getattr(t, "elts", []):
                if isinstance(name, ast.Name) and name.id not in params:
                    assigned[name.id] = node.value
    return KeyReader(assigned, params | varargs, varargs, tensor, role, frozenset(plain))


def _fixed_slot(key: ast.expr) -> bool:
    if isinstance(key, ast.UnaryOp):
        key = key.operand
    return isinstance(key, (ast.Constant, ast.Slice))


def _short_of(text: str) -> str:
    return text.rsplit(".", 1)[-1].split("[", 1)[0]


def _written(tree: ast.Module, state: set[str]) -> set[str]:
    """State names that some function writes (item assignment, mutating call, rebinding)."""
    out: set[str] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        declared = {
            x for n in ast.walk(fn) if isinstance(n, (ast.Global, ast.Nonlocal)) for x in n.names
        }
        out |= declared
        for n in ast.walk(fn):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(_short(n.value) or "")
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr in _MUTATORS:
                    out.add(_short(n.func.value) or "")
            elif isinstance(n, ast.Assign):
                out |= {_short(t) or "" for t in n.targets if isinstance(t, ast.Attribute)}
    return out & state


def _refers_state(node: ast.expr, state: set[str]) -> bool:
    return any(
        _short(n) in state for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
    )


def _key_sites(nodes: list[ast.AST], state: set[str]) -> list[tuple[ast.AST, str, ast.expr, str]]:
    """(node, container, key expression, kind) of every keyed access to state in ``nodes``."""
    out = []
    for n in nodes:
        if isinstance(n, ast.Subscript) and _short(n.value) in state:
            out.append((n, ast.unparse(n.value), n.slice, "container"))
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in _LOOKUPS
            and _short(n.func.value) in state
            and n.args
        ):
            out.append((n, ast.unparse(n.func.value), n.args[0], "container"))
        elif isinstance(n, ast.Compare) and len(n.ops) == 1:
            left, right, op = n.left, n.comparators[0], n.ops[0]
            if isinstance(op, (ast.In, ast.NotIn)) and _short(right) in state:
                out.append((n, ast.unparse(right), left, "container"))
            elif isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
                for mine, other in ((left, right), (right, left)):
                    if _refers_state(other, state) and not _refers_state(mine, state):
                        out.append((n, ast.unparse(other), mine, "compare"))
    return out


def _tensor_attr_sites(nodes: list[ast.AST], reader: KeyReader) -> list[tuple[ast.AST, ast.expr]]:
    out = []
    for n in nodes:
        target = None
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute) and t.attr not in _NOT_CACHE_ATTRS:
                    target = t.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
            target = n.args[0] if n.args else None
        if (
            isinstance(target, ast.Name)
            and target.id not in _NO_ATTR_CACHE
            and reader.role(target)[0] is not None
        ):
            out.append((n, target))
    return out


def _memo_decorated(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    for d in fn.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        if _short(f) in _MEMO:
            return ast.unparse(d)
    return None


def _scan_function(scan: FileScan, qual: str, fn, role) -> None:
    reader = _reader(fn, role)
    nodes = _own_nodes(fn)
    state = set(scan.containers)
    for n in nodes:
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            scan.globals.update((qual, name) for name in n.names)

    # `w._version` read anywhere in the function validates a weight-identity entry (e.g. a
    # WeakKeyDictionary keyed on w holding (version, value) and compared on lookup).
    checked = {
        ast.unparse(n.value) for n in nodes if isinstance(n, ast.Attribute) and n.attr == "_version"
    }

    def add(node: ast.AST, container: str, key: ast.expr | None, kind: str, parts) -> None:
        have = {p.tensor for p in parts if p.kind == "version"}
        for p in list(parts) if kind != "memo" else []:
            if p.kind in ("identity", "address") and p.tensor in checked - have:
                have.add(p.tensor)
                parts.append(
                    KeyComponent(
                        f"{p.tensor}._version (checked in {qual})", "version", p.tensor, p.role
                    )
                )
        text = ", ".join(p.text for p in parts)
        if key is not None:
            shown = reader.assigned.get(key.id) if isinstance(key, ast.Name) else None
            text = ast.unparse(key) + (f" = {ast.unparse(shown)}" if shown is not None else "")
        scan.uses.append(
            CacheUse(
                scan.path,
                getattr(node, "lineno", fn.lineno),
                container,
                kind,
                qual,
                text,
                tuple(parts),
            )
        )

    for node, container, key, kind in _key_sites(nodes, state):
        if _fixed_slot(key):
            continue  # `_LAST[0]`, `_STATS["hits"]`, `CONFIGS[:3]`: a fixed slot, not a key
        parts = reader.read(key)
        tensor_key = any(p.kind in ("identity", "address", "args") for p in parts)
        if kind == "compare" and not tensor_key:
            continue  # `x is None`, `n == 0`: not a key
        if not tensor_key and _short_of(container) not in scan.written:
            continue  # a lookup in a constant table, not a cache
        add(node, container, key, kind, parts)
    for node, target in _tensor_attr_sites(nodes, reader):
        add(node, f"{target.id}.<attr>", None, "tensor-attr", reader.read(target))
    memo = _memo_decorated(fn)
    if memo:
        a = fn.args
        names = [
            p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")
        ]
        names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        parts = [c for name in names for c in reader.read(ast.Name(id=name, ctx=ast.Load()))]
        add(fn, f"@{memo} {qual}", None, "memo", parts)


def _is_jit(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in fn.decorator_list)


def _layout_named(name: str) -> bool:
    return bool(set(name.lower().split("_")) & _LAYOUT_TOKENS)


def _kernel_facts(scan: FileScan, tree: ast.Module, role) -> None:
    funcs = _functions(tree)
    scan.jit_kernels = {fn.name for _, fn in funcs if _is_jit(fn)}
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
        for n in _own_nodes(fn):
            _node_facts(scan, qual, n, role)


def _node_facts(scan: FileScan, qual: str, n: ast.AST, role) -> None:
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
        kernel = _short(n.func.value)
        if kernel in scan.jit_kernels:
            roles = {role(_short(a)) for a in n.args if _short(a)}
            roles |= {role(_short(k.value)) for k in n.keywords if _short(k.value)}
            scan.launches.append((kernel, frozenset(roles)))
            scan.layout_names.update(k.arg for k in n.keywords if k.arg and _layout_named(k.arg))
    if (
        isinstance(n, ast.Subscript)
        and isinstance(n.slice, ast.Constant)
        and isinstance(n.slice.value, int)
        and _short(n.value)
        and role(_short(n.value)) == "routing"
    ):
        scan.uniform_hints.append((n.lineno, f"{ast.unparse(n)}: one group's count used for all"))


class _Mask(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.copy_location(ast.Constant(value="#"), node)


def scan_source(path: str, source: str) -> FileScan:
    """Scan one file's text. Raises SyntaxError when the text does not parse."""
    tree = ast.parse(source, filename=path)
    scan = FileScan(path)
    overrides = annotations(source)
    params = [p.arg for _, fn in _functions(tree) for p in fn.args.posonlyargs + fn.args.args]
    linear_b = names_linear_b(params)
    role = lambda name: role_of(name, linear_b=linear_b, overrides=overrides)  # noqa: E731
    _containers(tree, scan)
    scan.written = _written(tree, set(scan.containers))
    for qual, fn in _functions(tree):
        _scan_function(scan, qual, fn, role)
    _kernel_facts(scan, tree, role)
    scan.masked = ast.dump(_Mask().visit(ast.parse(source)), include_attributes=False)
    return scan
