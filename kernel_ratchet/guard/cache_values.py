"""What a cache holds, and which helpers of a file compute only geometry.

These two facts tell a launch-plan cache from memoization. A launch plan (config, split-K,
grid, whether TMA can read an operand) keyed on the operands' geometry hits every training step
(the shapes repeat) and never serves an output; a cache of results keyed on the same geometry
serves a stale output. :func:`geometry_functions` names the helpers whose result is geometry of
their arguments (``_tma_ok(t)``: ``t.data_ptr() % 16 == 0 and t.stride(1) == 1``);
:func:`value_class` says whether cached values are a ``plan`` (no tensor in them), a
``tensor`` (a tensor, an operand, or anything computed from one) or ``unknown`` (a call the
audit cannot see into: the dynamic check judges).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping

from kernel_ratchet.guard.keys import KeyReader
from kernel_ratchet.guard.syntax import FunctionNode, functions, own_nodes, short_name

PLAN, TENSOR, UNKNOWN, DESCRIPTOR = "plan", "tensor", "unknown", "descriptor"
#: Calls that encode a TMA descriptor: where a tensor lives (address, shape, strides) and the
#: block it is read in, not its values: Triton's host encoder as Triton's launcher calls it,
#: Triton's host-side descriptor class, the CUDA driver's encoder.
DESCRIPTOR_CALLS = (
    "triton.runtime.driver.active.utils.fill_tma_descriptor",
    "TensorDescriptor",
    "TensorDescriptor.from_tensor",
    "cuTensorMapEncodeTiled",
)
_GEOMETRY_KINDS = {"meta", "geometry", "value"}
_PLAIN_CALLS = {
    *("tuple", "list", "dict", "set", "frozenset", "int", "float", "bool", "str"),
    *("min", "max", "abs", "len", "range", "sorted", "round", "divmod", "any", "all", "zip"),
}
_NOT_TENSOR = ("torch.cuda.", "torch.backends.", "torch.version.", "torch.device", "torch.finfo")
_TENSOR_METHODS = {
    *("clone", "contiguous", "to", "view", "reshape", "new_empty", "new_zeros", "new_ones"),
    *("new_full", "copy_", "t", "transpose", "permute", "float", "half", "bfloat16", "detach"),
    *("cpu", "cuda", "numpy", "item", "tolist", "tobytes", "data_ptr", "sum", "mean", "expand"),
}
#: The role of a name (``weight``, ``activation`` ...), or None.
Role = Callable[[str], str]


def make_reader(
    fn: FunctionNode,
    role: Role,
    geometry_fns: frozenset[str] = frozenset(),
    *,
    params_are_tensors: bool = False,
) -> KeyReader:
    """A :class:`KeyReader` of ``fn``; ``params_are_tensors``: every parameter not annotated
    with another type may be a tensor (how a helper's result is judged)."""
    a = fn.args
    plist = a.posonlyargs + a.args + a.kwonlyargs
    params = {p.arg for p in plist}
    varargs = {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    typed = {p.arg: ast.unparse(p.annotation) for p in plist if p.annotation is not None}
    tensor = {name for name, t in typed.items() if "Tensor" in t}
    plain = {name for name, t in typed.items() if "Tensor" not in t}
    if params_are_tensors:
        tensor |= params - plain - {"self", "cls"}
    for loop in (n for n in own_nodes(fn) if isinstance(n, (ast.For, ast.comprehension))):
        it = loop.iter
        if isinstance(it, ast.Call) and short_name(it.func) in ("range", "enumerate"):
            target = loop.target.elts[0] if isinstance(loop.target, ast.Tuple) else loop.target
            if isinstance(target, ast.Name):
                plain.add(target.id)  # a loop counter is an int
    return KeyReader(
        _assigned(fn, params),
        params | varargs,
        varargs,
        tensor,
        role,
        frozenset(plain),
        geometry_fns,
    )


def _assigned(fn: FunctionNode, params: set[str]) -> dict[str, ast.expr]:
    """Each local name -> what may be assigned to it: the value of its one assignment, or a
    tuple of all of them (branches, ``key += (...)``: a key holds whatever any of them put
    in, so none escapes the audit)."""
    values: dict[str, list[ast.expr]] = {}
    for node in sorted(
        (n for n in own_nodes(fn) if isinstance(n, (ast.Assign, ast.AugAssign))),
        key=lambda n: n.lineno,
    ):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for name in [t] if isinstance(t, ast.Name) else getattr(t, "elts", []):
                if isinstance(name, ast.Name) and name.id not in params:
                    values.setdefault(name.id, []).append(node.value)
    return {
        k: v[0] if len(v) == 1 else ast.Tuple(elts=v, ctx=ast.Load()) for k, v in values.items()
    }


def _returns(fn: FunctionNode) -> list[ast.expr | None]:
    return [n.value for n in own_nodes(fn) if isinstance(n, ast.Return)]


def _returns_geometry(fn: FunctionNode, role: Role, known: frozenset[str], state: set[str]) -> bool:
    nodes = own_nodes(fn)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)) for n in nodes):
        return False
    if any(short_name(n) in state for n in nodes if isinstance(n, (ast.Name, ast.Attribute))):
        return False  # reads a cache: its result is whatever the cache holds
    values = _returns(fn)
    if not values or any(v is None for v in values):
        return False
    reader = make_reader(fn, role, known, params_are_tensors=True)
    return all(c.kind in _GEOMETRY_KINDS for v in values if v is not None for c in reader.read(v))


