"""Anti-cheat checks that run inside a worker process, around the candidate's calls.

A candidate that fakes a gain is a recorded outcome (category ``"cheat"``), never an exception
that escapes the worker. Every check below raises :class:`CheatDetected` with one readable
sentence; the worker converts it into a ``WorkerResult``.

What is checked, and against which cheat:

* :class:`Sentinel` -- the timers (``time.perf_counter``, ``torch.cuda.synchronize``,
  ``torch.cuda.Event`` and its methods, ``CUDAGraph.replay``), torch's comparison functions
  (``torch.allclose``, ``torch.testing.assert_close``, ``Tensor.__sub__``...), the library
  surface of :mod:`.surface` (torch's tensor classes and functions, the standard library the
  worker reads) and every name the harness's modules call are captured by identity when the
  worker starts, before the project is imported, and verified before and after every request
  and right before every comparison with the reference; so are the process-wide state of
  :mod:`.process_guard` (profile/trace hooks, entered torch modes, numeric flags) and the
  threads alive at start (Python threads before the import, OS threads after it: native pools
  of the project's libraries are not its work): a background thread or a child process left
  running by the candidate's calls is reported.
* :func:`snapshot_inputs` / :func:`verify_inputs` -- a hash of every input tensor before and after
  the candidate ran: an op that modifies its inputs (or caches results in them). The hashes
  are :func:`kernel_ratchet.harness.digest.tensor_digest`, called through its module so the
  Sentinel watches the function really called.
* :func:`check_output_types` (:mod:`.returned`) -- every output must be a plain
  ``torch.Tensor`` (not a subclass, not a lazy wrapper, not a Python number): a lazy tensor
  subclass that computes on access.
* :func:`poison` / :func:`nonfinite` (:mod:`.returned`) -- outputs of the previous timed call
  are NaN-filled before the next one, and must come back finite: a returned cached tensor,
  partial writes.
* :func:`rebind` -- fresh values from another seed are copied *into the same tensor objects*
  (same ``id()``, same ``data_ptr``) before the check and before every timed sample, and the
  op must follow them: an output cache keyed on
  ``id()`` / ``data_ptr`` / shape, or work skipped on "repeated" inputs.
* :func:`check_stream_order` -- (CUDA) the outputs must be complete on the calling stream
  when the call returns: work on a side stream that is not joined.
* :func:`kernel_ratchet.harness.roofline_check.check_roofline` -- a time below what the
  caller's measured peak allows.

Known limits: a cache keyed on the *content* of the inputs that returns a fresh copy of a
correct result is not detected here (its cost is a hash plus a copy); the transfer guard's
training idiom and the static audit are the backstop. Everything here runs in the candidate's
process: code that reads the harness's frames or patches native functions can hide from it.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from kernel_ratchet.harness import digest, import_watch, process_guard, surface
from kernel_ratchet.harness.cheat import CheatDetected as CheatDetected
from kernel_ratchet.harness.returned import check_output_types as check_output_types
from kernel_ratchet.harness.returned import nonfinite as nonfinite
from kernel_ratchet.harness.returned import output_tensors as output_tensors
from kernel_ratchet.harness.returned import poison as poison
from kernel_ratchet.harness.returned import require_rewritten as require_rewritten

#: Thread-name prefixes of threads that infrastructure (not the candidate) may start lazily.
ALLOWED_THREAD_PREFIXES: tuple[str, ...] = ("pydevd", "pytest_timeout", "ThreadPoolExecutor-0")


# -- sentinel: timers and harness functions unpatched, no stray threads --------------------------


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

    @classmethod
    def capture(cls, modules: tuple[Any, ...] = ()) -> Sentinel:
        """Snapshot the timers, torch's comparison functions and every function/class (and
        class method) of ``modules``; then the process state after warming torch's pools."""
        originals: dict[tuple[int, str], tuple[Any, str, Any]] = {}

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
                    for attr in _callables(value):
                        keep(value, attr, f"{mod.__name__}.{name}.{attr}")
        process_guard.warm_torch()
        threads = frozenset(t.ident or 0 for t in threading.enumerate())
        bodies = {k: b for k, (_, _, v) in originals.items() if (b := surface.body(v))}
        return cls(originals, threads, process_guard.ProcessState.capture(), bodies=bodies)

    def project_imported(self) -> None:
        """Count the OS threads alive once the project is imported as the process's own."""
        if self.process is not None:
            self.process = self.process.with_current_os_threads()

    def verify(self) -> None:
        """Raise CheatDetected naming every patched object, installed hook, entered torch
        mode or changed numeric flag. Called before and after every request and right before
        every comparison with the reference."""
        patched = [
            label
            for key, (owner, label, original) in self.originals.items()
            if (now := vars(owner).get(key[1], _ABSENT)) is not original
            and not surface.library_rewrap(now, original)
            or (key in self.bodies and surface.body(original) != self.bodies[key])
        ]
        if patched:
            raise CheatDetected(
                "timing, comparison or harness functions were replaced after the worker "
                f"started: {', '.join(sorted(patched))} (a patched timer fakes the measurement, "
                "a patched comparison fakes the check)"
            )
        replaced = self.imports.replaced() if self.imports else []
        if replaced:
            raise CheatDetected(import_watch.describe(replaced))
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
                f"a profile/trace hook was installed: {', '.join(hooks)}; a hook can rewrite "
                "the checker's variables when a comparison starts"
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

    def new_threads(self, allowed: tuple[str, ...] = ALLOWED_THREAD_PREFIXES) -> list[str]:
        """Names of alive Python threads that did not exist at capture time."""
        return [
            t.name
            for t in threading.enumerate()
            if (t.ident or 0) not in self.threads
            and t.is_alive()
            and not t.name.startswith(allowed)
        ]

    def verify_threads(self, allowed: tuple[str, ...] = ALLOWED_THREAD_PREFIXES) -> None:
        """Raise CheatDetected when the candidate left a thread (Python or OS level) or a
        child process running."""
        extra = self.new_threads(allowed)
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


