"""How close is a campaign's result to the best configuration of an exhaustive sweep? (issue 6:
"≥ 97% of the best configuration that an exhaustive sweep of the same space finds")

The project tree at ``--root`` (a campaign's checkout after its last round: the tunables file
holds the campaign's final configuration) is measured against a copy of the same tree whose
tunables file is the sweep's ``best_text`` (``scripts/sweep_exhaustive.py``), with the paired
A/B that decides campaign rounds: two isolated worker processes, shuffled interleaved rounds
(10, up to 40 while ambiguous), per-round secret inputs, bootstrap CIs, the primary metric of
the op's campaign type. Shapes: the sweep's, plus the campaign's representative shapes with
``--campaign``. The ratio is the campaign's speed over the sweep best's (above 1: the campaign
is faster); the target is met when it is at least ``--target`` (0.97). When the campaign's
tunables file holds the sweep's best configuration itself (every entry's values; comments and
docstrings may differ), nothing is measured and the verdict says so.

    python scripts/compare_sweep.py --root CAMPAIGN_CHECKOUT --campaign CAMPAIGN_DIR \\
        --sweep sweep_bf16.json -o compare_bf16.json --logs compare_logs

On the CPU it runs through the Triton interpreter (a smoke test, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from kernel_ratchet.campaign.rounds.paired import paired_settings
from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import WorkerSpec
from kernel_ratchet.optimizers.tunables import parse_tunables
from kernel_ratchet.profile.loader import find_profile, load_profile

SKIP = shutil.ignore_patterns(".git", ".ratchet", ".incumbent", "__pycache__", ".pytest_cache")


def shapes_of(sweep: dict, campaign: Path | None) -> list[Shape]:
    """The sweep's shapes, then the campaign's representative shapes not among them."""
    dicts = list(sweep["shapes"])
    if campaign is not None:
        from kernel_ratchet.campaign.manifest import load_manifest

        dicts += load_manifest(campaign).representative_shape_dicts
    seen, out = set(), []
    for d in dicts:
        if d["label"] not in seen:
            seen.add(d["label"])
            out.append(Shape.from_dict(d))
    return out


def same_space(sweep: dict, campaign: Path | None) -> str | None:
    """Why the campaign's search space is not the sweep's (its recorded ``--knobs``), or None
    (also when there is no campaign record to compare)."""
    if campaign is None:
        return None
    from kernel_ratchet.optimizers.loop import recorded_optimizer

    last = recorded_optimizer(campaign)
    if not last or last.get("name") != "search":
        return None
    knobs = sorted(last.get("knobs") or [])
    if knobs != sorted(sweep["knobs"]):
        return (
            f"the campaign's search moved {knobs or 'every knob'}, the sweep covered "
            f"{sorted(sweep['knobs'])}: not the same space"
        )
    return None


def configuration(text: str) -> dict[str, dict[str, object]]:
    """Every entry's knob values of a tunables file (what runs; its comments do not)."""
    return {
        key: {k: kv.value for k, kv in e.knobs.items()}
        for key, e in parse_tunables(text).entries.items()
    }