def geometry_functions(
    tree: ast.Module, role: Role, state: set[str], imported: frozenset[str] = frozenset()
) -> frozenset[str]:
    """Names of the file's functions whose every return is built only from the geometry of
    their arguments (shape, strides, dtype, ``data_ptr() % k`` ...), constants and other such
    functions, and that read no cache. A name defined twice counts only if both qualify.
    ``imported``: such helpers of other files, as this file calls them (:func:`imported_geometry`),
    returned too."""
    by_name: dict[str, list[FunctionNode]] = {}
    for _, fn in functions(tree):
        by_name.setdefault(fn.name, []).append(fn)
    found: set[str] = set(imported) - set(by_name)
    changed = True
    while changed:
        changed = False
        for name, fns in by_name.items():
            known = frozenset(found)
            if name not in found and all(_returns_geometry(f, role, known, state) for f in fns):
                found.add(name)
                changed = True
    return frozenset(found)


def _expanded(exprs: Iterable[ast.expr], assigned: dict[str, ast.expr]) -> list[ast.AST]:
    """Every node of ``exprs``, local names followed through their assignments. A lookup
    (``c[k]``, ``c.get(k)``, ``c.pop(k)``) contributes what it reads, not its key: a value
    taken from a cache holds what the cache holds, not the key's tensors."""
    out: list[ast.AST] = []
    seen: set[str] = set()
    stack: list[ast.AST] = list(exprs)
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, ast.Name) and n.id in assigned and n.id not in seen:
            seen.add(n.id)
            stack.append(assigned[n.id])
        stack.extend(_read_parts(n))
    return out


def _read_parts(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.Subscript):
        return [n.value]
    lookup = isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    if lookup and n.func.attr in ("get", "pop") and n.args:  # type: ignore[union-attr]
        return [n.func, *n.args[1:], *(k.value for k in n.keywords)]  # type: ignore[union-attr]
    return list(ast.iter_child_nodes(n))


def _tensorish(n: ast.AST) -> bool:
    """A node that makes or converts a tensor (``torch.empty``, ``x.clone()``, ``a @ b``)."""
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
        return True
    if isinstance(n, ast.Call):
        called = ast.unparse(n.func)
        if called.startswith(("torch.", "F.")) and not called.startswith(_NOT_TENSOR):
            return True
        return isinstance(n.func, ast.Attribute) and n.func.attr in _TENSOR_METHODS
    return False


def _fields_hold_tensor(annotation: ast.expr, classes: dict[str, ast.ClassDef]) -> bool:
    for n in ast.walk(annotation):
        cls = classes.get(n.id) if isinstance(n, ast.Name) else None
        if cls is not None and any(
            isinstance(s, ast.AnnAssign) and "Tensor" in ast.unparse(s.annotation) for s in cls.body
        ):
            return True
    return False


