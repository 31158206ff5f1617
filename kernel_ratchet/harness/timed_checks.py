"""The anti-cheat hooks around the samples of one ``time`` request in the worker.

:class:`TimedCallChecks` is the :class:`~kernel_ratchet.harness.timing.engine.SampleHooks` of a
timed request (:meth:`kernel_ratchet.harness.worker_main.Session.time`): the previous outputs
poisoned and fresh input values rebound before each sample, the outputs' types and finiteness
checked after it, and on a few secretly chosen samples the timed call's outputs compared with
the reference. :func:`derive_seed` gives the independent seeds
of those rebinds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kernel_ratchet.harness.output_match import checked_outputs as checked_outputs
from kernel_ratchet.harness.output_match import match_outputs as match_outputs

#: Engine parameters that make every timed sample exactly one call, so the NaN poison written
#: before each sample precedes every timed call (engines not listed have no such mode).
ONE_CALL_PER_SAMPLE: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {  # read-only: an item changed in place would batch the calls this mode must keep apart
        "perf_counter": MappingProxyType({"max_batch": 1}),
        "cuda_events": MappingProxyType(
            {"min_iters": 1, "max_iters": 1, "graph": "off", "quantity": None, "l2": None}
        ),
    }
)
KEPT_BUFFER_FLAG = (
    "one call per sample: the op returns a kept output buffer, so every timed call was "
    "preceded by the poison of that buffer (no batching; launch overhead is not amortized)"
)


def _draw(n: int) -> int:
    """An integer below ``n`` from the operating system's entropy, read at the call (no
    generator object whose state or methods a candidate could reach); the modulo bias is
    below 2**-50 for the sample counts used."""
    return int.from_bytes(os.urandom(8), "little") % n


class KeptOutput(Exception):
    """A timed call of a batch returned the op's kept output buffer (``str()``: the verdict
    where the op cannot be timed one call per sample)."""


def derive_seed(seed: int, k: int) -> int:
    """A second, independent seed from the request's secret seed (for rebind checks)."""
    h = hashlib.sha256(f"{seed}:{k}".encode()).digest()
    return int.from_bytes(h[:7], "little")


