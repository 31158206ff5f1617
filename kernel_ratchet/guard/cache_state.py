"""Which names of a kernel file are state that outlives one call: the containers a cache can
live in (see :mod:`.cache_scan` for what counts), and which of them a function writes."""

from __future__ import annotations

import ast

from kernel_ratchet.guard.syntax import own_nodes, short_name

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

MUTATORS = {
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


def _is_ctor(node: ast.expr | None) -> bool:
    """A new container: a literal, a constructor call, or a field whose factory makes one
    (``field(default_factory=dict)``, attrs' ``field(factory=dict)``)."""
    if isinstance(node, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.List)):
        return True
    if isinstance(node, ast.Call):
        name = short_name(node.func) or ""
        if name in ("field", "Factory", "attrib", "ib"):
            made = [k.value for k in node.keywords if k.arg in ("default_factory", "factory")]
            made += node.args[:1] if name == "Factory" else []
            return any(_makes_container(m) for m in made)
        return name in _CTORS
    return False


def _makes_container(factory: ast.expr) -> bool:
    if isinstance(factory, ast.Lambda):
        return _is_ctor(factory.body)
    return (short_name(factory) or "") in _CTORS


def containers(tree: ast.Module) -> dict[str, tuple[str, int]]:
    """State names of the file that may be caches -> (their text, line): see the docstring."""
    found: dict[str, tuple[str, int]] = {}
    other: dict[str, tuple[str, int]] = {}  # state made some other way: a container if written
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                short = short_name(t)
                if not short or not (isinstance(t, ast.Attribute) or _is_state_name(tree, node, t)):
                    continue
                into = found if _is_ctor(node.value) else other
                into.setdefault(short, (ast.unparse(t), node.lineno))
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                found.setdefault(name, (name, node.lineno))
        name = _setattr_name(node)  # setattr(obj, "x", v): state named x
        if name:
            other.setdefault(name, (name, getattr(node, "lineno", 0)))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for arg, default in _defaults(node.args):
                if _is_ctor(default):  # `def f(x, _memo={})`: one object for every call
                    found.setdefault(arg.arg, (arg.arg, node.lineno))
    # whatever made it (``cachetools.LRUCache()``, ``dict.fromkeys()``, ``x or {}``, a class of
    # the project), state that a function stores into by key is a cache
    for name in written(tree, set(other)) - set(found):
        found[name] = other[name]
    return found


def _setattr_name(n: ast.AST) -> str | None:
    if isinstance(n, ast.Call) and short_name(n.func) == "setattr" and len(n.args) > 1:
        name = n.args[1]
        return (
            name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
        )
    return None


def _defaults(args: ast.arguments) -> list[tuple[ast.arg, ast.expr]]:
    """(parameter, its default) of every parameter that has one."""
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    return pairs + [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    ]


def _is_state_name(tree: ast.Module, assign: ast.AST, target: ast.expr) -> bool:
    """Module- or class-level name, or a function local that a nested function uses."""
    for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
        if assign in getattr(node, "body", []):
            return True
    name = short_name(target)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and assign in own_nodes(fn):
            inner = [n for n in own_nodes(fn) if isinstance(n, (ast.FunctionDef, ast.Lambda))]
            return any(isinstance(x, ast.Name) and x.id == name for i in inner for x in ast.walk(i))
    return False


def written(tree: ast.Module, state: set[str]) -> set[str]:
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
                out.add(short_name(n.value) or "")
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr in MUTATORS:
                    out.add(short_name(n.func.value) or "")
            elif isinstance(n, ast.Assign):
                flat = [e for t in n.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
                out |= {short_name(t) or "" for t in flat if isinstance(t, ast.Attribute)}
            elif _setattr_name(n):
                out.add(_setattr_name(n) or "")
    return out & state


#: Memoizing decorators by name: functools' and cachetools' (``cached``, ``cachedmethod``) and
#: the usual spellings of hand-written ones.
MEMO_NAMES = frozenset({"lru_cache", "cache", "cached", "cachedmethod", "memoize", "memoized"})


def memo_names(tree: ast.Module) -> frozenset[str]:
    """:data:`MEMO_NAMES` and the aliases the file imports them as
    (``from functools import cache as memo``)."""
    aliases = {
        a.asname
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom)
        for a in n.names
        if a.name in MEMO_NAMES and a.asname
    }
    return MEMO_NAMES | aliases


def memo_wrapped(tree: ast.Module, names: frozenset[str]) -> dict[str, str]:
    """Functions of the file memoized by a call rather than a decorator
    (``f = functools.lru_cache(maxsize=None)(_impl)``, ``functools.cache(_impl)``): the
    wrapped function's name -> the wrapping call's text."""
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    out: dict[str, str] = {}
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call) or not n.args or not isinstance(n.args[0], ast.Name):
            continue
        maker = n.func.func if isinstance(n.func, ast.Call) else n.func
        if short_name(maker) in names and n.args[0].id in defined:
            out[n.args[0].id] = ast.unparse(n.func)
    return out