# -- walking a case: tensors and the structure around them ---------------------------------------


_LEAVES = (torch.Tensor, bool, int, float, str, torch.dtype, torch.device)


def walk(obj: Any, path: str = "case", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for tensors and plain leaves (numbers, strings, None) of a case.

    Follows dataclass fields, mappings, lists/tuples and plain objects' ``__dict__`` (depth 6).
    """
    if obj is None or isinstance(obj, _LEAVES):
        yield path, obj
    elif depth >= 6:
        yield path, f"<{type(obj).__name__}>"
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name), f"{path}.{f.name}", depth + 1)
    elif isinstance(obj, Mapping):
        for k in sorted(obj, key=str):
            yield from walk(obj[k], f"{path}[{k!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}[{i}]", depth + 1)
    elif hasattr(obj, "__dict__") and not callable(obj):
        for k, v in sorted(vars(obj).items()):
            yield from walk(v, f"{path}.{k}", depth + 1)
    else:
        yield path, f"<{type(obj).__name__}>"


def tensors(obj: Any) -> list[tuple[str, torch.Tensor]]:
    """Every tensor reachable from ``obj`` with its path."""
    return [(p, v) for p, v in walk(obj) if isinstance(v, torch.Tensor)]


@dataclasses.dataclass(frozen=True)
class InputSnapshot:
    """The input tensors of a case as built by ``make_case`` (objects kept) and their hashes."""

    items: tuple[tuple[str, torch.Tensor, str], ...]
    structure: tuple[tuple[str, Any], ...]


def _signature(obj: Any) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for p, v in walk(obj):
        if isinstance(v, torch.Tensor):
            out.append((p, (tuple(v.shape), str(v.dtype), str(v.device))))
        else:
            out.append((p, v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)))
    return tuple(out)


def snapshot_inputs(case: Any) -> InputSnapshot:
    """Hash every tensor of a freshly built case (call right after ``make_case``)."""
    items = tuple((p, t, digest.tensor_digest(t)) for p, t in tensors(case))
    return InputSnapshot(items, _signature(case))


def verify_inputs(snap: InputSnapshot, inplace: frozenset[str] = frozenset()) -> None:
    """Raise CheatDetected when any input tensor's content changed since the snapshot, but
    for the declared in-place fields (``inplace``: their paths, see :mod:`.inplace`)."""
    changed = [
        p
        for p, t, before in snap.items
        if not _under(p, inplace) and digest.tensor_digest(t) != before
    ]
    if changed:
        raise CheatDetected(
            f"input modified: the candidate modified its input tensor(s) {', '.join(changed)} "
            "(inputs must be read-only)"
        )


def _under(path: str, roots: frozenset[str]) -> bool:
    return any(path == r or path.startswith((r + ".", r + "[")) for r in roots)


def rebind(case: Any, snap: InputSnapshot, fresh: Any) -> bool:
    """Copy the tensors of ``fresh`` (another seed) into the original input tensor objects.

    Returns False (and changes nothing) when the two cases do not have the same structure
    (different tensor shapes or different plain values, e.g. seeded routing), or when the case
    no longer holds the original tensor objects; the caller then skips the check.
    On success ``snap`` is stale; take a new one.
    """
    if _signature(fresh) != snap.structure:
        return False
    current = dict(tensors(case))
    if any(current.get(p) is not t for p, t, _ in snap.items):
        return False
    new = dict(tensors(fresh))
    with torch.no_grad():
        for p, t, _ in snap.items:
            t.copy_(new[p])
    return True


def scrub_allocator(nbytes: list[int], device: str) -> None:
    """Allocate, NaN-fill and free blocks of the given sizes, so a fresh ``torch.empty`` of the
    same size likely starts as NaN instead of the previous call's correct values (partial
    writes that rely on stale memory then fail)."""
    blocks = [
        torch.full((max(n // 4, 1),), math.nan, dtype=torch.float32, device=device) for n in nbytes
    ]
    del blocks


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-identical (NaN payloads included), for any dtype and layout."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def check_stream_order(out: Any, what: str) -> None:
    """CUDA: copy the outputs on the calling stream right after the call returns, then
    synchronize the device and compare. An op that does its work on another stream without
    making the calling stream wait is caught when the copy saw an unfinished result.
    (Timing is safe either way: the engine synchronizes the whole device before its end event.)
    """
    outs = output_tensors(out, what)
    early = [t.clone() for _, t in outs]  # ordered after the op only if it used this stream
    torch.cuda.synchronize()
    # bitwise: NaN != NaN would misreport a NaN-holding output (a partial write, a poisoned
    # cached tensor) as side-stream work
    late = [n for (n, t), e in zip(outs, early, strict=True) if not _same_bits(t, e)]
    if late:
        raise CheatDetected(
            f"{what} output(s) {', '.join(late)} were not ready on the calling stream when the "
            "call returned: work on a side stream that the calling stream does not wait for"
        )
