"""The project's own modules, frozen as they stood when their import finished.

The reference, the adapter and the focused test are the project's code; a candidate that
rebinds one of their functions in memory (``reference.matmul_ref = agreeable``) makes every
in-process comparison agree with its wrong output while no file outside the kernel changes.

:class:`ImportWatch` is a ``sys.meta_path`` finder installed before the project is imported.
It lets the usual finders find each module and, for files under the project's root (not a
``site-packages``), records the module's namespace at the end of its own execution: every
module bound in it, every function or class defined in a project module (and a class's
methods), every library function bound in it (``from torch import rsqrt``), and each
function's code object. :meth:`ImportWatch.replaced` names what no longer holds: a name
rebound or deleted, a function's ``__code__`` swapped, a project module replaced in
``sys.modules`` by an object that was not loaded from its file.

Honest code is not affected: a module changing its *own* state (a dict cache, a lazily built
kernel bound to a name that held ``None``, a dispatcher that rebinds its name to another
function its own file defines) is not watched; a project that rebinds one of its
own functions from another module after both were imported is refused (do it in the module
itself). Limit: this runs in the candidate's process, like every worker check.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import types
from typing import Any

from kernel_ratchet.harness.code_files import FileCode

_ABSENT = object()
_THIRD_PARTY = ("site-packages", "dist-packages")
_ACCESS_HOOKS = frozenset({"__getattr__", "__getattribute__", "__setattr__", "__delattr__"})
_WATCHED_LOADERS: dict[type, type] = {}


def _watched_loader_class(cls: type) -> type:
    """A subclass of the loader class ``cls`` that records the module after executing it."""
    if cls not in _WATCHED_LOADERS:

        def exec_module(self: Any, module: types.ModuleType) -> None:
            cls.exec_module(self, module)
            self._kr_watch.record(module)

        _WATCHED_LOADERS[cls] = type(f"Watched{cls.__name__}", (cls,), {"exec_module": exec_module})
    return _WATCHED_LOADERS[cls]


def _watchable(value: Any) -> bool:
    return callable(value) or isinstance(value, (staticmethod, classmethod))


class ImportWatch(importlib.abc.MetaPathFinder):
    """Records the project's modules as their import ends; reports later replacements."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        #: (id(owner), name) -> (owner, name, label, value, code object or None)
        self.entries: dict[tuple[int, str], tuple[Any, str, str, Any, Any]] = {}
        self.modules: dict[str, types.ModuleType] = {}
        self.packages: set[str] = set()
        self.namespaces: set[str] = set()
        #: id(class) -> (class, the names it held when its module's import ended)
        self.classes: dict[int, tuple[type, frozenset[str]]] = {}
        self.before = dict(sys.modules)
        self.files = FileCode()

    def install(self) -> ImportWatch:
        sys.meta_path.insert(0, self)
        return self

    def is_project(self, origin: str | None) -> bool:
        if not origin or not os.path.isabs(origin):
            return False
        path = os.path.realpath(origin)
        inside = path.startswith(self.root + os.sep)
        return inside and not any(p in path.split(os.sep) for p in _THIRD_PARTY)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        locations = spec.submodule_search_locations or []
        if spec.origin is None and any(self.is_project(p) for p in locations):
            self.namespaces.add(name)  # a namespace package: no code to watch
        elif self.is_project(spec.origin) and hasattr(spec.loader, "exec_module"):
            try:
                spec.loader.__class__ = _watched_loader_class(type(spec.loader))
                spec.loader._kr_watch = self
            except TypeError:  # a loader whose class cannot be extended: left unwatched
                pass
        return spec

    def record(self, module: types.ModuleType) -> None:
        """Keep the bindings of ``module`` as they stand now (its import has just ended)."""
        name = module.__name__
        self.modules[name] = module
        self.packages.add(name.split(".", 1)[0])
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            # every callable, a library's too: a name the reference imported (``from torch
            # import rsqrt``) rebound later makes it compute something else
            if isinstance(value, types.ModuleType) or _watchable(value):
                self._keep(module, attr, f"{name}.{attr}", value)
            if isinstance(value, type) and value.__module__ == name:
                self.classes[id(value)] = (value, frozenset(vars(value)))
                for sub, inner in list(vars(value).items()):
                    if _watchable(inner) and not sub.startswith("__"):
                        self._keep(value, sub, f"{name}.{attr}.{sub}", inner)

    def _keep(self, owner: Any, name: str, label: str, value: Any) -> None:
        code = value.__code__ if isinstance(value, types.FunctionType) else None
        self.entries[(id(owner), name)] = (owner, name, label, value, code)

    def kept(self) -> tuple[Any, ...]:
        """A copy of what the watch holds, for :meth:`tampered` (the watch sits in
        ``sys.meta_path``: a candidate can reach it without walking the interpreter)."""
        return (
            self.root,
            dict(self.entries),
            dict(self.modules),
            frozenset(self.packages),
            frozenset(self.namespaces),
            dict(self.before),
        )

    def tampered(self, kept: tuple[Any, ...]) -> list[str]:
        """What of ``kept`` (an earlier :meth:`kept`) the watch lost or had changed: records
        only grow, and a name taken for a namespace package must be one."""
        root, entries, modules, packages, namespaces, before = kept
        found = ["root"] if self.root != root else []
        if any(not _same(self.entries.get(k), v) for k, v in entries.items()):
            found.append("records of the project's bindings")
        for what, now, then in (
            ("modules", self.modules, modules),
            ("before", self.before, before),
        ):
            if any(now.get(k, _ABSENT) is not v for k, v in then.items()):
                found.append(what)
        if not packages <= self.packages or not namespaces <= self.namespaces:
            found.append("packages")
        fake = [
            n for n in self.namespaces - namespaces if getattr(sys.modules.get(n), "__file__", None)
        ]
        found += [f"namespace {n!r}" for n in fake]
        return found

    def intercepting(self) -> list[str]:
        """Attribute hooks added to a project class since its import: a property or other
        data descriptor, or ``__getattr__``-like methods (they run code on every read of an
        instance's fields, the checks' reads included)."""
        found = []
        for klass, names in list(self.classes.values()):
            for name in set(vars(klass)) - names:
                value = vars(klass)[name]
                data = hasattr(value, "__set__") or hasattr(value, "__delete__")
                if data or name in _ACCESS_HOOKS:
                    found.append(f"{klass.__module__}.{klass.__qualname__}.{name} (added)")
        return found

    def unlike_files(self) -> list[str]:
        """Labels of the recorded project functions whose code is not what their files hold
        now (:mod:`.code_files`)."""
        triples = [
            (label, code, getattr(self.modules.get(value.__module__), "__file__", None))
            for _, _, label, value, code in list(self.entries.values())
            if code
        ]
        return self.files.unlike(triples, self.is_project)

    def replaced(self) -> list[str]:
        """Labels of the project bindings and modules replaced since their import ended."""
        found = [
            label
            for owner, name, label, value, code in self.entries.values()
            if (
                (now := vars(owner).get(name, _ABSENT)) is not value
                and not _own_function(owner, now)
            )
            or (code is not None and value.__code__ is not code)
        ]
        found += self.intercepting()
        for name, mod in list(sys.modules.items()):
            if name.split(".", 1)[0] not in self.packages or name in self.namespaces:
                continue
            file = getattr(mod, "__file__", None)
            if file and not self.is_project(file):
                continue  # the package's modules installed elsewhere (a bundled kernel pack)
            if mod is not self.modules.get(name, self.before.get(name, _ABSENT)):
                found.append(f"sys.modules[{name!r}]")
        return sorted(found)


