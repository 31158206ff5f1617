"""Statistical validation of the paired A/B decision on real GEMMs, on this GPU.

Runs, with the real worker processes and the bundled bf16 GEMM (:mod:`.planted`):

* A/A: the kernel against itself -> false ACCEPTs and false rollbacks for a >=5% shape
  regression (target: at most 1 false accept in 20, no false regression rollback);
* planted 3% slowdown: the candidate computes a GEMM with 3% more K -> never accepted, flagged
  SLOWER in >= 19/20;
* planted 5% speedup: the incumbent is the one with 5% more K -> accepted in >= 19/20.

Each trial is one paired decision with the campaigns' timing parameters and round budget
(:func:`kernel_ratchet.campaign.rounds.paired.paired_settings`), on the 5 shapes of
:data:`~kernel_ratchet.method.planted.GPU_SHAPES`. It prints one table (:func:`table`) with the
median wall time of one decision (on an H200 with torch 2.11 and triton 3.6, a trial decided at
10 rounds took 25.6 s median over 100 trials, worker start-up, checks and compilation
included)::

    python -m kernel_ratchet.method.ab_trials --trials 20 -o ab_trials.json --logs ab_logs

Trials are interleaved across the scenarios and the JSON is rewritten after every trial, so a
run cut short keeps the same number of trials of each. Every row keeps the per-round times, the
visit order and per-shape ratios; ``--logs`` keeps the worker logs and each trial's
``timings.jsonl`` (:mod:`.traces` reads them). ``--scenario`` runs a subset and
``--first-trial`` numbers the trials (e.g. a second GPU taking trials 100-119).
``--engine-params JSON`` (or ``--engine-params-from`` a :mod:`.noise_probe` result) validates
another timing variant than the campaigns'. ``--shapes decode`` runs five launch-bound GEMMs
(decode rows) instead, where the A/A scenario measures false accepts of the eager step time,
and ``--unpinned`` leaves the two workers unpinned (campaigns pin both to one CPU), so the
two runs compare::

    python -m kernel_ratchet.method.ab_trials --shapes decode --scenario A/A -o pinned.json
    python -m kernel_ratchet.method.ab_trials --shapes decode --scenario A/A --unpinned -o un.json

``--shapes norm`` runs a bf16 RMS norm forward and backward on five shapes from 4096x2048
(:mod:`.norm_subject`: a short memory-bound op; planted effects are 3% more rows in the
candidate, 5% more in the incumbent), timed as kernel time with a cold L2, as a norm campaign
would time it::

    python -m kernel_ratchet.method.ab_trials --shapes norm --trials 20 -o norm.json

``--summarize A.json B.json ...`` merges such files
into the one table. ``--cpu`` runs a tiny version through the Triton interpreter (it exercises
the trials; the numbers say nothing about a GPU).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernel_ratchet.harness.timing.quantity import DEFAULT, Measure
from kernel_ratchet.kernels.benchmarking import output_file
from kernel_ratchet.method import norm_subject, planted
from kernel_ratchet.scoring.noise import pooled_spread
from kernel_ratchet.scoring.paired_looks import PairedLooks

SCENARIOS = ("A/A", "slower 3%", "faster 5%")
#: Speed ratio at or below which a confirmed shape slowdown is a regression (SPEC section 6).
REGRESSION = 0.05


@dataclass(frozen=True)
class TrialPlan:
    """What :func:`run_trials` runs: ``trials`` trials numbered from ``first_trial`` of each of
    ``scenarios``, with the paired timing parameters merged with ``overrides``."""

    trials: int = 20
    first_trial: int = 0
    scenarios: tuple[str, ...] = SCENARIOS
    cuda: bool = True
    overrides: dict[str, Any] | None = None
    shape_set: str = "large"
    pinned: bool = True


#: Per shape set: how its decisions are scored, the phases timed, and the measured quantity
#: (the campaigns' default for the GEMMs); the norm is timed as a norm campaign times it.
SUBJECTS = {
    "large": ("compute_fwd", ("fwd",), DEFAULT),
    "decode": ("compute_fwd", ("fwd",), DEFAULT),
    "norm": ("memory", ("fwd", "bwd"), Measure("kernel_time", "cold")),
}


def scenario_sides(cuda: bool, shape_set: str = "large") -> dict[str, tuple[str, str]]:
    """{scenario: (incumbent adapter, candidate adapter)}."""
    if shape_set == "norm":
        return norm_subject.sides()
    base = planted.base_adapter(cuda)
    kind = "Bf16" if cuda else "Fp16"
    here = "kernel_ratchet.method.planted"
    return {
        "A/A": (base, base),
        "slower 3%": (base, f"{here}:Slower{kind}"),
        "faster 5%": (f"{here}:FasterBaseline{kind}", base),
    }


def trial_row(t: int, wall_s: float, run: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One trial's JSON row: the decision, its numbers, per-round times and visit order."""
    d = run.decision
    row = {
        "trial": t,
        "wall_s": wall_s,
        "check_wall_s": run.check_wall_s,
        "engine_params": params,
        "failure": run.failure.sentence() if run.failure else None,
    }
    if d is not None:
        row.update(
            status=d.status.value,
            verdict=d.verdict_aggregate.value,
            ratio=d.aggregate_ratio,
            ci=[d.aggregate_ci_low, d.aggregate_ci_high],
            rounds=run.rounds,
            reason=d.reason,
            regressions=list(d.regressions),
            regressed=list(d.regressed),
            shape_verdicts={r.label: r.verdict.value for r in d.per_shape},
            shape_ratios={r.label: [r.ratio, r.ci_low, r.ci_high] for r in d.per_shape},
            times=run.to_dict()["times"],
            order=[list(o) for o in run.order],
        )
    return row


