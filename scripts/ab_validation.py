"""Statistical validation of the paired A/B decision on real GEMMs (issue 5, "Done when").

Runs, with the real worker processes and the bundled bf16 GEMM:

* A/A: the kernel against itself, ``--trials`` times on 5 shapes -> false ACCEPTs and false
  rollbacks for a >=5% shape regression (target: at most 1 false accept in 20, no false
  regression rollback);
* planted 3% slowdown: the candidate computes a GEMM with 3% more K -> never accepted, flagged
  SLOWER in >= 19/20;
* planted 5% speedup: the incumbent is the one with 5% more K -> accepted in >= 19/20.

The padded K is rounded to whole 64-wide K tiles (a masked tail tile would cost a whole tile:
before 2026-11-30 00:21 UTC the "5%" plant read 8-10%): +3.1% K on every shape for the
slowdown, +4.7% (K = 4096) and +4.9% (K = 14336) for the speedup.

The script prints one table plus the wall time of one paired decision. Run on the H200 from
the repo root. On 2026-11-30 a decided trial took ~35 s (10 rounds) and an A/A trial ~107 s
(40 rounds, the budget of an ambiguous decision):

    python scripts/ab_validation.py --trials 20 -o $OUT/ab_validation.json --logs $OUT/ab_logs

Trials are interleaved across the scenarios and the JSON is rewritten after every trial, so a
run cut short keeps the same number of trials of each. Every row keeps the per-round times, the
visit order and per-shape ratios; ``--logs`` keeps the worker logs and each trial's
``timings.jsonl`` (samples and SM clocks of every timing request). ``--scenario`` runs a subset
and ``--first-trial`` numbers the trials, e.g. a second GPU taking trials 100-119.
``--engine-params JSON`` (or ``--engine-params-from`` a ``scripts/noise_probe.py`` result)
validates another timing variant than the campaigns' ``GPU_PAIRED_TIMING``.
``--summarize A.json B.json ...`` merges such files into the one table. ``--cpu`` runs a tiny
version through the Triton interpreter (a smoke test of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from kernel_ratchet.campaign.rounds.paired import (
    CPU_PAIRED_TIMING,
    GPU_PAIRED_TIMING,
    K_MAX,
    K_MAX_CPU,
    K_START,
    K_START_CPU,
)
from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import WorkerSpec
from kernel_ratchet.kernels.gemm.adapter import GemmBf16, GemmCase, GemmFp16, make_linear_inputs
from kernel_ratchet.scoring.noise import pooled_spread

GPU_SHAPES = [
    (4096, 4096, 4096),
    (8192, 4096, 4096),
    (4096, 14336, 4096),
    (4096, 4096, 14336),
    (2048, 6144, 4096),
]
CPU_SHAPES = [(32, 32, 32), (48, 32, 32)]


class _MoreK:
    """Mixin: the case holds a GEMM with ``PAD`` x K while FLOPs stay those of K."""

    PAD = 1.0

    def make_case(self, shape: Shape, seed: int, device: str) -> GemmCase:
        tile = 64 if device == "cuda" else 16  # whole 64-wide K tiles on the GPU: no masked tail
        k = int(round(shape.K * self.PAD / tile)) * tile
        padded = Shape(shape.label, shape.M, shape.N, k, shape.B)
        dtype = torch.bfloat16 if device == "cuda" else torch.float16
        return make_linear_inputs(padded, seed, device, dtype)


class SlowerBf16(_MoreK, GemmBf16):
    PAD = 1.03


class FasterBaselineBf16(_MoreK, GemmBf16):
    """Used as the *incumbent* of the planted-speedup scenario (the candidate is plain)."""

    PAD = 1.05


class SlowerFp16(_MoreK, GemmFp16):
    PAD = 1.03


class FasterBaselineFp16(_MoreK, GemmFp16):
    PAD = 1.05


def _spec(adapter: str, cuda: bool, overrides: dict | None = None) -> WorkerSpec:
    params = dict(GPU_PAIRED_TIMING if cuda else CPU_PAIRED_TIMING)  # what campaigns use
    params.update(overrides or {})
    return WorkerSpec(
        source_root=str(Path(__file__).resolve().parents[1]),
        adapter=adapter,
        engine="cuda_events" if cuda else "perf_counter",
        engine_params=params,
        device="cuda" if cuda else "cpu",
        interpret=not cuda,
    )


SCENARIOS = ("A/A", "slower 3%", "faster 5%")


def _row(t: int, wall_s: float, run, params: dict) -> dict:
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


def round_spread(rows: list[dict]) -> float | None:
    """The round spread (:func:`kernel_ratchet.scoring.noise.pooled_spread`) of the kept
    per-round times, each trial and shape its own group; None without kept times."""
    groups = []
    for r in rows:
        times = r.get("times") or {}
        for label, inc in times.get("incumbent", {}).items():
            cand = times["candidate"][label]["fwd"]
            groups.append(np.log(np.asarray(inc["fwd"]) / np.asarray(cand)))
    return pooled_spread(groups)


def regression_rollback(row: dict, threshold: float = 0.05) -> bool:
    """Rolled back by gate 1: the decision's ``regressed`` shapes (confirmed ``threshold`` or
    more slower). Its ``regressions`` also name shapes confirmed slower by less (a trade-off,
    or beside a "no gain" rollback); those are counted apart (:func:`small_slower`). Rows
    written before ``regressed`` was recorded (2026-11-30 02:27 run) derive it from their
    named shapes' ratios."""
    if "regressed" in row:
        return bool(row["regressed"])
    ratios = row.get("shape_ratios") or {}
    return row.get("status") != "ACCEPTED" and any(
        ratios[s][0] <= 1.0 - threshold for s in row.get("regressions") or () if s in ratios
    )


