"""The knobs a Triton kernel file already has, found by reading its code (no edit needed).

* ``@triton.autotune(configs=[triton.Config({...}, num_warps=.., num_stages=..), ...])``: each
  config is an entry ``<file>@<kernel>.configs[<i>]``; its knobs are the literal values of the
  config dict and ``num_warps`` / ``num_stages`` (Triton's defaults when not passed; a move then
  appends the keyword). ``configs`` may be a list literal or a module-level name bound to one.
* Configs built by a comprehension (``[triton.Config({"BT": bt}, num_warps=w) for w in [2, 4]
  for bt in BT_LIST]``): each candidate list it iterates over is a knob, whether written inline
  (``<file>@<kernel>.configs.<w>``) or a module-level name bound to a literal list
  (``<file>@module.BT_LIST``, shared by every kernel that reads it). A move narrows the
  autotuner's choice: one candidate, or the list without its first or last candidate.
* Kernel launches ``kernel[grid](..., BLOCK_SIZE=.., num_warps=.., num_stages=..)``: each launch
  is an entry ``<file>@<function>/<kernel>[]``; its knobs are those keywords (``BLOCK*`` in any
  case). A literal moves to its power-of-two neighbours. A value computed at run time (the
  ``calculate_settings`` style: ``BLOCK_SIZE, num_warps = calculate_settings(n)``) moves by a
  factor written at the launch (``num_warps=num_warps * 2``), so it still follows the shape.
  A ``BLOCK*`` variable that the function also uses elsewhere (a grid, a loop bound) is not
  scaled at the launch alone. A value read from a config object (``cfg.num_warps``) is left to
  the place that defines it (a tunables file or a declared knob). A launch of a plain
  ``@triton.jit`` kernel of the op's kernel files that omits ``num_warps`` / ``num_stages``
  gets them as knobs at Triton's defaults, unless its ``**`` arguments may pass them (a dict
  that sets them, or one this reading cannot see into: a keyword appended after it would be
  passed twice).

Declared knobs (:mod:`.declared`) override what is found at the same place.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.guard.syntax import is_jit, jit_aliases, module_values
from kernel_ratchet.knobs.declared import KnobDecl, assignment_entries, declarations_for
from kernel_ratchet.knobs.heuristics import heuristic_keys
from kernel_ratchet.knobs.model import (
    UPPER,
    Computed,
    Entry,
    Knob,
    Offsets,
    factor_of,
    literal,
    neighbours,
    parse_python,
)
from kernel_ratchet.knobs.tunables import Tunables

#: Triton's launch defaults (``triton.Config`` and a plain launch, NVIDIA).
DEFAULTS = {"num_warps": 4, "num_stages": 3}
MAX_WARPS = UPPER["num_warps"]
#: Scale factors tried on a launch argument computed at run time.
#: At equal distance the earlier value is tried first: a larger block still covers a row that
#: one program handles whole, a smaller one may not.
FACTORS = {"num_warps": [1.0, 2.0, 0.5, 4.0, 0.25], "num_stages": [1.0, 2.0, 0.5]}
BLOCK_FACTORS = [1.0, 2.0, 0.5, 4.0]


@dataclass(frozen=True)
class Discovered:
    """The knobs of one kernel file, and the declarations that matched nothing in it."""

    tunables: Tunables
    unmatched: tuple[KnobDecl, ...] = ()


def is_launch_knob(name: str) -> bool:
    return name in DEFAULTS or name.upper().startswith("BLOCK")


def _values(name: str, value: Any) -> list[Any]:
    vals = neighbours(value) if type(value) is int or type(value) is bool else []
    if name == "num_warps":
        vals = [v for v in vals if v <= MAX_WARPS]
    return vals


def _own_nodes(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function body, not descending into nested functions or classes."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def _is_autotune(decorator: ast.expr) -> bool:
    """``@triton.autotune(...)`` or a library's own autotuner (``@fla_cache_autotune(...)``):
    any decorator whose name ends in ``autotune``."""
    return ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator).endswith(
        "autotune"
    )


def _kernels(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(module-level ``@triton.jit`` kernels, ``@triton.autotune`` kernels) by name."""
    jit, tuned = set(), set()
    aliases = jit_aliases(tree)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            if is_jit(fn, aliases):
                jit.add(fn.name)
            if any(_is_autotune(d) for d in fn.decorator_list):
                tuned.add(fn.name)
    return jit, tuned