class TimedCallChecks:
    """Sample hooks of a ``time`` request: poison and fresh input values before each sample,
    output types and finiteness after each, and on a few secretly chosen samples the timed
    call's outputs compared with the reference after it.

    The reference is computed after the timed sample, not before: a spot-checked sample is then
    preceded by the same work as any other (the poison, a copy, the L2 flush), not by a
    reference computation (an fp32 GEMM) that leaves the clock and power state different."""

    SPOT_CHECKS = 3

    def __init__(
        self,
        session: Any,
        case: Any,
        snap: Any,
        shape: Any,
        seed: int,
        phase: str,
        call: Any,
        spot_checks: int = SPOT_CHECKS,
        one_call: bool = False,
        inplace: Any = None,
    ) -> None:
        self.s, self.case, self.snap, self.shape = session, case, snap, shape
        self.seed, self.phase, self.call = seed, phase, call
        self.spot_checks, self.one_call = spot_checks, one_call
        # declared in-place fields (kernel_ratchet.harness.inplace.InPlace, values kept): each
        # sample starts from the kept values; the checks that rest on fresh outputs skip them
        self.inplace = inplace
        self.held_fields = inplace.storages(case) if inplace else set()
        self.poisoned: set[int] = set()  # output storages NaN-filled before the coming sample
        self.last: Any = None
        self.held: tuple[Any, Any] = (None, None)  # the two outputs before ``last``
        self.samples = int(getattr(session.engine, "samples", 3))
        # an in-place op's timed calls read the previous call's results: no reference for them
        self.spots_left = self._per_collection()
        self.spots_wanted, self.collections = self.spots_left, 0  # over every collection
        self.spot_done = 0
        self.spot_s = 0.0  # host seconds in the rebinds and spot checks, outside the samples
        self.captures = _capture_count(session.engine)  # captured before this measurement
        self.what = "backward()" if phase == "bwd" else "forward()"
        # one call of each sample's batch, drawn before it from the OS's entropy, is the one
        # compared: an op that computes only the last call of a batch is seen
        self.batch_calls, self.calls, self.pick, self.picked = 1, 0, 0, None

    @property
    def prelude(self) -> Any:
        """Before every timed call of an in-place op: its declared fields written back to
        their kept values, so each call does the work of one training step (chained calls
        would feed every call the previous one's results, which can overflow to NaN and then
        read as an unwritten output); the engine subtracts the restores' own time."""
        if not self.inplace:
            return None
        return lambda: self.inplace.restore(self.case)

    def fn(self) -> None:
        # The two previous outputs stay held while the call runs, so an op that allocates its
        # output cannot get their storage back: the same storage again is a returned result.
        out = self.call(self.case)
        if self.calls == self.pick:  # the call of the batch a spot check compares
            self.picked = out
        self.calls += 1
        self.held, self.last = (self.last, self.held[0]), out

    def batch(self, calls: int) -> None:
        """A collection of samples starts, each sample ``calls`` timed calls. A second one
        (an engine that times again eagerly where a graph timing was lost in the flush
        subtraction) keeps its own samples: they get their own spot checks."""
        self.batch_calls = max(1, calls)
        self.collections += 1
        if self.collections > 1:
            self.spots_left = self._per_collection()
            self.spots_wanted += self.spots_left

    def _per_collection(self) -> int:
        """The spot checks of one collection of samples (none for an in-place op)."""
        return 0 if self.inplace else min(self.spot_checks, self.samples)

    def one_call_again(self) -> TimedCallChecks:
        """The same checks for a measurement of one call per sample (an op that keeps its
        output buffer: the poison before each sample then precedes every timed call)."""
        return TimedCallChecks(
            self.s,
            self.case,
            self.snap,
            self.shape,
            self.seed,
            self.phase,
            self.call,
            self.spot_checks,
            one_call=True,
            inplace=self.inplace,
        )

    def _storages(self, out: Any) -> set[int]:
        from kernel_ratchet.harness import anticheat as ac

        if out is None:
            return set()
        ts = ac.output_tensors(out, self.what)
        return {t.untyped_storage().data_ptr() for _, t in ts if t.numel() > 0} - self.held_fields

    def _fresh(self, outs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """The outputs that are not stored in a declared in-place field."""
        return [(n, t) for n, t in outs if t.untyped_storage().data_ptr() not in self.held_fields]

    def check_fresh_output(self, index: int) -> None:
        """The last timed call must not return the storage of one of the two calls before it
        (batch-and-skip: only the first call of a batch computes), except the kept buffer that
        was poisoned before this sample and rewritten since. Raises CheatDetected for another
        storage returned again; KeptOutput for the kept buffer in a batched measurement (the
        op is then timed one call per sample, where every call follows the poison)."""
        from kernel_ratchet.harness import anticheat as ac

        again = self._storages(self.last) & (
            self._storages(self.held[0]) | self._storages(self.held[1])
        )
        if again and again <= self.poisoned:
            if self.one_call:
                return
            raise KeptOutput(
                f"{self.what} returns a kept output buffer, and the {self.s.spec['engine']} "
                "engine cannot time one call per sample: the calls of a batch after the "
                "first could return the buffer without computing"
            )
        if again:
            raise ac.CheatDetected(
                f"{self.what} of timed sample {index} returned the same output storage as a "
                "call before it while that output was still held: a result returned again "
                "instead of computed (each call must return freshly computed outputs)"
            )

    def check_inplace_written(self, outs: list[tuple[str, Any]], index: int) -> None:
        """An output stored in a declared in-place field must have changed it: every sample
        starts from the kept values, so a field still equal to them after the sample was not
        written by the timed calls (the poison, which cannot apply there, catches this for
        fresh outputs). Raises CheatDetected."""
        import torch

        from kernel_ratchet.harness import anticheat as ac

        if not self.inplace:
            return
        written = {t.untyped_storage().data_ptr() for _, t in outs}
        for name, t in self.inplace.fields(self.case):
            kept = self.inplace.kept.get(name)
            ptr = t.untyped_storage().data_ptr()
            if kept is not None and ptr in written and torch.equal(t.detach(), kept):
                raise ac.CheatDetected(
                    f"{self.what} of timed sample {index} did not write its in-place output "
                    f"{name}: it holds the values it had before the sample (the timed calls "
                    "did not compute the result)"
                )

    def check_not_an_input(self, outs: list[tuple[str, Any]], index: int) -> None:
        """Raise CheatDetected ("input modified") when an output is stored in an input tensor:
        the op wrote its result into its input."""
        from kernel_ratchet.harness import anticheat as ac

        inputs = {t.untyped_storage().data_ptr(): p for p, t, _ in self.snap.items}
        for ptr in self.held_fields:
            inputs.pop(ptr, None)
        shared = [
            (n, inputs[p]) for n, t in outs if (p := t.untyped_storage().data_ptr()) in inputs
        ]
        if shared:
            name, path = shared[0]
            raise ac.CheatDetected(
                f"input modified: {self.what} output {name} of timed sample {index} is stored "
                f"in input tensor {path} (an output written in place into an input); inputs "
                "must be read-only unless the op declares the output in place"
            )

    def before_sample(self, index: int) -> None:
        from kernel_ratchet.harness import anticheat as ac

        self.calls, self.pick, self.picked = 0, _draw(self.batch_calls), None
        self.poisoned = self._storages(self.last)
        if self.last is not None:
            ac.poison(self._fresh(ac.output_tensors(self.last, self.what)))
        if self.inplace:
            self.inplace.restore(self.case)  # every sample starts from the same values
        if self.s.device.startswith("cuda"):
            from kernel_ratchet.harness.l2_persist import reset_persisting_l2

            reset_persisting_l2()  # lines a candidate pinned must not outlive the L2 flush
        # Fresh values before every sample, not only before the compared ones: a sample that
        # is checked then looks like any other (no input left unchanged to say "not checked"),
        # and no result cached by input identity, version or content is ever right again.
        # A graph replays the backward of the forward it was captured after: a forward rebuilt
        # on new inputs would free the state the replays read, so there the inputs stay and a
        # spot check compares the replayed outputs with the reference on the current inputs.
        # An in-place op's samples all start from its kept values and are never compared.
        captured = _capture_count(self.s.engine) > self.captures  # it replays a graph
        state = self.phase == "bwd" and holds_forward_state(self.s.adapter, self.case)
        if not self.inplace and not (captured and state):
            self._fresh_inputs(index, state, captured)

    def _spot(self, index: int) -> bool:
        """Whether sample ``index`` is compared with the reference: drawn after the sample ran,
        from the operating system's entropy, ``spots_left`` of the samples still to come; so
        nothing in the process said beforehand which samples are checked."""
        remaining = self.samples - index
        if self.spots_left <= 0 or remaining <= 0:
            return False
        if _draw(remaining) >= self.spots_left:
            return False
        self.spots_left -= 1
        return True

    def all_drawn(self) -> TimedCallChecks:
        """These hooks, once every spot check asked for was made: the draw takes exactly
        ``min(spot_checks, samples)`` of the samples, so fewer means the draw was interfered
        with."""
        from kernel_ratchet.harness.anticheat import CheatDetected

        wanted = self.spots_wanted
        if self.spot_done < wanted:
            raise CheatDetected(
                f"{self.spot_done} of the {wanted} spot checks drawn were made: the draw of "
                "the compared samples was interfered with"
            )
        return self

    def _fresh_inputs(self, index: int, state: bool, captured: bool = False) -> None:
        """Copy the inputs of another seed into the case's tensors (outside the timed sample).
        Where the two cases differ in structure (seeded routing, a seed kept in the case),
        eager samples time the other seed's case itself: new tensors and new values, so no
        result kept from an earlier sample is right; a replayed graph keeps its inputs."""
        from kernel_ratchet.harness import anticheat as ac

        t0 = time.perf_counter()
        ad = self.s.adapter
        fresh = ad.make_case(self.shape, derive_seed(self.seed, 10 + index), self.s.device)
        if self.phase == "bwd":
            ad.forward(fresh)  # copied with its state, so a captured graph stays valid
        if ac.rebind(self.case, self.snap, fresh):
            if state:
                ad.forward(self.case)  # state a rebind cannot copy: rebuilt, untimed
            self.snap = ac.snapshot_inputs(self.case, self.snap)
        elif not captured:
            self.case, self.snap = fresh, ac.snapshot_inputs(fresh)
        del fresh
        self.s.sync()
        if self.phase == "bwd":  # the op's forward ran: nothing it replaced may time the sample
            self.s.sentinel.check()
        self.spot_s += time.perf_counter() - t0

    def after_sample(self, index: int) -> None:
        # First, before anything it checks with: nothing the sample's calls replaced (and a
        # later call would put back) is used to check the sample or to draw its spot check.
        self.s.sentinel.check()
        from kernel_ratchet.harness import anticheat as ac
        from kernel_ratchet.harness import process_guard
        from kernel_ratchet.harness.correctness import check_outputs

        if not self.inplace:  # what the reference reads: the objects make_case built
            ac.inputs_intact(self.snap)
        outs = ac.output_tensors(self.last, self.what)
        self.check_not_an_input(outs, index)
        ac.require_rewritten(self._fresh(outs), self.what, index)
        self.check_inplace_written(outs, index)
        self.check_fresh_output(index)
        if not self._spot(index):
            return
        # inputs the timed call changed are caught by the time request's final input check
        t0 = time.perf_counter()
        ad = self.s.adapter
        with process_guard.precise_numerics():
            full_ref = ad.spot_reference(self.case)
        self.s.sentinel.ready_to_compare()  # hooks, modes, patched functions, kernels
        if self.picked is not None:  # the drawn call of the batch, not always the last
            outs = ac.output_tensors(self.picked, self.what)
        pairs = checked_outputs(ad, self.case, outs, full_ref, self.phase)
        if not pairs:  # a comparison of nothing is no spot check
            raise ac.CheatDetected(
                f"spot check of timed sample {index}: none of the {self.what} outputs "
                f"({', '.join(n for n, _ in outs)}) matches an output of the reference "
                f"({', '.join(full_ref)}); the timed calls must return what the reference names"
            )
        ref = {n: full_ref[n] for n in pairs}
        res = check_outputs(dict(pairs), ref, {n: self.s.adapter.threshold(n) for n in pairs})
        if not res.passed:
            raise ac.CheatDetected(
                f"spot check of timed sample {index} (call {self.pick + 1} of "
                f"{self.batch_calls}) failed ({res.reason}): the timed calls did not "
                "compute the result for the current inputs"
            )
        self.spot_done += 1
        self.picked = None
        self.spot_s += time.perf_counter() - t0


def holds_forward_state(adapter: Any, case: Any) -> bool:
    """Whether the backward starts from state of the last forward that new values written into
    the case's tensors cannot update: the adapter declares it (``forward_state``), or the case
    holds the output of an autograd graph (a tensor with a ``grad_fn``), whose saved tensors are
    the graph's, not the case's. Writing into a tensor such a graph saved would also fail its
    backward ("modified by an inplace operation"), so the forward runs again after the write."""
    from kernel_ratchet.harness import anticheat as ac

    if adapter.forward_state:
        return True
    return any(t.grad_fn is not None for _, t in ac.tensors(case))


def _capture_count(engine: Any) -> int:
    """Graphs of the op the session's engine has captured (engines that capture none: 0)."""
    return int(getattr(engine, "captures", 0))


def measure(hooks: TimedCallChecks) -> tuple[Any, TimedCallChecks]:
    """Time ``hooks.call`` with the session's engine; an op that returns a kept output buffer
    is timed again one call per sample (flagged), or refused where the engine has no such
    mode. Returns (timing, the hooks of the measurement kept)."""
    from kernel_ratchet.harness import anticheat as ac
    from kernel_ratchet.harness.timing.registry import make_engine

    s = hooks.s
    try:
        return s.engine.measure(hooks.fn, hooks), hooks.all_drawn()
    except KeptOutput as kept:
        one = ONE_CALL_PER_SAMPLE.get(s.spec["engine"])
        if one is None:
            raise ac.CheatDetected(str(kept)) from None
    params = {**(s.spec.get("engine_params") or {}), "device": s.device, **one}
    hooks = hooks.one_call_again()
    timing = make_engine(s.spec["engine"], params).measure(hooks.fn, hooks)
    return dataclasses.replace(timing, flags=(*timing.flags, KEPT_BUFFER_FLAG)), hooks.all_drawn()