def small_slower(row: dict, threshold: float = 0.05) -> int:
    """Shapes of a decision confirmed slower (CI below 1) by less than ``threshold``."""
    ratios = row.get("shape_ratios") or {}
    return sum(1.0 - threshold < ratios[s][0] and ratios[s][2] < 1.0 for s in ratios)


def table(results: dict[str, list[dict]]) -> str:
    """The issue's numbers per scenario: accepts, aggregate SLOWER flags, rollbacks for a ≥5%
    shape regression, shapes confirmed slower by less, and the spread of one round's ratio."""
    lines = [
        "| scenario | trials | ACCEPTED | aggregate SLOWER | rolled back for a ≥5% shape "
        "regression | shapes confirmed slower by < 5% | failures | median wall s "
        "| median rounds | round spread |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        if not rows:
            continue
        acc = sum(r.get("status") == "ACCEPTED" for r in rows)
        slow = sum(r.get("verdict") == "SLOWER" for r in rows)
        regress = sum(regression_rollback(r) for r in rows)
        small = sum(small_slower(r) for r in rows)
        n_shapes = sum(len(r.get("shape_ratios") or {}) for r in rows)
        fails = sum(r["failure"] is not None for r in rows)
        wall = sorted(r["wall_s"] for r in rows)[len(rows) // 2]
        rounds = sorted(r.get("rounds", 0) for r in rows)[len(rows) // 2]
        spread = round_spread(rows)
        lines.append(
            f"| {name} | {len(rows)} | {acc} | {slow} | {regress} | {small} of "
            f"{n_shapes} | {fails} "
            f"| {wall:.1f} | {rounds} | "
            f"{'-' if spread is None else f'{spread:.2%}'} |"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument(
        "--first-trial",
        type=int,
        default=0,
        help="number of the first trial (shuffle seed; e.g. 10 on a second GPU)",
    )
    p.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIOS,
        help="run only this scenario (repeatable; default: all three)",
    )
    p.add_argument("--cpu", action="store_true", help="tiny interpreter smoke run")
    p.add_argument(
        "--engine-params",
        default="{}",
        help="JSON merged over the campaigns' paired timing parameters (a variant to validate)",
    )
    p.add_argument(
        "--engine-params-from",
        metavar="PROBE_JSON",
        help="take the variant scripts/noise_probe.py chose (its 'chosen' entry)",
    )
    p.add_argument("--logs", help="keep every trial's worker logs and timings.jsonl here")
    p.add_argument("-o", "--output", default="ab_validation.json")
    p.add_argument("--summarize", nargs="+", metavar="JSON", help="merge result files, print")
    args = p.parse_args()
    if args.summarize:
        merged: dict[str, list[dict]] = {}
        for path in args.summarize:
            for name, rows in json.loads(Path(path).read_text()).items():
                merged.setdefault(name, []).extend(rows)
        print(table(merged))
        return 0
    cuda = torch.cuda.is_available() and not args.cpu
    overrides = json.loads(args.engine_params)
    if args.engine_params_from:
        overrides = {
            **json.loads(Path(args.engine_params_from).read_text())["chosen"]["params"],
            **overrides,
        }
    params = {**(GPU_PAIRED_TIMING if cuda else CPU_PAIRED_TIMING), **overrides}
    print(f"engine parameters: {params}", file=sys.stderr, flush=True)
    dims = GPU_SHAPES if cuda else CPU_SHAPES
    shapes = [Shape(f"m{m}_n{n}_k{k}", m, n, k) for m, n, k in dims]
    kind = "Bf16" if cuda else "Fp16"  # bf16 tl.dot is wrong in the interpreter
    base = f"kernel_ratchet.kernels.gemm.adapter:Gemm{kind}"
    here = "scripts.ab_validation"
    scenarios = {
        "A/A": (base, base),
        "slower 3%": (base, f"{here}:Slower{kind}"),
        "faster 5%": (f"{here}:FasterBaseline{kind}", base),
    }
    scenarios = {k: v for k, v in scenarios.items() if k in (args.scenario or SCENARIOS)}
    k_start, k_max = (K_START, K_MAX) if cuda else (K_START_CPU, K_MAX_CPU)  # as campaigns
    results = {name: [] for name in scenarios}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = args.logs or tmp_dir
        # Interleaved (trial 0 of every scenario, then trial 1, ...): a run cut short by its
        # time limit still holds the same number of trials of each scenario.
        for t in range(args.first_trial, args.first_trial + args.trials):
            for name, (inc, cand) in scenarios.items():
                t0 = time.monotonic()
                tag = name.split()[0].replace("/", "")
                run = run_paired(
                    _spec(inc, cuda, overrides),
                    _spec(cand, cuda, overrides),
                    shapes,
                    phases=["fwd"],
                    seed=secrets.randbits(63),
                    k_start=k_start,
                    k_max=k_max,
                    log_dir=Path(tmp) / f"{tag}-{t}",
                    rng_seed=t,
                    campaign_type="compute_fwd",
                )
                row = _row(t, time.monotonic() - t0, run, params)
                results[name].append(row)
                Path(args.output).write_text(json.dumps(results, indent=2))
                brief = {k: v for k, v in row.items() if k not in ("times", "order", "reason")}
                print(f"{name} trial {t}: {brief}", file=sys.stderr, flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