def round_spread(rows: list[dict[str, Any]]) -> float | None:
    """The round spread (:func:`kernel_ratchet.scoring.noise.pooled_spread`) of the kept
    per-round times, each trial and shape its own group; None without kept times."""
    groups = []
    for r in rows:
        times = r.get("times") or {}
        for label, inc in times.get("incumbent", {}).items():
            cand = times["candidate"][label]["fwd"]
            groups.append(np.log(np.asarray(inc["fwd"]) / np.asarray(cand)))
    return pooled_spread(groups)


def regression_rollback(row: dict[str, Any], threshold: float = REGRESSION) -> bool:
    """Rolled back by gate 1: the decision's ``regressed`` shapes (confirmed ``threshold`` or
    more slower). Its ``regressions`` also name shapes confirmed slower by less (a trade-off,
    or beside a "no gain" rollback); those are counted apart (:func:`small_slower`). Rows
    without ``regressed`` (written by versions that did not record it) derive it from their
    named shapes' ratios."""
    if "regressed" in row:
        return bool(row["regressed"])
    ratios = row.get("shape_ratios") or {}
    return row.get("status") != "ACCEPTED" and any(
        ratios[s][0] <= 1.0 - threshold for s in row.get("regressions") or () if s in ratios
    )


def small_slower(row: dict[str, Any], threshold: float = REGRESSION) -> int:
    """Shapes of a decision confirmed slower (CI below 1) by less than ``threshold``."""
    ratios = row.get("shape_ratios") or {}
    return sum(1.0 - threshold < ratios[s][0] and ratios[s][2] < 1.0 for s in ratios)


