"""Which lines of a round's change no measured launch reaches.

A round is timed and checked on its shapes; code of a JIT kernel that none of their launches
runs is measured by nothing. A helper no launched kernel calls, a kernel no shape launches, a
branch under ``if WRITE_QT:`` that every launch took with ``WRITE_QT=False``: a change there
is decided on timings of code it did not touch, and a fix there is checked by nothing the
round ran. The harness records each launch's scalar arguments
(:mod:`kernel_ratchet.harness.launches`); :func:`unreached` reads, for each changed line of a
JIT function, the ``if`` conditions around it with every recorded argument set of its kernel
(a helper's from its callers' call sites, their arguments bound to its parameters), and names
the lines no set reaches. A condition that names anything but parameters (a program id, a
loaded value) counts as reachable: only what the arguments decide is called unreached.
Changes outside JIT functions (host code) are not judged, nor, where a launched kernel is
defined outside the files read, helpers that kernel might call.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernel_ratchet.guard.jit_paths import (
    UNKNOWN,
    Branch,
    branches,
    enclosing,
    evaluate,
    jit_functions,
)

#: At most this many argument sets are followed per function (callers multiply them).
MAX_ENVS = 256

Env = Mapping[str, Any]


@dataclass(frozen=True)
class Unreached:
    """Changed lines ``first``-``last`` of ``file``, in JIT function ``function``, that no
    recorded launch reaches, and why."""

    file: str
    function: str
    first: int
    last: int
    why: str

    def text(self) -> str:
        lines = f"{self.first}" if self.first == self.last else f"{self.first}-{self.last}"
        return f"{self.file}:{lines} (`{self.function}`): {self.why}"


def changed_lines(old: str | None, new: str) -> list[int]:
    """The 1-based lines of ``new`` that a diff from ``old`` adds or replaces; where lines were
    only removed, the line before the removal (the block they left)."""
    if old is None:
        return list(range(1, new.count("\n") + 2))
    a, b = old.splitlines(), new.splitlines()
    out: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out.update(range(j1 + 1, j2 + 1))
        elif tag == "delete":
            out.add(max(j1, 1))
    return sorted(out)


class _Program:
    """The JIT functions of the changed files, by name, and the argument sets reaching each."""

    def __init__(self, trees: Mapping[str, ast.Module], launched: Mapping[str, Sequence[Env]]):
        self.launched = launched
        self.by_name: dict[str, list[ast.FunctionDef]] = {}
        for tree in trees.values():
            for fn in jit_functions(tree):
                self.by_name.setdefault(fn.name, []).append(fn)
        # every launched kernel's source is among the files read: a helper's callers are all
        # known (else a kernel defined elsewhere may call it, and only kernels are judged)
        self.complete = all(name in self.by_name for name in launched)
        self._envs: dict[str, list[Env]] = {}
        self._busy: set[str] = set()

    def envs(self, name: str) -> list[Env]:
        """The argument sets ``name`` runs with: its own launches' and those its callers pass."""
        if name in self._envs:
            return self._envs[name]
        if name in self._busy:  # recursion: what is known so far
            return []
        self._busy.add(name)
        found: list[Env] = [dict(e) for e in self.launched.get(name, ())]
        for caller_name, fns in self.by_name.items():
            for caller in fns:
                for line, args, keywords in _uses_of(caller, name):
                    for env in self.envs(caller_name):
                        if len(found) >= MAX_ENVS:
                            break
                        if not _blocked(branches(caller, line), env):
                            bound = {} if args is None else self._bind(name, args, keywords, env)
                            if bound not in found:
                                found.append(bound)
        self._busy.discard(name)
        self._envs[name] = found
        return found

    def _bind(self, name: str, args: list[ast.expr], keywords: list[ast.keyword], env: Env) -> Env:
        """The callee's parameters the call's arguments decide, with its defaults."""
        fn = self.by_name[name][0]
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        with_default = params[len(params) - len(fn.args.defaults) :]
        defaults = dict(zip(with_default, fn.args.defaults, strict=True))
        for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True):
            if d is not None:
                defaults[a.arg] = d
        out: dict[str, Any] = {}
        for p, d in defaults.items():
            out[p] = evaluate(d, {})
        for p, arg in zip(params, args, strict=False):
            if isinstance(arg, ast.Starred):
                break
            out[p] = evaluate(arg, env)
        for kw in keywords:
            if kw.arg is not None:
                out[kw.arg] = evaluate(kw.value, env)
        return {k: v for k, v in out.items() if v is not UNKNOWN}


