"""Paired, interleaved A/B measurement of the incumbent against a candidate (issue 5, item 3).

Contract of :func:`run_paired`:

1. Two workers (separate processes, built by ``worker_factory``) are opened, one per side.
2. Correctness first: every shape is checked on both sides with the check seed. A failing
   check ends the run with that side's failure; nothing is timed.
3. Rounds. Round ``r`` visits every still-active shape in a shuffled order; per shape and phase
   the two sides are timed back to back in a shuffled order (recorded in ``order``), both with
   the same per-round secret seed :func:`round_seed`. One round = one value per side, shape and
   phase: the ``median_ms`` of one worker ``time`` call (its inner samples are never treated
   as independent rounds). Every ``time`` request is also written to ``log_dir/timings.jsonl``
   (samples, SM clocks, dropped samples, flags, request seconds), so the noise of a run can
   be read afterwards; each shape's correctness check time is reported through ``progress``.
4. Adaptive budget: the paired decision
   (:func:`kernel_ratchet.scoring.paired.decide_paired`) is taken at the looks of
   :func:`look_schedule` (10, 20, 40 rounds by default); while
   :func:`~kernel_ratchet.scoring.paired.needs_more` names shapes, those shapes alone are
   measured up to the next look. Alpha is split over the planned looks (``looks=``) so the
   repeated decisions keep the false-accept rate at the nominal level. The decision at
   ``k_max`` is made with ``exhausted=True`` ("too noisy to confirm").
   Futility stop: when ``k_start`` exceeds :data:`FUTILITY_ROUNDS`, the run first measures
   that many rounds; if every one of them reads the candidate slower than
   ``1 - FUTILITY_FACTOR × regression_threshold`` (that round's aggregate speed ratio, as
   :func:`futile` computes it), no later round could make it a gain: the run stops there,
   decides on those rounds (``exhausted=True``) and says so in ``early_stop``. A rollback
   either way; only the rounds a hopeless candidate costs change (most search proposals are
   such).
5. A worker failure (``ok=False``: crash, hang, NaN, bad output...) is recorded as a
   :class:`Failure` with its category, detail and log path and ends the run; ``decision`` is
   then None. Only infrastructure faults (a worker that raises) propagate.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.scoring.paired import (
    MIN_ROUNDS,
    PHASES,
    PairedDecision,
    PairedSamples,
    decide_paired,
    log_ratios,
    needs_more,
)

if TYPE_CHECKING:
    from kernel_ratchet.harness.worker import WorkerSpec

SIDES = ("incumbent", "candidate")
#: Spot checks per timing request: one secretly chosen sample of every request has its outputs
#: compared with the reference (>= 10 per shape and side in an A/B). Each costs a reference
#: computation: on a 16384x59136x8192 GEMM's backward ~1 s, more than the timed calls.
PAIRED_SPOT_CHECKS = 1
#: File in ``log_dir``: one JSON line per timing request (see :func:`_trace`).
TRACE = "timings.jsonl"
#: Round index used for the correctness-check seed.
CHECK_ROUND = -1
#: Futility look (contract 4): rounds measured before it and how many regression thresholds
#: slower every one of them must read. 3 rounds x 10% against a round-to-run spread of
#: 1.5-5% on the H200 (docs/measurement.md): a true gain never reads that.
FUTILITY_ROUNDS = 3
FUTILITY_FACTOR = 2.0
SEED_POLICY = (
    "per-round secret: seed = sha256('<campaign secret>:<round>:<shape label>')[:63 bits], "
    "identical for incumbent and candidate within a round; correctness checks use round -1"
)


def round_seed(secret: int, round_index: int, label: str) -> int:
    """Input seed of one shape in one round, derived from the campaign secret (63 bits).

    Unpredictable without the secret, so a candidate cannot precompute outputs per seed.
    """
    digest = hashlib.sha256(f"{secret}:{round_index}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def look_schedule(k_start: int, k_max: int) -> tuple[int, ...]:
    """Round counts at which the adaptive loop decides: k_start doubled until k_max.

    Doubling narrows the CI by about √2 per look, so few looks (and little alpha spent on
    them) cover the whole budget: (10, 20, 40) for the defaults.
    """
    looks = [k_start]
    while looks[-1] < k_max:
        looks.append(min(2 * looks[-1], k_max))
    return tuple(looks)


@dataclass(frozen=True)
class Failure:
    """A worker failure that ended a paired run. ``stage`` is "check" or "time".

    ``category`` is the worker's (see :mod:`kernel_ratchet.harness.worker`), or "bad_timing"
    when an ``ok`` timing carried no positive finite ``median_ms``.
    """

    side: str
    stage: str
    label: str
    category: str
    detail: str
    log_path: str
    round: int | None = None
    phase: str | None = None

    def sentence(self) -> str:
        where = f"round {self.round} {self.phase} timing" if self.stage == "time" else "check"
        return (
            f"{self.side} failed ({self.category}) on shape {self.label} during {where}: "
            f"{self.detail} (log: {self.log_path})"
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PairedRun:
    """Everything one paired A/B measurement produced.

    ``times[side][label][phase]`` are per-round milliseconds (the i-th values of both sides come
    from the same round); ``order`` lists ``(round, label, side timed first)`` in visit order.
    ``decision`` is None exactly when ``failure`` is set.
    """

    labels: tuple[str, ...]
    phases: tuple[str, ...]
    campaign_type: str
    times: dict[str, dict[str, dict[str, tuple[float, ...]]]]
    order: tuple[tuple[int, str, str], ...]
    rounds: int
    failure: Failure | None
    decision: PairedDecision | None
    wall_s: float
    check_wall_s: float
    rng_seed: int
    logs: dict[str, str]
    early_stop: str | None = None  # why the run stopped at the futility look, if it did

    @property
    def ok(self) -> bool:
        return self.failure is None

    def samples(self) -> dict[str, PairedSamples]:
        """Per-shape paired samples of the shapes timed at least once."""
        return _samples(self.times, self.labels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "phases": list(self.phases),
            "campaign_type": self.campaign_type,
            "times": {
                s: {k: {p: list(v) for p, v in d.items()} for k, d in per.items()}
                for s, per in self.times.items()
            },
            "order": [list(o) for o in self.order],
            "rounds": self.rounds,
            "failure": self.failure.to_dict() if self.failure else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "wall_s": self.wall_s,
            "check_wall_s": self.check_wall_s,
            "rng_seed": self.rng_seed,
            "logs": dict(self.logs),
            "early_stop": self.early_stop,
            "seed_policy": SEED_POLICY,
        }


def _trace(out: Any, r: int, label: str, phase: str, side: str, res: Any, wall_s: float) -> None:
    """One line of :data:`TRACE`: what one ``time`` request measured and how (the samples,
    the SM clock read during each, dropped samples, the engine's flags), for reading the noise
    of a run afterwards."""
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
    }
    out.write(json.dumps(row) + "\n")
    out.flush()


def futile(samples: Mapping[str, PairedSamples], campaign_type: str, floor: float) -> str | None:
    """Why the candidate cannot become a gain, or None: every round so far reads the aggregate
    speed ratio below ``floor`` (per round, the geometric mean over shapes of the primary
    metric's time ratio, as :func:`~kernel_ratchet.scoring.paired.decide_paired` aggregates)."""
    per_round = np.exp(np.mean([log_ratios(x, campaign_type) for x in samples.values()], axis=0))
    if not len(per_round) or per_round.max() >= floor:
        return None
    ratios = ", ".join(f"{x:.3f}x" for x in per_round)
    return (
        f"futility stop after {len(per_round)} rounds: every round read the candidate ≥ "
        f"{(1 - floor) * 100:.0f}% slower (aggregate speed ratio per round {ratios}), so "
        "no further round could make it a gain"
    )


def _samples(times: dict, labels: Sequence[str]) -> dict[str, PairedSamples]:
    inc, cand = times["incumbent"], times["candidate"]
    return {k: PairedSamples(inc[k], cand[k]) for k in labels if len(inc[k]["fwd"]) > 0}


def _default_factory() -> Callable[..., Any]:
    from kernel_ratchet.harness.worker import Worker

    return Worker


def _validate(shapes: Sequence[Shape], phases: Sequence[str], k_start: int, k_max: int) -> None:
    labels = [s.label for s in shapes]
    if not labels or len(set(labels)) != len(labels):
        raise ValueError(f"run_paired needs shapes with distinct labels, got {labels}")
    if "fwd" not in phases or any(p not in PHASES for p in phases):
        raise ValueError(f"phases must include 'fwd' and be among {PHASES}, got {phases}")
    if not MIN_ROUNDS <= k_start <= k_max:
        raise ValueError(f"need {MIN_ROUNDS} ≤ k_start ≤ k_max, got {k_start}, {k_max}")


def run_paired(
    incumbent: WorkerSpec,
    candidate: WorkerSpec,
    shapes: Sequence[Shape],
    *,
    phases: Sequence[str],
    seed: int,
    k_start: int = 10,
    k_max: int = 40,
    log_dir: Path,
    worker_factory: Callable[..., Any] | None = None,
    rng_seed: int | None = None,
    progress: Callable[[str], None] | None = None,
    campaign_type: str | None = None,
    regression_threshold: float = 0.05,
    min_detectable: float = 0.0,
    time_kwargs: Mapping[str, Any] | None = None,
) -> PairedRun:
    """Measure ``candidate`` against ``incumbent`` on ``shapes`` (contract: module docstring).

    ``seed`` is the campaign secret the per-round input seeds derive from; ``rng_seed`` seeds
    the shuffles (None: fresh entropy, recorded in the result). ``campaign_type`` defaults to
    compute_fwd_bwd when "bwd" is timed, else compute_fwd (pass "memory" explicitly).
    ``worker_factory(spec, log_path)`` returns a context manager with ``check`` and ``time``;
    the default is :class:`kernel_ratchet.harness.worker.Worker`. ``time_kwargs`` go to every
    ``time`` call (e.g. ``max_tflops``/``max_gbps``, the roofline anti-cheat; ``spot_checks``
    defaults to :data:`PAIRED_SPOT_CHECKS`). Raises
    ValueError for bad arguments; a failing worker is a recorded :class:`Failure`, never an
    exception.
    """
    _validate(shapes, phases, k_start, k_max)
    t0 = time.monotonic()
    phases = tuple(p for p in PHASES if p in phases)
    ctype = campaign_type or ("compute_fwd_bwd" if "bwd" in phases else "compute_fwd")
    rng_seed = secrets.randbits(63) if rng_seed is None else rng_seed
    rng = np.random.default_rng(rng_seed)
    factory = worker_factory or _default_factory()
    say = progress or (lambda _msg: None)
    tkw = {"spot_checks": PAIRED_SPOT_CHECKS, **(time_kwargs or {})}
    labels = tuple(s.label for s in shapes)
    by_label = {s.label: s for s in shapes}
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    logs = {side: str(log_dir / f"{side}_worker.log") for side in SIDES}
    times: dict[str, dict[str, dict[str, list[float]]]] = {
        side: {k: {p: [] for p in phases} for k in labels} for side in SIDES
    }
    order: list[tuple[int, str, str]] = []
    state = {"rounds": 0, "check_wall_s": 0.0}

    def finish(
        failure: Failure | None, decision: PairedDecision | None, early_stop: str | None = None
    ) -> PairedRun:
        frozen = {
            s: {k: {p: tuple(v) for p, v in d.items()} for k, d in per.items()}
            for s, per in times.items()
        }
        return PairedRun(
            labels,
            phases,
            ctype,
            frozen,
            tuple(order),
            state["rounds"],
            failure,
            decision,
            time.monotonic() - t0,
            state["check_wall_s"],
            rng_seed,
            logs,
            early_stop,
        )

    with ExitStack() as stack:
        workers = {
            side: stack.enter_context(factory(spec, Path(logs[side])))
            for side, spec in zip(SIDES, (incumbent, candidate), strict=True)
        }
        say(f"A/B: checking {len(shapes)} shape(s) on both sides")
        for shape in shapes:
            took = []
            for side in SIDES:
                c0 = time.monotonic()
                res = workers[side].check(shape, round_seed(seed, CHECK_ROUND, shape.label))
                took.append(time.monotonic() - c0)
                if not res.ok:
                    state["check_wall_s"] = time.monotonic() - t0
                    fail = Failure(side, "check", shape.label, res.category, res.detail, logs[side])
                    return finish(fail, None)
            say(
                f"A/B: {shape.label} checked (incumbent {took[0]:.1f} s, candidate {took[1]:.1f} s)"
            )
        state["check_wall_s"] = time.monotonic() - t0
        trace = stack.enter_context(open(log_dir / TRACE, "a", encoding="utf-8"))

        def one_round(r: int, active: Sequence[str]) -> Failure | None:
            for label in rng.permutation(np.array(active, dtype=object)):
                sides = SIDES if rng.random() < 0.5 else SIDES[::-1]
                order.append((r, str(label), sides[0]))
                s = round_seed(seed, r, str(label))
                for phase in phases:
                    for side in sides:
                        c0 = time.monotonic()
                        res = workers[side].time(by_label[label], s, phase, **tkw)
                        _trace(trace, r, str(label), phase, side, res, time.monotonic() - c0)
                        ms = float(res.payload.get("median_ms", math.nan)) if res.ok else math.nan
                        if not res.ok or not (math.isfinite(ms) and ms > 0):
                            cat = res.category if not res.ok else "bad_timing"
                            detail = res.detail if not res.ok else f"median_ms={ms!r}"
                            return Failure(
                                side, "time", str(label), cat, detail, logs[side], r, phase
                            )
                        times[side][label][phase].append(ms)
            return None

        def decide(exhausted: bool) -> PairedDecision:
            return decide_paired(
                _samples(times, labels),
                ctype,
                regression_threshold=regression_threshold,
                min_detectable=min_detectable,
                exhausted=exhausted,
                looks=len(schedule),
            )

        active: list[str] = list(labels)
        decision = None
        schedule = look_schedule(k_start, k_max)
        if k_start > FUTILITY_ROUNDS:
            while state["rounds"] < FUTILITY_ROUNDS:
                fail = one_round(state["rounds"], active)
                if fail is not None:
                    return finish(fail, None)
                state["rounds"] += 1
            floor = 1.0 - FUTILITY_FACTOR * regression_threshold
            hopeless = futile(_samples(times, labels), ctype, floor)
            if hopeless:
                decision = decide(exhausted=True)
                say(f"A/B: {hopeless}")
                return finish(None, decision, hopeless)
        for target in schedule:
            if not active:
                break
            while state["rounds"] < target:
                fail = one_round(state["rounds"], active)
                if fail is not None:
                    return finish(fail, None)
                state["rounds"] += 1
            decision = decide(exhausted=state["rounds"] >= k_max)
            active = needs_more(decision)
            say(
                f"A/B: {state['rounds']} round(s): {decision.verdict_aggregate} "
                f"{decision.aggregate_ratio:.4f}x; more: {active or 'none'}"
            )
    return finish(None, decision)