def _table_line(name: str, rows: list[dict[str, Any]]) -> str:
    acc = sum(r.get("status") == "ACCEPTED" for r in rows)
    slow = sum(r.get("verdict") == "SLOWER" for r in rows)
    regress = sum(regression_rollback(r) for r in rows)
    small = sum(small_slower(r) for r in rows)
    n_shapes = sum(len(r.get("shape_ratios") or {}) for r in rows)
    fails = sum(r["failure"] is not None for r in rows)
    wall = sorted(r["wall_s"] for r in rows)[len(rows) // 2]
    rounds = sorted(r.get("rounds", 0) for r in rows)[len(rows) // 2]
    spread = round_spread(rows)
    return (
        f"| {name} | {len(rows)} | {acc} | {slow} | {regress} | {small} of "
        f"{n_shapes} | {fails} "
        f"| {wall:.1f} | {rounds} | "
        f"{'-' if spread is None else f'{spread:.2%}'} |"
    )


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    """The markdown table per scenario: accepts, aggregate SLOWER flags, rollbacks for a ≥5%
    shape regression, shapes confirmed slower by less, failures, median wall seconds and
    rounds, and the spread of one round's ratio."""
    lines = [
        "| scenario | trials | ACCEPTED | aggregate SLOWER | rolled back for a ≥5% shape "
        "regression | shapes confirmed slower by < 5% | failures | median wall s "
        "| median rounds | round spread |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_table_line(name, rows) for name, rows in results.items() if rows]
    return "\n".join(lines)


def summarize(paths: list[Path]) -> str:
    """The table of several result files merged scenario by scenario."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        for name, rows in json.loads(Path(path).read_text()).items():
            merged.setdefault(name, []).extend(rows)
    return table(merged)


def run_trials(
    plan: TrialPlan,
    output: Path,
    logs: Path | None = None,
    say: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True),
) -> dict[str, list[dict[str, Any]]]:
    """Run ``plan``, interleaved (trial 0 of every scenario, then trial 1, ...: a run cut short
    still holds the same number of trials of each), rewriting ``output`` after every trial;
    returns {scenario: rows}."""
    from kernel_ratchet.campaign.rounds.paired import paired_settings
    from kernel_ratchet.harness.ab import run_paired
    from kernel_ratchet.harness.timing.quantity import engine_measure

    ctype, phases, measure = SUBJECTS[plan.shape_set]
    over = plan.overrides or {}
    measure = engine_measure(over.get("quantity"), over.get("l2")) or measure
    base_params, k_start, k_max = paired_settings(plan.cuda, measure, ctype)
    params = {**base_params, **(plan.overrides or {})}
    say(f"engine parameters: {params}")
    shapes = _shapes(plan)
    say(f"shapes: {[s.label for s in shapes]}; workers {'pinned' if plan.pinned else 'unpinned'}")
    all_sides = scenario_sides(plan.cuda, plan.shape_set)
    sides = {k: v for k, v in all_sides.items() if k in plan.scenarios}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(logs or tmp_dir)
        for t in range(plan.first_trial, plan.first_trial + plan.trials):
            for name, (inc, cand) in sides.items():
                t0 = time.monotonic()
                run = run_paired(
                    planted.worker_spec(inc, plan.cuda, params, plan.pinned),
                    planted.worker_spec(cand, plan.cuda, params, plan.pinned),
                    shapes,
                    phases=list(phases),
                    seed=secrets.randbits(63),
                    rule=PairedLooks(),
                    k_start=k_start,
                    k_max=k_max,
                    log_dir=tmp / f"{name.split()[0].replace('/', '')}-{t}",
                    rng_seed=t,
                    campaign_type=ctype,
                    progress=say,
                )
                row = trial_row(t, time.monotonic() - t0, run, params)
                row.update(shape_set=plan.shape_set, pinned=plan.pinned)
                results[name].append(row)
                output.write_text(json.dumps(results, indent=2))
                brief = {k: v for k, v in row.items() if k not in ("times", "order", "reason")}
                say(f"{name} trial {t}: {brief}")
    return results


def _shapes(plan: TrialPlan) -> list:
    """The shapes of the plan's shape set (the interpreter's tiny ones on the CPU)."""
    if plan.shape_set == "norm":
        return norm_subject.shapes(
            norm_subject.GPU_SHAPES if plan.cuda else norm_subject.CPU_SHAPES
        )
    dims = {"large": planted.GPU_SHAPES, "decode": planted.DECODE_SHAPES}[plan.shape_set]
    return planted.shapes(dims if plan.cuda else planted.CPU_SHAPES)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = json.loads(args.engine_params)
    if args.engine_params_from:
        chosen = json.loads(Path(args.engine_params_from).read_text())["chosen"]["params"]
        overrides = {**chosen, **overrides}
    return overrides


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of ``python -m kernel_ratchet.method.ab_trials``."""
    p = argparse.ArgumentParser(
        prog="python -m kernel_ratchet.method.ab_trials", description=__doc__.splitlines()[0]
    )
    p.add_argument("--trials", type=int, default=20)
    p.add_argument(
        "--first-trial",
        type=int,
        default=0,
        help="number of the first trial (shuffle seed; e.g. 100 on a second GPU)",
    )
    p.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIOS,
        help="run only this scenario (repeatable; default: all three)",
    )
    p.add_argument("--cpu", action="store_true", help="tiny interpreter smoke run")
    p.add_argument(
        "--shapes",
        choices=tuple(SUBJECTS),
        default="large",
        help="large: five GEMMs bound by the GPU (default); decode: five launch-bound ones "
        "(meaningful for the A/A scenario: a planted K changes little of a host-bound time); "
        "norm: a bf16 RMS norm forward and backward on five shapes from 4096x2048, kernel "
        "time with a cold L2 (norm_subject)",
    )
    p.add_argument(
        "--unpinned",
        action="store_true",
        help="leave both workers where the scheduler puts them (campaigns pin them to one CPU)",
    )
    p.add_argument(
        "--engine-params",
        default="{}",
        help="JSON merged over the campaigns' paired timing parameters (a variant to validate)",
    )
    p.add_argument(
        "--engine-params-from",
        metavar="PROBE_JSON",
        help="take the variant kernel_ratchet.method.noise_probe chose (its 'chosen' entry)",
    )
    p.add_argument("--logs", help="keep every trial's worker logs and timings.jsonl here")
    p.add_argument("-o", "--output", default="ab_trials.json", type=output_file)
    p.add_argument("--summarize", nargs="+", metavar="JSON", help="merge result files, print")
    return p.parse_args(argv)


def plan_of(args: argparse.Namespace, cuda: bool) -> TrialPlan:
    """The trials the command line asks for (``cuda``: whether a GPU is there)."""
    return TrialPlan(
        trials=args.trials,
        first_trial=args.first_trial,
        scenarios=tuple(args.scenario or SCENARIOS),
        cuda=cuda and not args.cpu,
        overrides=_overrides(args),
        shape_set=args.shapes,
        pinned=not args.unpinned,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m kernel_ratchet.method.ab_trials``: run the trials (or merge result files)
    and print the table."""
    import torch

    args = parse_args(argv)
    if args.summarize:
        print(summarize([Path(p) for p in args.summarize]))
        return 0
    plan = plan_of(args, cuda=torch.cuda.is_available())
    logs = Path(args.logs) if args.logs else None
    print(table(run_trials(plan, Path(args.output), logs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