def value_class(
    exprs: list[ast.expr],
    reader: KeyReader,
    classes: dict[str, ast.ClassDef],
    annotation: ast.expr | None = None,
) -> str:
    """PLAN, TENSOR, DESCRIPTOR or UNKNOWN for the values ``exprs`` a cache stores (read in
    the function of ``reader``; ``annotation`` is a memoized function's return annotation, if
    any). DESCRIPTOR: every value is the result of a TMA descriptor encode
    (:data:`DESCRIPTOR_CALLS`), directly or through a local name."""
    if not exprs:
        return UNKNOWN
    if all(_encodes_descriptor(e, reader.assigned) for e in exprs):
        return DESCRIPTOR
    nodes = _expanded(exprs, dict(reader.assigned))
    ann = ast.unparse(annotation) if annotation is not None else ""
    # a tensor itself, its address or values in the value; its shape or strides are fine
    held = [c for e in exprs for c in reader.read(e) if c.kind not in _GEOMETRY_KINDS]
    if "Tensor" in ann or held or any(_tensorish(n) for n in nodes):
        return TENSOR
    if annotation is not None and _fields_hold_tensor(annotation, classes):
        return TENSOR
    if ann and not any(w in ann for w in ("Any", "object")):
        return PLAN
    for n in nodes:
        if isinstance(n, ast.Call):
            name = n.func.id if isinstance(n.func, ast.Name) else None
            if name not in classes and name not in _PLAIN_CALLS:
                return UNKNOWN  # a call the audit cannot see into
    return PLAN


def _encodes_descriptor(e: ast.expr, assigned: Mapping[str, ast.expr]) -> bool:
    """Whether ``e`` is a descriptor encode, through local names; a name assigned more than
    once (``d = cache.get(k)`` then ``d = encode(...)``) qualifies when each of its values is an
    encode or a read of a cache (which holds what was stored) and one is an encode."""
    seen: set[str] = set()
    while isinstance(e, ast.Name) and e.id in assigned and e.id not in seen:
        seen.add(e.id)
        e = assigned[e.id]
    options = e.elts if isinstance(e, ast.Tuple) else [e]
    encodes = [o for o in options if _is_encode(o)]
    return bool(encodes) and all(o in encodes or _is_lookup(o) for o in options)


def _is_encode(e: ast.expr) -> bool:
    if not isinstance(e, ast.Call):
        return False
    called = ast.unparse(e.func)
    return any(called == c or called.endswith(f".{c}") for c in DESCRIPTOR_CALLS)


def _is_lookup(e: ast.expr) -> bool:
    """``c.get(k)`` or ``c.pop(k)``: a value read from a container (not ``x[i]``, which may
    be a tensor's values)."""
    return (
        isinstance(e, ast.Call)
        and isinstance(e.func, ast.Attribute)
        and e.func.attr in ("get", "pop")
    )


def worst(classes: Iterable[str]) -> str:
    """TENSOR over UNKNOWN over DESCRIPTOR over PLAN; UNKNOWN for none."""
    found = set(classes)
    for c in (TENSOR, UNKNOWN, DESCRIPTOR, PLAN):
        if c in found:
            return c
    return UNKNOWN


def module_of(path: str) -> str:
    """The dotted module a project-relative file path defines (``pkg/__init__.py`` -> ``pkg``)."""
    parts = path[: -len(".py")].split("/") if path.endswith(".py") else path.split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_geometry(
    tree: ast.Module, path: str, exports: Mapping[str, frozenset[str]]
) -> frozenset[str]:
    """How this file calls the geometry helpers of other files: ``exports`` maps a module to its
    geometry functions; ``from m import f [as g]`` gives ``g``, ``from pkg import m [as n]`` and
    ``import m as n`` give ``n.f``, ``import m`` gives ``m.f``. Relative imports are resolved
    against ``path``'s package."""
    package = module_of(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in exports.get(mod, ()):
                    out.add(local)
                for f in exports.get(f"{mod}.{alias.name}" if mod else alias.name, ()):
                    out.add(f"{local}.{f}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name
                out.update(f"{local}.{f}" for f in exports.get(alias.name, ()))
    return frozenset(out)