def config_lists(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """(kernel, configs expression) of every autotune decorator; a module-level name is
    replaced by the expression bound to it."""
    module = module_values(tree)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for dec in fn.decorator_list:
            if not (isinstance(dec, ast.Call) and _is_autotune(dec)):
                continue
            kw = {k.arg: k.value for k in dec.keywords}
            cfgs = kw.get("configs", dec.args[0] if dec.args else None)
            if isinstance(cfgs, ast.Name):
                cfgs = module.get(cfgs.id)
            if cfgs is not None:
                yield fn.name, cfgs


def _autotune_configs(tree: ast.Module) -> Iterator[tuple[str, int, ast.Call]]:
    """(kernel, index, ``Config(...)`` call) of every literal autotune config list."""
    for kernel, cfgs in config_lists(tree):
        if isinstance(cfgs, ast.List | ast.Tuple):
            for i, el in enumerate(cfgs.elts):
                if isinstance(el, ast.Call) and ast.unparse(el.func).endswith("Config"):
                    yield kernel, i, el


def _config_comprehensions(tree: ast.Module) -> Iterator[tuple[str, ast.comprehension]]:
    """(kernel, generator) of every ``for <name> in <candidates>`` of an autotune config
    list built by a comprehension."""
    for kernel, cfgs in config_lists(tree):
        if isinstance(cfgs, ast.ListComp):
            for gen in cfgs.generators:
                if isinstance(gen.target, ast.Name):
                    yield kernel, gen


def narrowed(values: list[Any]) -> list[list[Any]]:
    """The moves of an autotuner's candidate list: each candidate alone, then the list without
    its first or without its last candidate (none of them the list itself)."""
    out: list[list[Any]] = [[v] for v in values] if len(values) > 1 else []
    if len(values) > 2:
        out += [values[1:], values[:-1]]
    return out


def _candidate_entries(
    tree: ast.Module, rel: str, off: Offsets
) -> Iterator[tuple[Entry, dict[str, list[Any]]]]:
    """(entry, space) of every literal candidate list an autotune comprehension iterates."""
    module = module_values(tree)
    seen: set[str] = set()
    for kernel, gen in _config_comprehensions(tree):
        node, name = gen.iter, gen.target.id
        key = f"{rel}@{kernel}.configs.{name}"
        if isinstance(node, ast.Name) and node.id in module:
            node, name, key = module[node.id], node.id, f"{rel}@module.{node.id}"
        ok, value = literal(node)
        if not ok or not isinstance(value, list) or key in seen:
            continue
        seen.add(key)
        knob = Knob(name, value, off.span(node))
        yield (
            Entry(key, (key,), "candidates", {name: knob}, scope=(kernel,)),
            {name: narrowed(value)},
        )


def _config_entry(rel: str, kernel: str, i: int, call: ast.Call, off: Offsets) -> Entry:
    knobs: dict[str, Knob] = {}
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    params = call.args[0] if call.args else kw.get("kwargs")
    if isinstance(params, ast.Dict):
        for k, v in zip(params.keys, params.values, strict=True):
            ok, value = literal(v)
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and ok:
                knobs[k.value] = Knob(k.value, value, off.span(v))
    for name, default in DEFAULTS.items():
        ok, value = literal(kw[name]) if name in kw else (True, default)
        if ok:
            knobs[name] = Knob(name, value, off.span(kw[name]) if name in kw else None)
    last = [*call.args, *(k.value for k in call.keywords)]
    insert_at = max(off.span(n)[1] for n in last) if last else off.span(call)[1] - 1
    key = f"{rel}@{kernel}.configs[{i}]"
    return Entry(key, (key,), "autotune", knobs, insert_at, scope=(kernel,))


def _block_scalable(fn: ast.AST, expr: ast.AST, launch_uses: Counter[str]) -> bool:
    """A ``BLOCK*`` value may be scaled at the launch alone unless it is a variable the
    function also reads elsewhere (then the launch and the other use would disagree)."""
    if not isinstance(expr, ast.Name):
        return True
    reads = sum(
        1
        for n in _own_nodes(fn)
        if isinstance(n, ast.Name) and n.id == expr.id and isinstance(n.ctx, ast.Load)
    )
    return reads <= launch_uses[expr.id]


def _launch_knob(kw: ast.keyword, data: bytes, off: Offsets) -> tuple[Knob, list[Any]] | None:
    """The knob of one launch keyword and its values, or None when it is not moved here."""
    ok, value = literal(kw.value)
    if ok:
        return Knob(kw.arg, value, off.span(kw.value)), _values(kw.arg, value)
    expr, factor = factor_of(kw.value)
    if isinstance(expr, ast.Attribute | ast.Subscript):
        return None  # read from a config object: moved where it is defined
    start, end = off.span(expr)
    knob = Knob(kw.arg, factor, off.span(kw.value), base=data[start:end].decode())
    return knob, list(FACTORS.get(kw.arg, BLOCK_FACTORS))


def _splat_keys(fn: ast.AST, call: ast.Call) -> set[str] | None:
    """The keywords a launch's ``**`` arguments pass: the string keys of the dict literal each
    names (a local name assigned once, from a literal of string keys only); None when one may
    pass a keyword that cannot be read here (appending it would pass it twice)."""
    keys: set[str] = set()
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        value = kw.value
        if isinstance(value, ast.Name):
            bound = [
                n.value
                for n in _own_nodes(fn)
                if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
            ]
            value = bound[0] if len(bound) == 1 else None
        if not isinstance(value, ast.Dict):
            return None
        for k in value.keys:
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                return None  # a ``**`` inside the literal, or a computed key
            keys.add(k.value)
    return keys


def _launch_entries(
    tree: ast.Module, rel: str, data: bytes, off: Offsets, plain: set[str]
) -> Iterator[tuple[Entry, dict[str, list[Any]]]]:
    """(entry, space) of every kernel launch ``kernel[grid](...)`` inside a function; what a
    kernel's heuristics set is not a knob of its launches (:mod:`.heuristics`)."""
    set_by = heuristic_keys(tree)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        calls = [n for n in _own_nodes(fn) if isinstance(n, ast.Call)]
        launches = sorted(
            (c for c in calls if isinstance(c.func, ast.Subscript)),
            key=lambda c: (c.lineno, c.col_offset),
        )
        bases = [factor_of(kw.value)[0] for c in launches for kw in c.keywords if kw.arg]
        uses = Counter(b.id for b in bases if isinstance(b, ast.Name))
        seen: Counter[str] = Counter()
        for call in launches:
            kernel = ast.unparse(call.func.value)
            knobs: dict[str, Knob] = {}
            space: dict[str, list[Any]] = {}
            fixed = set_by.get(kernel.split(".")[-1], frozenset())
            for kw in call.keywords:
                if fixed is not None and kw.arg in fixed:
                    continue
                found = _launch_knob(kw, data, off) if kw.arg and is_launch_knob(kw.arg) else None
                if found is None:
                    continue
                knob, values = found
                block = kw.arg.upper().startswith("BLOCK") and knob.base is not None
                if block and not _block_scalable(fn, factor_of(kw.value)[0], uses):
                    continue
                knobs[kw.arg], space[kw.arg] = knob, values
            if kernel.split(".")[-1] in plain:
                splat = _splat_keys(fn, call)
                for name, default in DEFAULTS.items():
                    if fixed is None or name in fixed:
                        continue
                    given = name in {k.arg for k in call.keywords}
                    if not given and splat is not None and name not in splat:
                        knobs[name] = Knob(name, default, None)
                        space[name] = _values(name, default)
            seen[kernel] += 1
            key = f"{rel}@{fn.name}/{kernel}[]" + (f"#{seen[kernel]}" if seen[kernel] > 1 else "")
            last = [*call.args, *(k.value for k in call.keywords)]
            insert_at = max(off.span(n)[1] for n in last) if last else off.span(call)[1] - 1
            entry = Entry(key, (key,), "launch", knobs, insert_at, scope=(fn.name, kernel))
            if knobs:
                yield entry, space


def _declare(
    decl: KnobDecl, entries: dict[str, Entry], space: dict[str, dict[str, list[Any]]], data: bytes
) -> bool:
    """Apply one declaration to the found sites of its name; True when it matched one."""
    hit = False
    for e in entries.values():
        if decl.name not in e.knobs or (decl.within and decl.within not in e.scope):
            continue
        hit = True
        kn = e.knobs[decl.name]
        if kn.base is not None:  # a declared value replaces the computed expression
            source = data[kn.span[0] : kn.span[1]].decode()
            e.knobs[decl.name] = Knob(decl.name, Computed(source), kn.span)
        space.setdefault(e.key, {})[decl.name] = list(decl.values)
    return hit


def discover(
    text: str, rel: str, decls: Sequence[KnobDecl] = (), plain: frozenset[str] = frozenset()
) -> Discovered:
    """The knobs of the kernel file ``rel`` (its text ``text``): autotune configs, launch
    arguments and the declarations of ``decls`` that live in it. ``plain``: names of plain
    ``@triton.jit`` kernels defined in other files (:func:`plain_kernels`), whose launches here
    get ``num_warps`` / ``num_stages`` knobs too. Raises KnobError when the text is not valid
    Python."""
    tree = parse_python(text, rel)
    data = text.encode()
    off = Offsets(data)
    jit, tuned = _kernels(tree)
    entries: dict[str, Entry] = {}
    space: dict[str, dict[str, list[Any]]] = {}
    for kernel, i, call in _autotune_configs(tree):
        e = _config_entry(rel, kernel, i, call, off)
        entries[e.key] = e
        space[e.key] = {k: v for k, kn in e.knobs.items() if (v := _values(k, kn.value))}
    for e, sp in _candidate_entries(tree, rel, off):
        entries[e.key], space[e.key] = e, sp
    for e, sp in _launch_entries(tree, rel, data, off, (jit | plain) - tuned):
        entries[e.key], space[e.key] = e, sp
    unmatched = []
    for decl in declarations_for(decls, rel):
        hit = _declare(decl, entries, space, data)
        for e in assignment_entries(tree, rel, decl, data, off):
            entries[e.key], space[e.key], hit = e, {decl.name: list(decl.values)}, True
        if not hit:
            unmatched.append(decl)
    for sp in space.values():
        for name in [k for k, v in sp.items() if not v]:
            del sp[name]  # declared with no values: not moved
    return Discovered(Tunables(text, entries, space), tuple(unmatched))


def parse_discovered(
    rel: str, decls: Sequence[KnobDecl] = (), plain: frozenset[str] = frozenset()
) -> Callable[[str], Tunables]:
    """A ``parse`` function for :func:`kernel_ratchet.knobs.tunables.set_knobs` on ``rel``."""
    return lambda text: discover(text, rel, decls, plain).tunables


def plain_kernels(texts: Iterable[str]) -> frozenset[str]:
    """Names of the plain (not autotuned) ``@triton.jit`` kernels defined in ``texts``; a text
    that does not parse defines none."""
    out: set[str] = set()
    for text in texts:
        try:
            jit, tuned = _kernels(ast.parse(text))
        except SyntaxError:
            continue
        out |= jit - tuned
    return frozenset(out)