def _own_function(owner: Any, value: Any) -> bool:
    """Whether a module-level name now holds a function that module's file defines (a
    dispatcher that swaps itself for the implementation it picked on its first call): the
    module's own state, its code the file's (:meth:`ImportWatch.unlike_files` compares it)."""
    return (
        isinstance(owner, types.ModuleType)
        and isinstance(value, types.FunctionType)
        and value.__module__ == owner.__name__
        and os.path.realpath(value.__code__.co_filename)
        == os.path.realpath(getattr(owner, "__file__", None) or "")
    )


def _same(now: Any, then: tuple[Any, ...]) -> bool:
    if now is None or len(now) != len(then):
        return False
    return all(a is b for a, b in zip(now, then, strict=True))


def _pairs(watch: ImportWatch, modules: dict, before: dict) -> tuple[tuple[str, dict, dict], ...]:
    return (("modules", watch.modules, modules), ("before", watch.before, before))


def describe_unlike(unlike: list[str]) -> str:
    """The cheat verdict's sentence for project functions their files do not hold."""
    return (
        f"project code in memory is not what its files hold: {', '.join(unlike)}. A module "
        "executed from other text than its file's (a file rewritten while it was imported, "
        "then put back), or a file edited while the round ran: a round is judged only on code "
        "its files hold"
    )


def describe(replaced: list[str]) -> str:
    """The cheat verdict's sentence for the replaced project bindings."""
    return (
        f"project code was replaced in memory after its module was imported: "
        f"{', '.join(replaced)}; the reference, the adapter and the focused test must run as "
        "their files say (a replaced reference makes the check agree with a wrong output)"
    )
