"""The paired decision rule in simulation: false accepts and power under a stated noise model.

Each trial is one real paired run (:func:`kernel_ratchet.harness.ab.run_paired`: shuffled
visits, sequential looks, the measuring on of undecided shapes) decided by the campaigns' rule
(:class:`~kernel_ratchet.scoring.paired_looks.PairedLooks`), with simulated workers in place of
the GPU. The noise model (:class:`NoiseModel`, every parameter a command-line argument):

* shape ``s`` takes ``shape_ms[s]`` on the incumbent and ``shape_ms[s] / speed[s]`` on the
  candidate;
* every timed value (one per round, side and shape) is multiplied by ``exp(N(0, noise[s]))``,
  independent between the two sides;
* both sides of one visit share a clock factor ``exp(N(0, drift))`` (what pairing cancels).

Or, with ``--traces``, the noise of real A/A rounds (:mod:`.trace_noise`): every visit draws
one of the traces' per-round log ratios of that shape (centred on their median and mirrored,
as the two sides of an A/A are interchangeable), with replacement, plus a kernel jitter of
Silverman's bandwidth so that a few dozen recorded rounds do not repeat exactly, and splits
it between the two sides: heavy tails and what pairing leaves are those the GPU produced; the
candidate's speed multiplies its side as above.

Scenarios: ``A/A`` (speed 1), ``slower 3%`` (speed 1/1.03 on every shape), ``faster 5%``
(1.05), and ``mixed`` (the shapes listed by ``--faster`` 10% faster, the others 2% slower:
small noisy gains against confirmed slowdowns where the time goes). Targets (docs/measurement.md):
A/A accepted at most 1 in 20, ``slower 3%`` never accepted, ``faster 5%`` accepted at least 19
in 20, ``mixed`` never accepted when the others hold the time. ``--gain 1 --gain 1.5`` adds
scenarios with every shape faster by that percentage (the rule's power at small gains), and
``--equivalence F`` sets the rule's equivalence floor (a CI upper bound under ``1 + F`` is
"no gain"; a campaign raises it with ``ratchet calibrate``'s minimum detectable effect)::

    python -m kernel_ratchet.method.rule_sim --trials 20
    python -m kernel_ratchet.method.rule_sim --preset norm-eager --trials 20
    python -m kernel_ratchet.method.rule_sim --shape-ms 0.03,2.0 --noise 0.3,0.002 --drift 0.01
    python -m kernel_ratchet.method.rule_sim --traces rounds/round-2/artifacts/paired/timings.jsonl
    python -m kernel_ratchet.method.rule_sim --gain 1 --equivalence 0.015 --traces ...
"""

from __future__ import annotations

import argparse
import contextlib
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.method.trace_noise import read_traces
from kernel_ratchet.scoring.paired import EQUIVALENCE_FLOOR, PairedDecision
from kernel_ratchet.scoring.paired_looks import PairedLooks

#: Presets: (incumbent ms per shape, per-value noise per shape, shared drift). ``gemm``: the
#: bundled bf16 GEMM's five shapes with the 1.5% round spread measured on an H200;
#: ``norm-eager``: a norm's forward+backward timed eagerly, per-value spreads of 24-42% (p10-p90,
#: so sigma ≈ spread / 2.56) on the small shapes and 0.1-0.2% on the large ones;
#: ``norm-graph`` and ``gemm-graph``: ``quantity_probe`` on an H200 (torch 2.11, triton 3.6),
#: warm-L2 graph replay: a bf16 norm fwd+bwd at 4096x2048 (44.9 us, one round's p10-p90
#: spread 0.16%) and a bf16 GEMM at 8192x4096x4096 (412 us, spread 1.57%), five shapes each
#: at the measured time and sigma = spread / 2.56, no drift beyond the spread; ``fla-graph``:
#: the paired A/Bs of ``campaigns/fla_l2norm`` on an H200 (fla-core's L2 norm forward+backward,
#: graph replay, cold L2, four shapes of 8.7-84 us per step), sigma = the standard deviation
#: of one shape's per-round log ratio / sqrt(2), averaged over its four A/Bs.
PRESETS: Mapping[str, tuple[tuple[float, ...], tuple[float, ...], float]] = {
    "gemm": ((0.70, 1.40, 2.40, 2.40, 0.52), (0.015,) * 5, 0.02),
    "norm-eager": ((0.28, 0.30, 0.45, 1.2, 4.0), (0.16, 0.12, 0.04, 0.0015, 0.001), 0.01),
    "norm-graph": ((0.0449,) * 5, (0.0016 / 2.56,) * 5, 0.0),
    "gemm-graph": ((0.412,) * 5, (0.0157 / 2.56,) * 5, 0.0),
    "fla-graph": ((0.0087, 0.0252, 0.0296, 0.0839), (0.0101, 0.0061, 0.0048, 0.0014), 0.0),
}
SCENARIOS = ("A/A", "slower 3%", "faster 5%", "mixed")
#: Name of a ``--gain`` scenario: every shape faster by the given percentage.
GAIN_PREFIX = "faster by "


