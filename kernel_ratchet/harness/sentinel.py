"""The Sentinel: what a worker keeps before the project loads, and verifies around every call.

It keeps, by identity, the timers, torch's comparison functions, the library surface of
:mod:`.surface` and every function, class method and held module of the harness's modules
(with what each function runs), and the process-wide state of :mod:`.process_guard`; it
names whatever a candidate replaced, and the threads or child processes it left running.
In a worker an audit hook (:mod:`.audit_guard`) also refuses writes to what a kept function
runs. :mod:`.anticheat` re-exports it with the other checks.
"""

from __future__ import annotations

import builtins
import concurrent.futures
import dataclasses
import sys
import threading
import time
import types
import weakref
from collections.abc import Mapping
from queue import SimpleQueue
from typing import Any

import torch

from kernel_ratchet.harness import audit_guard, import_watch, process_guard, surface
from kernel_ratchet.harness.cheat import CheatDetected

# -- sentinel: timers and harness functions unpatched, no stray threads --------------------------


def _with_harness(modules: tuple[Any, ...]) -> tuple[Any, ...]:
    """``modules`` and every harness module loaded by now (the ones the checks call into, such
    as :mod:`.surface`, whatever list a caller gave)."""
    loaded = [m for _, m in sorted(sys.modules.items()) if m is not None and _is_harness(m)]
    return tuple(dict.fromkeys([*modules, *loaded]))


def _held(mod: Any) -> list[str]:
    """The names of ``mod`` kept besides its callables: every module it holds, and for a
    harness module every global (a constant such as a default SNR threshold, rebound, would
    change what is checked) but those it declares its own run-time state."""
    if not _is_harness(mod):
        return [n for n, v in vars(mod).items() if isinstance(v, types.ModuleType)]
    state = set(vars(mod).get("RUN_TIME_STATE", ()))
    return [n for n in vars(mod) if n not in state]