def verdict(ratio: float, lo: float, hi: float, target: float) -> str:
    """The sentence of the comparison (ratio = campaign speed / sweep-best speed)."""
    pct = f"{ratio:.1%} of the sweep's best [{lo:.1%}, {hi:.1%}]"
    if ratio >= target and lo >= target:
        return f"MET: the campaign reaches {pct}; the CI excludes falling short of {target:.0%}"
    if ratio >= target:
        return (
            f"MET (point estimate): the campaign reaches {pct}; the CI reaches below {target:.0%}"
        )
    return f"MISSED: the campaign reaches {pct}, under the {target:.0%} target"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=".", help="the campaign's project checkout")
    p.add_argument("--sweep", required=True, help="JSON of scripts/sweep_exhaustive.py")
    p.add_argument("--campaign", help="campaign dir: add its representative shapes")
    p.add_argument("--target", type=float, default=0.97)
    p.add_argument("--k-max", type=int, help="round budget of the A/B (default: the campaigns')")
    p.add_argument("-o", "--output", default="compare.json")
    p.add_argument("--logs", help="keep the worker logs here")
    args = p.parse_args()
    root = Path(args.root).resolve()
    sweep = json.loads(Path(args.sweep).read_text())
    if not sweep.get("best_text"):
        raise SystemExit(f"{args.sweep} has no best configuration (a sweep that did not finish?)")
    prof = load_profile(find_profile(root))
    op = prof.op(sweep["op"])
    campaign = Path(args.campaign).resolve() if args.campaign else None
    shapes = shapes_of(sweep, campaign)
    cuda = torch.cuda.is_available()
    params, k_start, k_max = paired_settings(cuda)
    phases = ["fwd", "bwd"] if op.campaign_type == "compute_fwd_bwd" else ["fwd"]
    final_text = (root / op.tunables).read_text()
    if args.k_max:
        k_max = max(args.k_max, k_start)
    space = same_space(sweep, campaign)
    if space:
        print(f"warning: {space}", file=sys.stderr)
    base = {
        "space_warning": space,
        "op": sweep["op"],
        "root": str(root),
        "campaign": str(campaign) if campaign else None,
        "shapes": [s.label for s in shapes],
        "engine_params": params,
        "same_configuration": configuration(final_text) == configuration(sweep["best_text"]),
        "target": args.target,
        "sweep_best": sweep["best"],
        "sweep_shipped_aggregate": sweep.get("shipped_aggregate"),
    }
    if base["same_configuration"]:
        base["verdict"] = (
            "MET: the campaign ended at the sweep's best configuration itself "
            "(the same values in every tunables entry); nothing to measure"
        )
        Path(args.output).write_text(json.dumps(base, indent=1))
        print(base["verdict"])
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        best_root = Path(tmp) / "sweep_best"
        shutil.copytree(root, best_root, ignore=SKIP)
        (best_root / op.tunables).write_text(sweep["best_text"])

        def spec(src: Path) -> WorkerSpec:
            return WorkerSpec(
                source_root=str(src),
                adapter=op.adapter,
                engine="cuda_events" if cuda else "perf_counter",
                engine_params=params,
                device="cuda" if cuda else "cpu",
                interpret=not cuda,
            )

        logs = Path(args.logs or Path(tmp) / "logs")
        run = run_paired(
            spec(best_root),
            spec(root),
            shapes,
            phases=phases,
            seed=secrets.randbits(63),
            k_start=k_start,
            k_max=k_max,
            log_dir=logs,
            campaign_type=op.campaign_type,
            progress=print,
        )
    out = {**base, "run": run.to_dict()}
    if not run.ok:
        out["verdict"] = f"FAILED: {run.failure.sentence()}"
        Path(args.output).write_text(json.dumps(out, indent=1))
        print(out["verdict"], file=sys.stderr)
        return 1
    d = run.decision
    out.update(
        ratio=d.aggregate_ratio,
        ci=[d.aggregate_ci_low, d.aggregate_ci_high],
        per_shape={r.label: [r.ratio, r.ci_low, r.ci_high] for r in d.per_shape},
        rounds=run.rounds,
        verdict=verdict(d.aggregate_ratio, d.aggregate_ci_low, d.aggregate_ci_high, args.target),
    )
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(
        f"campaign vs sweep best, {len(shapes)} shapes, {run.rounds} paired rounds: "
        f"{d.aggregate_ratio:.4f}x [{d.aggregate_ci_low:.4f}, {d.aggregate_ci_high:.4f}]"
    )
    print(out["verdict"])
    return 0 if math.isfinite(d.aggregate_ratio) else 1


if __name__ == "__main__":
    sys.exit(main())
