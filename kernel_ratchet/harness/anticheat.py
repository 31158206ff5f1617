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
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from kernel_ratchet.harness import digest
from kernel_ratchet.harness.cheat import CheatDetected as CheatDetected
from kernel_ratchet.harness.returned import check_output_types as check_output_types
from kernel_ratchet.harness.returned import nonfinite as nonfinite
from kernel_ratchet.harness.returned import output_tensors as output_tensors
from kernel_ratchet.harness.returned import poison as poison
from kernel_ratchet.harness.returned import refuse_shadowed as refuse_shadowed
from kernel_ratchet.harness.returned import require_rewritten as require_rewritten
from kernel_ratchet.harness.sentinel import Sentinel as Sentinel

# -- walking a case: tensors and the structure around them ---------------------------------------


_LEAVES = (torch.Tensor, bool, int, float, str, torch.dtype, torch.device)


def walk(obj: Any, path: str = "case", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Yield ``(path, leaf)`` for tensors and plain leaves (numbers, strings, None) of a case.

    Follows mappings, lists/tuples, and objects' own storage: their ``__dict__`` (read
    directly: a property or ``__getattr__`` put on the class runs no code here, and emptied
    ``__dataclass_fields__`` hide nothing) or, for slotted dataclasses, their fields (depth 6).
    """
    if obj is None or isinstance(obj, _LEAVES):
        yield path, obj
    elif depth >= 6:
        yield path, f"<{type(obj).__name__}>"
    elif dataclasses.is_dataclass(obj) and not hasattr(obj, "__dict__"):
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name), f"{path}.{f.name}", depth + 1)
    elif isinstance(obj, Mapping):
        for k in sorted(obj, key=str):
            yield from walk(obj[k], f"{path}[{k!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}[{i}]", depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type) and not callable(obj):
        for k, v in sorted(vars(obj).items()):
            yield from walk(v, f"{path}.{k}", depth + 1)
    else:
        yield path, f"<{type(obj).__name__}>"


def tensors(obj: Any) -> list[tuple[str, torch.Tensor]]:
    """Every tensor reachable from ``obj`` with its path."""
    return [(p, v) for p, v in walk(obj) if isinstance(v, torch.Tensor)]


@dataclasses.dataclass(frozen=True)
class InputSnapshot:
    """The input tensors of a case as built by ``make_case`` (objects kept) and their hashes,
    the case itself, and each tensor's class."""

    items: tuple[tuple[str, torch.Tensor, str], ...]
    structure: tuple[tuple[str, Any], ...]
    case: Any = None
    types: tuple[type, ...] = ()


def _signature(obj: Any) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for p, v in walk(obj):
        if isinstance(v, torch.Tensor):
            out.append((p, (tuple(v.shape), str(v.dtype), str(v.device))))
        else:
            out.append((p, v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)))
    return tuple(out)


def snapshot_inputs(case: Any, before: InputSnapshot | None = None) -> InputSnapshot:
    """Hash every tensor of a freshly built case (call right after ``make_case``); after new
    values were written into it, pass the snapshot ``before`` them: its inputs, classes and
    structure stay the snapshot's. Tensors the op itself left in the case since (a forward's
    state for its backward, rebuilt every call) are not inputs and are not hashed."""
    found = tensors(case)
    if before is not None:
        inputs = {p for p, _, _ in before.items}
        found = [(p, t) for p, t in found if p in inputs]
    if not found:
        raise CheatDetected(
            "no input tensor is reachable in the case (make_case built none, or its fields "
            "were hidden): nothing the op reads could be checked"
        )
    refuse_shadowed(found, "input")
    items = tuple((p, t, digest.tensor_digest(t)) for p, t in found)
    kinds = tuple(type(t) for _, t in found)
    if before is not None and [p for p, _, _ in before.items] == [p for p, _ in found]:
        kinds = before.types
    structure = before.structure if before is not None else _signature(case)
    return InputSnapshot(items, structure, case, kinds)


def replaced_inputs(snap: InputSnapshot, inplace: frozenset[str] = frozenset()) -> list[str]:
    """The snapshot's input paths whose tensor the case no longer holds, or whose class was
    changed (``t.__class__ = ...``), but for the declared in-place fields."""
    if snap.case is None:
        return []
    now = dict(tensors(snap.case))
    out = []
    for (p, t, _), kind in zip(snap.items, snap.types, strict=True):
        if _under(p, inplace):
            continue
        if now.get(p) is not t:
            out.append(f"{p} (another object)")
        elif type(t) is not kind:
            out.append(f"{p} (now {type(t).__module__}.{type(t).__qualname__})")
    return out


def inputs_intact(snap: InputSnapshot, inplace: frozenset[str] = frozenset()) -> None:
    """Raise CheatDetected when an input tensor was replaced in the case, changed class or
    hides a method of torch.Tensor (cheap: no hash), but for the declared in-place fields."""
    swapped = replaced_inputs(snap, inplace)
    if swapped:
        raise CheatDetected(
            f"input replaced: the candidate replaced its input tensor(s) {', '.join(swapped)} "
            "in the case; the op must read the tensors make_case built (new values written "
            "into them are how the checks know it follows its inputs)"
        )
    refuse_shadowed([(p, t) for p, t, _ in snap.items if not _under(p, inplace)], "input")


def verify_inputs(snap: InputSnapshot, inplace: frozenset[str] = frozenset()) -> None:
    """Raise CheatDetected when an input tensor is not intact (:func:`inputs_intact`) or
    changed content since the snapshot, but for the declared in-place fields (``inplace``:
    their paths, see :mod:`.inplace`)."""
    inputs_intact(snap, inplace)
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
    inputs_intact(snap)
    new = dict(tensors(fresh))
    with torch.no_grad():
        for p, t, _ in snap.items:
            torch.Tensor.copy_(*_stored(t, new[p]))
    return True


def _stored(t: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(``t``, ``src``) cut to the elements ``t`` stores once: index 0 of each dimension that
    ``t`` repeats with stride 0 (an input declared ``layout=broadcast``, which cannot be
    written as a whole)."""
    repeated = [st == 0 and n > 1 for st, n in zip(t.stride(), t.shape, strict=True)]
    if not any(repeated):
        return t, src
    index = tuple(0 if r else slice(None) for r in repeated)
    return t[index], src[index]


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