def _idle_pool_worker(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a worker of a :class:`~concurrent.futures.ThreadPoolExecutor`
    whose queue is empty and whose every worker waits for work (no work off the timed path)."""
    if type(thread) is not threading.Thread:  # a subclass could answer anything
        return False
    args = vars(thread).get("_args", ())
    ref = args[0] if args and type(args[0]) is weakref.ref else None
    pool = ref() if ref is not None else None
    if type(pool) is not concurrent.futures.ThreadPoolExecutor:
        return False
    queue, idle = vars(pool).get("_work_queue"), vars(pool).get("_idle_semaphore")
    if type(queue) is not type(SimpleQueue()) or type(idle) is not threading.Semaphore:
        return False
    return queue.qsize() == 0 and vars(idle).get("_value", -1) >= len(vars(pool)["_threads"])


#: The adapter attributes that say how its outputs are checked; fixed once it is loaded.
CONTRACT = ("min_snr_db", "inplace_outputs", "forward_state", "has_backward", "schema")


def _plain(value: Any) -> Any:
    """A copy of ``value`` that compares by content (mappings as dicts, sequences as tuples)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value


def _libraries(modules: tuple[Any, ...]) -> list[Any]:
    """The modules outside the harness that its modules hold (``dataclasses``, ``os``,
    ``torch``), and ``builtins``: the harness calls their functions by name."""
    held = {id(builtins): builtins}
    for mod in modules:
        for value in vars(mod).values():
            if isinstance(value, types.ModuleType) and not _is_harness(value):
                held.setdefault(id(value), value)
    return list(held.values())


_HARNESS = "kernel_ratchet.harness"


def _is_harness(mod: Any) -> bool:
    return str(getattr(mod, "__name__", "")).startswith(_HARNESS)


def _class_held(klass: type) -> list[str]:
    """The names of a class of the harness kept: its methods, and for the harness's own
    classes its constants too (``TimedCallChecks.SPOT_CHECKS``)."""
    if not str(klass.__module__).startswith(_HARNESS):
        return list(_callables(klass))
    return [n for n in vars(klass) if n not in ("__dict__", "__weakref__", "__doc__")]


def _callables(obj: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(obj).items() if callable(v) or isinstance(v, staticmethod)}


_ABSENT = object()  # a watched name that did not exist at capture (adding one is a patch)


@dataclasses.dataclass
class Sentinel:
    """Identity snapshot of the objects a cheat would patch, taken before the project loads,
    plus the process-wide state of :mod:`~kernel_ratchet.harness.process_guard`."""

    originals: dict[tuple[int, str], tuple[Any, str, Any]]
    threads: frozenset[int]
    process: process_guard.ProcessState | None = None
    imports: import_watch.ImportWatch | None = None  # the project's modules, once imported
    # what each kept Python function runs: the same object given a new ``__code__`` (or new
    # defaults, or another value in a closure cell) is as much a patch as a replaced name
    bodies: dict[tuple[int, str], tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    # the write-refusing audit hook of a worker process (None elsewhere)
    audit: audit_guard.Guard | None = None
    # the functions verify judges with, bound at capture: a module attribute rebound later
    # (``surface.library_rewrap`` made to call every replacement torch's own) cannot blind it
    judges: tuple[Any, ...] = (surface.body, surface.library_rewrap)
    # ``verify`` bound at capture: callers go through it, so a replaced class attribute
    # ``Sentinel.verify`` (a check that never fails) is never the one they call
    check: Any = None
    # the kept modules by name: ``from kernel_ratchet.harness import anticheat`` falls back on
    # ``sys.modules``, so a module put there in a kept one's place would be imported instead
    loaded: dict[str, Any] = dataclasses.field(default_factory=dict)
    # torch.library entries found to be torch's own lazy registrations (read once each)
    _kernels_judged: set[str] = dataclasses.field(default_factory=set)
    # the adapter's methods its own instance hid when it was loaded (its own design)
    _hid: frozenset[str] = frozenset()
    # what the import watch held at the last verification (ImportWatch.kept)
    _watch: tuple[Any, ...] | None = None
    # the adapter and the values of its contract when it was loaded (watch_adapter)
    contract: tuple[Any, dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.check = self.verify
        self._index()

    def _index(self) -> None:
        """Group the kept entries by owner, for :meth:`_replaced`."""
        by_owner: dict[int, tuple[Any, list[tuple[str, str, Any]]]] = {}
        for (ident, name), (owner, label, original) in self.originals.items():
            by_owner.setdefault(ident, (owner, []))[1].append((name, label, original))
        self._owners = list(by_owner.values())
        # what the audit hook cannot see: a value put in a closure cell of a harness function
        self._celled = [k for k, b in self.bodies.items() if b[3]]

    def _replaced(self) -> list[str]:
        """The labels of the kept entries replaced, or whose function runs something else."""
        body, rewrap = self.judges
        out = []
        for owner, entries in self._owners:
            now_of = vars(owner)
            for name, label, original in entries:
                now = now_of.get(name, _ABSENT)
                if now is not original and not rewrap(now, original):
                    out.append(label)
        # with the audit hook a kept function's code and defaults cannot change, its cells can
        watched = self.bodies if self.audit is None else self._celled
        out += [
            self.originals[k][1] for k in watched if body(self.originals[k][2]) != self.bodies[k]
        ]
        return out

    @classmethod
    def capture(cls, modules: tuple[Any, ...] = (), audit: bool = False) -> Sentinel:
        """Snapshot the timers, torch's comparison functions and every function/class (and
        class method) of ``modules`` and of every harness module loaded by then; then the
        process state after warming torch's pools. With ``audit`` (a worker process: the
        hook stays for the process's life) a write to what a kept function runs is refused
        from then on (:mod:`.audit_guard`)."""
        originals: dict[tuple[int, str], tuple[Any, str, Any]] = {}
        modules = _with_harness(modules)

        def keep(owner: Any, name: str, label: str, absent: bool = False) -> None:
            if name in vars(owner) or absent:
                originals[(id(owner), name)] = (owner, label, vars(owner).get(name, _ABSENT))

        for name in process_guard.TIMERS:
            keep(time, name, f"time.{name}")
        for name in ("synchronize", "Event", "Stream", "current_stream", "CUDAGraph", "graph"):
            keep(torch.cuda, name, f"torch.cuda.{name}")
        for klass, prefix in ((torch.cuda.Event, "torch.cuda.Event"),) + (
            ((torch.cuda.CUDAGraph, "torch.cuda.CUDAGraph"),)
            if hasattr(torch.cuda, "CUDAGraph")
            else ()
        ):
            for name in _callables(klass):
                keep(klass, name, f"{prefix}.{name}")
        for owner, name, label, absent in surface.library_surface():
            keep(owner, name, label, absent)
        own = {mod.__name__ for mod in modules}
        for mod in modules:
            for name, value in _callables(mod).items():
                keep(mod, name, f"{mod.__name__}.{name}")  # whatever the harness calls by name
                if isinstance(value, type) and getattr(value, "__module__", None) in own:
                    for attr in _class_held(value):
                        keep(value, attr, f"{mod.__name__}.{name}.{attr}")
            for name in _held(mod):  # ``os`` in ``timed_checks.os.urandom``, a threshold
                keep(mod, name, f"{mod.__name__}.{name}")
        for lib in _libraries(modules):  # what the harness calls through them
            for name in _callables(lib):
                keep(lib, name, f"{lib.__name__}.{name}")
        process_guard.warm_torch()
        threads = frozenset(t.ident or 0 for t in threading.enumerate())
        bodies = {k: b for k, (_, _, v) in originals.items() if (b := surface.body(v))}
        kept = cls(originals, threads, process_guard.ProcessState.capture(), bodies=bodies)
        kept.loaded = {m.__name__: m for m in modules}
        if audit:
            kept.audit = audit_guard.Guard()
            kept.audit.protect(originals[k][2] for k in bodies)
        return kept

    def ready_to_compare(self) -> None:
        """Right before a comparison with the reference: :meth:`verify`, and the kernels the
        dispatcher runs for the common aten operators (read from the dispatcher itself; about
        1 ms, so not between every two samples)."""
        self.check()
        changed = self.process.changed_dispatch() if self.process is not None else []
        if changed:
            raise CheatDetected(
                f"the kernels torch dispatches for {', '.join(changed)} changed after the worker "
                "started: the reference's operations would run the candidate's code"
            )

    def watch_adapter(self, adapter: Any) -> None:
        """Keep the loaded adapter too: its classes' methods (by identity, and under the
        audit hook what they run) and the values of its contract (:data:`CONTRACT`: the
        thresholds, in-place outputs...), so that a kernel that lowers a threshold in the
        adapter's own table, in place, is seen."""
        methods = audit_guard.methods_of(adapter)
        if self.audit is not None:
            self.audit.protect(methods)
        for klass in type(adapter).__mro__:
            if klass is not object and not klass.__module__.startswith("kernel_ratchet"):
                label = f"{klass.__module__}.{klass.__qualname__}"
                for name in _callables(klass):
                    self.originals[(id(klass), name)] = (
                        klass,
                        f"{label}.{name}",
                        vars(klass)[name],
                    )
        self._index()
        self.contract = (adapter, {f: _plain(getattr(adapter, f, None)) for f in CONTRACT})
        own = vars(adapter) if hasattr(adapter, "__dict__") else {}
        self._hid = frozenset(k for k in own if callable(getattr(type(adapter), k, None)))

    def _watch_tampered(self) -> list[str]:
        """The import watch's records changed (they only grow), then kept again."""
        if self.imports is None:
            return []
        lost = self.imports.tampered(self._watch) if self._watch is not None else []
        self._watch = self.imports.kept()
        return [f"the import watch's {what} (changed by the candidate)" for what in lost]

    def _contract_changed(self) -> list[str]:
        """The contract values that changed, and the adapter's methods an attribute of the
        instance now hides (``self.threshold = ...``)."""
        if self.contract is None:
            return []
        adapter, kept = self.contract
        name = type(adapter).__name__
        out = [f"{name}.{f}" for f, v in kept.items() if _plain(getattr(adapter, f, None)) != v]
        own = vars(adapter) if hasattr(adapter, "__dict__") else {}
        hidden = [k for k in own if callable(getattr(type(adapter), k, None))]
        return out + [f"{name}.{k} (on the instance)" for k in hidden if k not in self._hid]

    def keep_libraries(self, module: Any) -> None:
        """Keep, before the candidate is imported, the functions of the libraries ``module``
        (the reference's) holds, ``np`` and its loaded submodules: a kernel that sets
        ``np.sqrt`` to a constant at its import would make the reference agree with it."""
        project = self.imports.is_project if self.imports is not None else (lambda _: False)
        libs = {}
        for value in list(vars(module).values()):
            if not isinstance(value, types.ModuleType) or project(getattr(value, "__file__", None)):
                continue
            if value.__name__.split(".", 1)[0] in ("torch", "triton"):  # kept from the start
                continue
            libs[id(value)] = value
            for sub in list(vars(value).values()):
                if isinstance(sub, types.ModuleType) and sub.__name__.startswith(
                    f"{value.__name__}."
                ):
                    libs.setdefault(id(sub), sub)
        for lib in libs.values():
            for name, fn in _callables(lib).items():
                self.originals.setdefault((id(lib), name), (lib, f"{lib.__name__}.{name}", fn))
        self._index()

    def project_imported(self) -> None:
        """Count the OS threads alive and the numeric flags set once the project is imported
        as the process's own."""
        if self.process is not None:
            self.process = self.process.as_imported()

    def verify(self) -> None:
        """Raise CheatDetected naming every patched object, installed hook, entered torch
        mode or changed numeric flag. Called before and after every request and right before
        every comparison with the reference."""
        patched = self._replaced() + self._contract_changed()
        patched += self.audit.refused() if self.audit is not None else []
        patched += [
            f"sys.modules[{n!r}]" for n, m in self.loaded.items() if sys.modules.get(n) is not m
        ]
        if patched:
            raise CheatDetected(
                "timing, comparison or harness functions (or the adapter's contract) were "
                f"replaced after the worker started: {', '.join(sorted(set(patched)))} (a "
                "patched timer fakes the measurement, a patched comparison fakes the check)"
            )
        replaced = self._watch_tampered() + (self.imports.replaced() if self.imports else [])
        if replaced:
            raise CheatDetected(import_watch.describe(replaced))
        unlike = self.imports.unlike_files() if self.imports else []
        if unlike:
            raise CheatDetected(import_watch.describe_unlike(unlike))
        modes = process_guard.active_modes()
        if modes:
            raise CheatDetected(
                f"a torch mode is active: {', '.join(modes)}; it intercepts every torch "
                "operation of the checker (a TorchFunctionMode can fake the comparison)"
            )
        if self.process is None:
            return
        hooks = self.process.changed_hooks()
        if hooks:
            raise CheatDetected(
                f"a profile/trace hook or timer-signal handler was installed: "
                f"{', '.join(hooks)}; a hook can rewrite the checker's variables when a "
                "comparison starts, a handler runs the candidate's work inside the checks"
            )
        kernels = self.process.foreign_kernels(self._kernels_judged)
        if kernels:
            raise CheatDetected(
                f"a kernel of torch's own operators was registered from outside torch: "
                f"{'; '.join(kernels)}; the reference's operations would run the candidate's code"
            )
        flags = self.process.changed_flags()
        if flags:
            raise CheatDetected(
                f"process-wide numeric flags changed: {'; '.join(flags)}; they change the "
                "precision of the candidate and of the reference computed in this process"
            )

    def restore(self) -> None:
        """Put every kept object back where it was replaced (a name added where there was none
        removed): the worker's last answer, after a patch was found, is then written by the
        standard library's own ``json``, not by the candidate's."""
        for key, body in self.bodies.items():
            surface.put_body(self.originals[key][2], body)
        for (_, name), (owner, _, original) in self.originals.items():
            if vars(owner).get(name, _ABSENT) is original:
                continue
            try:
                if original is _ABSENT:
                    delattr(owner, name)
                else:
                    setattr(owner, name, original)
            except (AttributeError, TypeError):  # a read-only owner was not patched either
                continue

    def new_threads(self) -> list[str]:
        """Names of alive Python threads that did not exist at capture time, but the workers
        of a thread pool with nothing to do (torch.compile keeps one for its compiles)."""
        # read from threading's own table, never through a thread's methods (a subclass may
        # say it is not alive)
        active = dict(threading._active)  # type: ignore[attr-defined]
        return [
            str(vars(t).get("_name", "?"))
            for ident, t in active.items()
            if ident not in self.threads and not _idle_pool_worker(t)
        ]

    def verify_threads(self) -> None:
        """Raise CheatDetected when the candidate left a thread (Python or OS level) or a
        child process running."""
        extra = self.new_threads()
        if self.process is not None:
            extra += self.process.new_os_threads()
        if extra:
            raise CheatDetected(
                f"the candidate left {len(extra)} background thread(s) running "
                f"({', '.join(extra)}); work off the timed path is not allowed"
            )
        children = process_guard.child_processes() if self.process is not None else []
        if children:
            raise CheatDetected(
                f"the candidate left {len(children)} child process(es) running "
                f"({', '.join(children)}); work (or load) outside the timed process is not "
                "allowed"
            )
