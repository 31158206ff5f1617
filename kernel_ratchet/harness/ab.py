"""Paired, interleaved A/B measurement of the incumbent against a candidate.

The harness measures; when to look, when to stop and what to decide is the caller's
:class:`SequentialRule` (scoring's :class:`kernel_ratchet.scoring.paired_looks.PairedLooks`).
Contract of :func:`run_paired`:

1. Two workers (separate processes, built by ``worker_factory``) are opened, one per side.
2. Correctness first: every shape is checked on both sides with the check seed, the two sides
   of a shape at once (a check times nothing). A failing check ends the run with that side's
   failure (the incumbent's when both fail); nothing is timed. Then the rule compares the
   two sides' SNRs on those same inputs (``rule.precision_drop``): a candidate whose precision
   fell below the incumbent's ends the run with a failure of category ``"precision"``. With
   ``refuse_vendor_ops``, a candidate whose checked call ran vendor-class ATen operations
   (:mod:`.op_census`) the incumbent's call did not ends it with category ``"backend"``.
3. Rounds. Round ``r`` visits every still-active shape in a shuffled order; per shape and phase
   the two sides are timed back to back in a shuffled order (recorded in ``order``), both with
   the same per-round secret seed :func:`round_seed`. One round = one value per side, shape and
   phase: the ``median_ms`` of one worker ``time`` call (its inner samples are never treated
   as independent rounds). The first timing of a shape and phase fixes the engine's mode
   (CUDA graph or eager calls) for every later request of both sides (:mod:`.paired_modes`).
   With ``alternations`` k > 1 the two sides take turns k times per shape and phase (A B B A
   ...), and a side's value is the geometric mean of its k requests: drift slower than a turn
   then cancels in the pair. Every ``time`` request is also written to
   ``log_dir/timings.jsonl`` (samples, SM clocks, dropped samples, flags, request seconds),
   so the noise of a run can be read afterwards; each shape's correctness check time is
   reported through ``progress``.
4. Adaptive budget: the rule decides at its looks (``rule.looks(k_start, k_max)``); while a
   decision names ``undecided`` shapes, those shapes alone are measured up to the next look.
   The decision at the last look is made with ``exhausted=True``. Futility stop: when the rule
   names a futility look (``rule.futility_look(k_start)``), the run first measures that many
   rounds; when ``rule.futile`` then says why the candidate cannot become a gain, the run
   stops there, decides on those rounds (``exhausted=True``) and says so in ``early_stop``.
5. A worker failure (``ok=False``: crash, hang, NaN, bad output; OOM once retried with room,
   :mod:`.paired_room`) is recorded as a :class:`Failure` with its category, detail and log
   path and ends the run (``decision`` None). Worker-raised infrastructure faults propagate.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from kernel_ratchet.harness import strays
from kernel_ratchet.harness.ab_rule import SequentialRule
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.paired_blame import SHARED_FAILURES, blame
from kernel_ratchet.harness.paired_checks import (
    CHECK_ROUND,
    SIDES,
    Prechecked,
    check_shape,
    checked,
    precision_failure,
    round_seed,
)
from kernel_ratchet.harness.paired_modes import Modes
from kernel_ratchet.harness.paired_room import checks_with_room, with_room
from kernel_ratchet.harness.paired_run import D, Failure, PairedRun
from kernel_ratchet.harness.paired_samples import PHASES, PairedSamples, samples_by_shape
from kernel_ratchet.harness.request_time import RequestTime

if TYPE_CHECKING:
    from kernel_ratchet.harness.worker import WorkerSpec

#: Spot checks per timing request: one secretly chosen sample of every request has its outputs
#: compared with the reference (>= 10 per shape and side in an A/B). Each costs a reference
#: computation: on a 16384x59136x8192 GEMM's backward ~1 s, more than the timed calls.
PAIRED_SPOT_CHECKS = 1
#: File in ``log_dir``: one JSON line per timing request (see :func:`_trace`).
TRACE = "timings.jsonl"


def _geomean(values: Sequence[float]) -> float:
    return math.exp(float(np.mean(np.log(values))))


def _trace(out: Any, r: int, label: str, phase: str, side: str, res: Any, wall_s: float) -> None:
    """One line of :data:`TRACE`: what one ``time`` request measured and how (samples, SM
    clocks, dropped samples, flags, stages), for reading the noise of a run afterwards."""
    p = res.payload or {}
    eng = p.get("engine") if isinstance(p.get("engine"), dict) else {}
    row = {
        "round": r,
        "label": label,
        "phase": phase,
        "side": side,
        "ok": res.ok,
        "median_ms": p.get("median_ms"),
        "samples_ms": p.get("samples_ms"),
        "clock_mhz": p.get("clock_mhz"),
        "dropped": p.get("dropped"),
        "flags": p.get("flags"),
        "mode": eng.get("mode"),
        "iters_per_sample": eng.get("iters_per_sample"),
        "warmup_ms_spent": eng.get("warmup_ms_spent"),
        "settled_clock_mhz": eng.get("settled_clock_mhz"),
        "request_s": round(wall_s, 4),
        "stages_s": p.get("stages_s"),
    }
    out.write(json.dumps(row) + "\n")
    out.flush()


@dataclass
class _Rounds:
    """The rounds of one paired run as they are measured: workers, times, visit order."""

    workers: dict[str, Any]
    shapes: Sequence[Shape]
    phases: tuple[str, ...]
    seed: int
    rng: np.random.Generator
    logs: Mapping[str, str]
    time_kwargs: Mapping[str, Any]
    trace: IO[str] | None = None
    alternations: int = 1
    watch: strays.Watch | None = None
    rounds: int = 0
    refuse_vendor_ops: bool = False
    order: list[tuple[int, str, str]] = field(default_factory=list)
    restart: Callable[[str], Any] | None = None  # a side's fresh worker (:mod:`.paired_room`)
    say: Callable[[str], None] | None = None
    spent: RequestTime = field(default_factory=RequestTime)
    times: dict[str, dict[str, dict[str, list[float]]]] = field(init=False)

    def __post_init__(self) -> None:
        self.snr: dict[str, dict[str, dict[str, float]]] = {side: {} for side in SIDES}
        self.modes = Modes()
        self.by_label = {s.label: s for s in self.shapes}
        self.times = {
            side: {s.label: {p: [] for p in self.phases} for s in self.shapes} for side in SIDES
        }

    def check(
        self, say: Callable[[str], None], prechecked: Prechecked | None = None
    ) -> Failure | None:
        """Contract step 2: every shape on both sides, in order, the two sides' checks of a
        shape at once (they time nothing, each in its own process); the first failure (the
        incumbent's first when both fail), or None. A check that ``prechecked`` holds for the
        same worker and seed (run beside other work before the A/B) is not run again."""
        say(f"A/B: checking {len(self.shapes)} shape(s) on both sides")
        with ThreadPoolExecutor(max_workers=len(SIDES), thread_name_prefix="kr-ab-check") as pool:
            for shape in self.shapes:
                seed = round_seed(self.seed, CHECK_ROUND, shape.label)
                done, reused = check_shape(pool, self.workers, shape, seed, prechecked)
                checks_with_room(done, self.workers, self.restart, shape, seed, say)
                failure = checked(done, shape.label, self.logs, self.refuse_vendor_ops)
                if failure is not None:
                    return failure
                for side in SIDES:
                    snr = (done[side][0].payload or {}).get("snr") or {}
                    self.snr[side][shape.label] = {k: float(v) for k, v in snr.items()}
                took = [done[side][1] for side in SIDES]
                beside = " beside the focused test" if reused else ""
                say(
                    f"A/B: {shape.label} checked{beside} (incumbent {took[0]:.1f} s, candidate "
                    f"{took[1]:.1f} s, at once)"
                )
        return None

    def _time(
        self, r: int, label: str, phase: str, side: str, seed: int, got: list[float]
    ) -> Failure | None:
        kw = {**self.time_kwargs, **self.modes.request(label, phase)}

        def again() -> Any:  # one request, the idle side stopped
            c0 = time.monotonic()
            with self.workers[next(s for s in SIDES if s != side)].paused():
                res = self.workers[side].time(self.by_label[label], seed, phase, **kw)
            _trace(self.trace, r, label, phase, side, res, time.monotonic() - c0)
            self.spent.add(res.payload, time.monotonic() - c0)
            return res

        res = with_room(again(), side, self.workers, self.restart, again, self.say)
        escaped = self.watch.check() if self.watch is not None else ""
        if escaped:  # the A/B is void: whichever side it slowed, the round's code did it
            return Failure("candidate", "time", label, "cheat", escaped, self.logs[side], r, phase)
        ms = float(res.payload.get("median_ms", math.nan)) if res.ok else math.nan
        if not res.ok or not (math.isfinite(ms) and ms > 0):
            cat = res.category if not res.ok else "bad_timing"
            detail = res.detail if not res.ok else f"median_ms={ms!r}"
            if side == "candidate" and cat in SHARED_FAILURES:
                incumbent = self.workers["incumbent"].time(self.by_label[label], seed, phase, **kw)
                return blame(incumbent, self.logs, r, label, phase, cat, detail)
            return Failure(side, "time", label, cat, detail, self.logs[side], r, phase)
        got.append(ms)
        return self._same_mode(r, label, phase, side, res.payload.get("engine"))

    def _visit(self, r: int, label: str, phase: str, sides: Sequence[str]) -> Failure | None:
        """One value per side of ``label``'s ``phase`` in round ``r``: the sides take turns
        ``alternations`` times (A B B A ...); a side's value is its requests' geometric mean."""
        seed = round_seed(self.seed, r, label)
        got: dict[str, list[float]] = {side: [] for side in sides}
        for turn in range(self.alternations):
            for side in sides if turn % 2 == 0 else sides[::-1]:
                failure = self._time(r, label, phase, side, seed, got[side])
                if failure is not None:
                    return failure
        for side in sides:
            v = got[side]  # one turn: the request's own value, bit for bit
            self.times[side][label][phase].append(v[0] if len(v) == 1 else _geomean(v))
        return None

    def _same_mode(self, r: int, label: str, phase: str, side: str, eng: Any) -> Failure | None:
        """Both sides of a shape and phase must be timed the same way (:mod:`.paired_modes`)."""
        odd = self.modes.mismatch(label, phase, side, eng)
        if odd is None:
            return None
        return Failure(odd[0], "time", label, "bad_timing", odd[1], self.logs[odd[0]], r, phase)

    def _one_round(self, active: Sequence[str]) -> Failure | None:
        r = self.rounds
        for item in self.rng.permutation(np.array(active, dtype=object)):
            label = str(item)
            sides = SIDES if self.rng.random() < 0.5 else SIDES[::-1]
            self.order.append((r, label, sides[0]))
            for phase in self.phases:
                failure = self._visit(r, label, phase, sides)
                if failure is not None:
                    return failure
        return None

    def measure_to(self, target: int, active: Sequence[str]) -> Failure | None:
        """Rounds of the ``active`` shapes until ``target`` rounds; the first failure, or None
        (a failing round is not counted)."""
        while self.rounds < target:
            failure = self._one_round(active)
            if failure is not None:
                return failure
            self.rounds += 1
        return None

    def samples(self) -> dict[str, PairedSamples]:
        return samples_by_shape(self.times, [s.label for s in self.shapes])

    def record(
        self,
        campaign_type: str,
        failure: Failure | None,
        decision: D | None,
        wall_s: float,
        check_wall_s: float,
        rng_seed: int,
        early_stop: str | None,
    ) -> PairedRun[D]:
        """The run's :class:`~kernel_ratchet.harness.paired_run.PairedRun`, times frozen."""
        times = {
            s: {k: {p: tuple(v) for p, v in d.items()} for k, d in per.items()}
            for s, per in self.times.items()
        }
        return PairedRun(
            tuple(s.label for s in self.shapes),
            self.phases,
            campaign_type,
            times,
            tuple(self.order),
            self.rounds,
            failure,
            decision,
            wall_s,
            check_wall_s,
            rng_seed,
            dict(self.logs),
            early_stop,
            {side: dict(by_label) for side, by_label in self.snr.items()},
        )


def _sequential(
    run: _Rounds,
    rule: SequentialRule[D],
    looks: tuple[int, ...],
    campaign_type: str,
    say: Callable[[str], None],
) -> tuple[Failure | None, D | None, str | None]:
    """Contract step 4: (failure, decision, early stop) of the rounds after the checks."""
    active = [s.label for s in run.shapes]
    futility = rule.futility_look(looks[0])
    if futility is not None:
        failure = run.measure_to(futility, active)
        if failure is not None:
            return failure, None, None
        hopeless = rule.futile(run.samples(), campaign_type)
        if hopeless:
            decision = rule.decide(run.samples(), campaign_type, exhausted=True, looks=len(looks))
            say(f"A/B: {hopeless}")
            return None, decision, hopeless
    decision = None
    for target in looks:
        if not active:
            break
        failure = run.measure_to(target, active)
        if failure is not None:
            return failure, None, None
        exhausted = run.rounds >= looks[-1]
        decision = rule.decide(run.samples(), campaign_type, exhausted=exhausted, looks=len(looks))
        active = list(decision.undecided)
        say(
            f"A/B: {run.rounds} round(s): {decision.verdict_aggregate} "
            f"{decision.aggregate_ratio:.4f}x; more: {active or 'none'}"
        )
    return None, decision, None


def _opener(
    stack: ExitStack,
    factory: Callable[..., Any] | None,
    specs: tuple[WorkerSpec, WorkerSpec],
    logs: Mapping[str, str],
) -> Callable[[str], Any]:
    """A side's new worker, entered on ``stack`` (default: :class:`~.worker.Worker`), its
    output appended to the side's log."""
    if factory is None:
        from kernel_ratchet.harness.worker import Worker

        factory = Worker
    by_side = dict(zip(SIDES, specs, strict=True))
    return lambda side: stack.enter_context(factory(by_side[side], Path(logs[side])))


def _validate(shapes: Sequence[Shape], phases: Sequence[str], alternations: int) -> None:
    if alternations < 1:
        raise ValueError(f"alternations must be at least 1, got {alternations}")
    labels = [s.label for s in shapes]
    if not labels or len(set(labels)) != len(labels):
        raise ValueError(f"run_paired needs shapes with distinct labels, got {labels}")
    if "fwd" not in phases or any(p not in PHASES for p in phases):
        raise ValueError(f"phases must include 'fwd' and be among {PHASES}, got {phases}")


def run_paired(
    incumbent: WorkerSpec,
    candidate: WorkerSpec,
    shapes: Sequence[Shape],
    *,
    phases: Sequence[str],
    seed: int,
    rule: SequentialRule[D],
    k_start: int = 10,
    k_max: int = 40,
    log_dir: Path,
    worker_factory: Callable[..., Any] | None = None,
    rng_seed: int | None = None,
    progress: Callable[[str], None] | None = None,
    campaign_type: str | None = None,
    time_kwargs: Mapping[str, Any] | None = None,
    prechecked: Prechecked | None = None,
    alternations: int = 1,
    refuse_vendor_ops: bool = False,
) -> PairedRun[D]:
    """Measure ``candidate`` against ``incumbent`` on ``shapes`` (contract: module docstring).

    ``seed``: the campaign secret the per-round input seeds derive from; ``rng_seed``: the
    shuffles' seed (None: fresh entropy, recorded). ``rule`` looks, stops and decides, from
    ``k_start`` up to ``k_max`` rounds. ``campaign_type`` defaults to compute_fwd_bwd when
    "bwd" is timed, else compute_fwd. ``worker_factory(spec, log_path)``: a context manager
    with ``check`` and ``time`` (default :class:`~kernel_ratchet.harness.worker.Worker`).
    ``time_kwargs`` go to every ``time`` call (e.g. ``max_tflops``, the roofline anti-cheat;
    ``spot_checks`` defaults to :data:`PAIRED_SPOT_CHECKS`). ``prechecked``: checks already
    made by the workers the factory hands out (:func:`precheck`). ``alternations``: turns
    per side, shape and phase in a round (contract step 3); ``refuse_vendor_ops``: step 2.
    Raises ValueError for bad arguments; a failing worker is a recorded :class:`Failure`.
    """
    _validate(shapes, phases, alternations)
    looks = rule.looks(k_start, k_max)
    t0 = time.monotonic()
    phases = tuple(p for p in PHASES if p in phases)
    ctype = campaign_type or ("compute_fwd_bwd" if "bwd" in phases else "compute_fwd")
    rng_seed = secrets.randbits(63) if rng_seed is None else rng_seed
    say = progress or (lambda _msg: None)
    (log_dir := Path(log_dir)).mkdir(parents=True, exist_ok=True)
    logs = {side: str(log_dir / f"{side}_worker.log") for side in SIDES}
    tkw = {"spot_checks": PAIRED_SPOT_CHECKS, **(time_kwargs or {})}
    with ExitStack() as stack:
        watch = stack.enter_context(strays.joined())  # workers are strays.own children
        opener = _opener(stack, worker_factory, (incumbent, candidate), logs)
        rng = np.random.default_rng(rng_seed)
        run = _Rounds({s: opener(s) for s in SIDES}, tuple(shapes), phases, seed, rng, logs, tkw)
        run.watch, run.restart, run.say = watch, opener, say
        run.alternations, run.refuse_vendor_ops = int(alternations), refuse_vendor_ops
        failure = run.check(say, prechecked) or precision_failure(run.snr, run.logs, rule)
        check_wall_s = time.monotonic() - t0
        decision, early_stop = None, None
        if failure is None:
            run.trace = stack.enter_context(open(log_dir / TRACE, "a", encoding="utf-8"))
            failure, decision, early_stop = _sequential(run, rule, looks, ctype, say)
            say(run.spent.summary() or "A/B: no timing request answered")
        wall_s = time.monotonic() - t0
    return run.record(ctype, failure, decision, wall_s, check_wall_s, rng_seed, early_stop)