Use = tuple[int, list[ast.expr] | None, list[ast.keyword]]


def _uses_of(caller: ast.FunctionDef, name: str) -> list[Use]:
    """Where ``caller`` runs the JIT function ``name``: ``(line, arguments, keywords)`` for a
    call, and for a ``(name, (args...))`` pair (what ``gl.warp_specialize`` takes); ``(line,
    None, [])`` for any other reference (a function handed to ``tl.reduce``, say), whose
    arguments are not known."""
    uses: list[Use] = []
    seen: set[int] = set()
    for node in ast.walk(caller):
        if isinstance(node, ast.Call) and _names(node.func, name):
            uses.append((node.lineno, list(node.args), list(node.keywords)))
            seen.add(id(node.func))
        elif (
            isinstance(node, ast.Tuple)
            and len(node.elts) == 2
            and _names(node.elts[0], name)
            and isinstance(node.elts[1], ast.Tuple)
        ):
            uses.append((node.lineno, list(node.elts[1].elts), []))
            seen.add(id(node.elts[0]))
    for node in ast.walk(caller):
        if _names(node, name) and id(node) not in seen:
            uses.append((node.lineno, None, []))
    return uses


def _names(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


def _blocked(path: Sequence[Branch], env: Env) -> Branch | None:
    """The first branch of ``path`` the arguments ``env`` decide against, or None."""
    for br in path:
        v = evaluate(br.test, env)
        if v is not UNKNOWN and bool(v) is not br.body:
            return br
    return None


def _why(fn: ast.FunctionDef, path: Sequence[Branch], envs: Sequence[Env]) -> str | None:
    """Why no argument set reaches a line under ``path``; None when one does."""
    if not envs:
        return (
            f"no measured launch runs `{fn.name}`, directly or through a JIT function that calls it"
        )
    blocked = [_blocked(path, env) for env in envs]
    if any(b is None for b in blocked):
        return None
    n = f"{len(envs)} argument set{'s' if len(envs) > 1 else ''}"
    for br in path:
        if all(b == br for b in blocked):
            return f"under {br.text()}, which no recorded launch of `{fn.name}` takes ({n})"
    conds = "; ".join(br.text() for br in path)
    return f"under {conds}: no recorded launch of `{fn.name}` takes them all ({n})"


def unreached(
    before: Mapping[str, str], after: Mapping[str, str], launched: Mapping[str, Sequence[Env]]
) -> list[Unreached]:
    """The changed lines of JIT functions in ``after`` (path -> source; ``before`` the same
    files as the incumbent has them) that no argument set in ``launched`` (kernel name -> the
    argument sets it was launched with) reaches, grouped in runs of lines."""
    trees: dict[str, ast.Module] = {}
    for rel, text in after.items():
        try:
            trees[rel] = ast.parse(text)
        except SyntaxError:
            continue
    prog = _Program(trees, launched)
    found: list[Unreached] = []
    for rel, tree in sorted(trees.items()):
        if before.get(rel) == after[rel]:
            continue
        funcs = jit_functions(tree)
        run_open = False  # the previous changed line is unreached for the same reason
        for line in changed_lines(before.get(rel), after[rel]):
            fn = enclosing(funcs, line)
            judged = fn is not None and (prog.complete or fn.name in launched)
            why = _why(fn, branches(fn, line), prog.envs(fn.name)) if judged else None
            if fn is None or why is None:
                run_open = False
                continue
            last = found[-1] if found and run_open else None
            if last and (last.file, last.function, last.why) == (rel, fn.name, why):
                found[-1] = Unreached(rel, fn.name, last.first, line, why)
            else:
                found.append(Unreached(rel, fn.name, line, line, why))
            run_open = True
    return found