@dataclass(frozen=True)
class NoiseModel:
    """The simulated machine (module docstring); one entry per shape in each tuple."""

    shape_ms: tuple[float, ...]
    noise: tuple[float, ...]
    drift: float = 0.0

    def __post_init__(self) -> None:
        if not self.shape_ms or len(self.shape_ms) != len(self.noise):
            raise ValueError("give one time and one noise level per shape (same count, ≥ 1)")
        if min(self.shape_ms) <= 0 or min(self.noise) < 0 or self.drift < 0:
            raise ValueError("times must be positive, noise and drift non-negative")

    @property
    def shapes(self) -> list[Shape]:
        return [Shape(f"s{i}_{ms:g}ms", 1, 1, 1) for i, ms in enumerate(self.shape_ms)]


@dataclass(frozen=True)
class _Side:
    name: str
    speed: Mapping[str, float]


@dataclass(frozen=True)
class _Result:
    ok: bool
    category: str
    detail: str
    log: str
    payload: dict[str, Any]


class _Machine:
    """Both simulated workers: one noise source, one clock factor per visit (two calls)."""

    def __init__(self, model: NoiseModel, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.base = {s.label: ms for s, ms in zip(model.shapes, model.shape_ms, strict=True)}
        self.noise = {s.label: n for s, n in zip(model.shapes, model.noise, strict=True)}
        self.drift, self.calls, self.clock = model.drift, 0, 1.0

    def time_ms(self, side: _Side, label: str) -> float:
        if self.calls % 2 == 0:
            self.clock = math.exp(self.rng.normal(0.0, self.drift))
        self.calls += 1
        jitter = math.exp(self.rng.normal(0.0, self.noise[label]))
        return self.base[label] / side.speed.get(label, 1.0) * self.clock * jitter

    def factory(self, side: _Side, log_path: Path) -> _Worker:
        return _Worker(self, side, str(log_path))


class _TraceMachine(_Machine):
    """Both workers drawing each visit's pair from real A/A log ratios (module docstring)."""

    def __init__(self, model: NoiseModel, residuals: Sequence[np.ndarray], seed: int) -> None:
        super().__init__(model, seed)
        self.residuals = dict(zip(self.base, residuals, strict=True))
        # a smoothed bootstrap: a few dozen recorded rounds drawn as they are repeat values,
        # and ties make the rule's bootstrap CIs of medians too narrow (Silverman's bandwidth)
        self.bandwidth = {
            k: 1.06 * float(np.std(r, ddof=1)) * len(r) ** -0.2 for k, r in self.residuals.items()
        }
        self.pair = 0.0

    def time_ms(self, side: _Side, label: str) -> float:
        if self.calls % 2 == 0:
            drawn = float(self.rng.choice(self.residuals[label]))
            self.pair = drawn + float(self.rng.normal(0.0, self.bandwidth[label]))
        self.calls += 1
        half = self.pair / 2 if side.name == "incumbent" else -self.pair / 2
        return self.base[label] / side.speed.get(label, 1.0) * math.exp(half)


class _Worker:
    """The worker contract of :func:`run_paired` (context manager, check, time, paused)."""

    def __init__(self, machine: _Machine, side: _Side, log: str) -> None:
        self.machine, self.side, self.log = machine, side, log

    def __enter__(self) -> _Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def check(self, shape: Shape, seed: int) -> _Result:
        return _Result(True, "ok", "", self.log, {"snr": {"out": 120.0}})

    def paused(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # a simulated side runs nothing while idle

    def time(self, shape: Shape, seed: int, phase: str, **kw: Any) -> _Result:
        ms = self.machine.time_ms(self.side, shape.label)
        payload = {"median_ms": ms, "stddev_ms": 0.0, "samples_ms": [ms], "engine": "simulated"}
        return _Result(True, "ok", "", self.log, payload)


def scenario_speeds(model: NoiseModel, scenario: str, faster: Sequence[int] = ()) -> dict:
    """The candidate's speed per shape label in ``scenario`` (module docstring)."""
    labels = [s.label for s in model.shapes]
    if scenario == "mixed":
        return {k: 1.10 if i in faster else 1 / 1.02 for i, k in enumerate(labels)}
    if scenario.startswith(GAIN_PREFIX):  # "faster by X%" on every shape (--gain)
        return dict.fromkeys(labels, 1 + float(scenario[len(GAIN_PREFIX) : -1]) / 100)
    speed = {"A/A": 1.0, "slower 3%": 1 / 1.03, "faster 5%": 1.05}[scenario]
    return dict.fromkeys(labels, speed)


def trial(
    model: NoiseModel,
    speeds: Mapping[str, float],
    seed: int,
    *,
    rule: PairedLooks | None = None,
    k_start: int = 10,
    k_max: int = 40,
    residuals: Sequence[np.ndarray] | None = None,
) -> PairedDecision:
    """One simulated paired run with the candidate at ``speeds``; its decision. With
    ``residuals`` (one array of A/A log ratios per shape) the visits draw those instead of the
    model's lognormal noise."""
    machine = _Machine(model, seed) if residuals is None else _TraceMachine(model, residuals, seed)
    with tempfile.TemporaryDirectory() as logs:
        run = run_paired(
            _Side("incumbent", {}),
            _Side("candidate", dict(speeds)),
            model.shapes,
            phases=("fwd",),
            seed=seed,
            rule=rule or PairedLooks(),
            k_start=k_start,
            k_max=k_max,
            log_dir=Path(logs),
            worker_factory=machine.factory,
            rng_seed=seed,
            campaign_type="compute_fwd",
        )
    return run.decision


def tally(ds: Sequence[PairedDecision]) -> dict[str, Any]:
    """Counts of one scenario's trials: accepted, aggregate SLOWER, rolled back on the
    time-weighted effect, median rounds."""
    return {
        "trials": len(ds),
        "accepted": sum(d.accepted for d in ds),
        "slower": sum(d.verdict_aggregate.value == "SLOWER" for d in ds),
        "time_weighted_slower": sum(
            d.time_weighted is not None and d.time_weighted.confirmed_slower for d in ds
        ),
        "median_rounds": float(np.median([max(r.n_rounds for r in d.per_shape) for d in ds])),
    }


def table(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """The markdown table of :func:`tally` rows by scenario."""
    out = [
        "| scenario | trials | accepted | aggregate SLOWER | time-weighted confirmed slower "
        "| median rounds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        out.append(
            f"| {name} | {r['trials']} | {r['accepted']} | {r['slower']} | "
            f"{r['time_weighted_slower']} | {r['median_rounds']:g} |"
        )
    return "\n".join(out)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,2.5, got {text!r}") from None


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m kernel_ratchet.method.rule_sim", description=__doc__.split("\n")[0]
    )
    p.add_argument("--preset", choices=sorted(PRESETS), default="gemm")
    p.add_argument("--shape-ms", type=_floats, help="incumbent ms per shape (overrides preset)")
    p.add_argument("--noise", type=_floats, help="per-value lognormal sigma per shape")
    p.add_argument("--drift", type=float, help="sigma of the clock factor both sides share")
    p.add_argument(
        "--traces", nargs="+", metavar="TIMINGS_JSONL", help="draw the noise from A/A traces"
    )
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--scenario", action="append", choices=SCENARIOS, help="default: all")
    p.add_argument("--faster", type=_floats, default=(0.0, 1.0), help="mixed: faster shapes")
    p.add_argument("--seed", type=int, default=0, help="first trial's seed")
    p.add_argument("--k-start", type=int, default=10, help="rounds before the first look")
    p.add_argument(
        "--gain",
        type=float,
        action="append",
        metavar="PCT",
        help="a scenario with every shape faster by PCT percent (repeatable: the rule's power)",
    )
    p.add_argument(
        "--equivalence",
        type=float,
        default=EQUIVALENCE_FLOOR,
        help="the rule's equivalence floor: a CI upper bound under it is 'no gain' "
        f"(default {EQUIVALENCE_FLOOR})",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    ms, noise, drift = PRESETS[a.preset]
    residuals = None
    try:
        if a.traces and (a.shape_ms or a.noise or a.drift is not None):
            raise ValueError("--traces gives times and noise: drop --shape-ms, --noise, --drift")
        if a.traces:
            found = read_traces(a.traces)
            ms, noise, drift, residuals = found.shape_ms, found.sigma, 0.0, found.residuals
            for label, t, n, sd in zip(found.labels, ms, found.rounds, noise, strict=True):
                print(f"traces: {label}: {t:.4g} ms, {n} A/A rounds, sigma {sd:.3%}")
        drift = drift if a.drift is None else a.drift
        model = NoiseModel(a.shape_ms or ms, a.noise or noise, drift)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}")
        return 2
    if a.trials < 1:
        print("error: --trials must be at least 1")
        return 2
    faster = [int(i) for i in a.faster]
    rows = {}
    rule = PairedLooks(equivalence_floor=a.equivalence)
    gains = [f"{GAIN_PREFIX}{g:g}%" for g in a.gain or ()]
    for name in [*(a.scenario or ([] if gains else SCENARIOS)), *gains]:
        speeds = scenario_speeds(model, name, faster)
        runs = [
            trial(model, speeds, a.seed + t, rule=rule, k_start=a.k_start, residuals=residuals)
            for t in range(a.trials)
        ]
        rows[name] = tally(runs)
    source = "drawn from the traces" if residuals is not None else "lognormal"
    print(
        f"noise model ({source}): shape ms {model.shape_ms}, noise {model.noise}, "
        f"drift {model.drift}"
    )
    print(f"first look after {a.k_start} rounds, at most 40; equivalence floor {a.equivalence:g}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
