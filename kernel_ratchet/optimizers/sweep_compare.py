"""How close is a campaign's result to the best configuration of an exhaustive sweep?

The project tree at ``root`` (a campaign's checkout after its last round: the tunables file holds
the campaign's final configuration) is measured against a copy of the same tree whose tunables
file is the sweep's ``best_text`` (:mod:`kernel_ratchet.optimizers.sweep`), with the paired A/B
that decides campaign rounds: two isolated worker processes, shuffled interleaved rounds (10, up
to 40 while ambiguous), per-round secret inputs, bootstrap CIs, the primary metric of the op's
campaign type. Shapes: the sweep's, plus the campaign's representative shapes when a campaign
directory is given. The ratio is the campaign's speed over the sweep best's (above 1: the
campaign is faster); the target is met when it is at least ``target`` (default 0.97). When the
campaign's tunables file holds the sweep's best configuration itself (every entry's values;
comments and docstrings may differ), nothing is measured and the verdict says so.

    ratchet sweep-compare --root CAMPAIGN_CHECKOUT \\
        --campaign CAMPAIGN_DIR --sweep sweep_bf16.json -o compare_bf16.json --logs compare_logs

On the CPU it runs through the Triton interpreter (it exercises the comparison; the timings
say nothing about a GPU).
"""

from __future__ import annotations

import json
import math
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.knobs.tunables import parse_tunables
from kernel_ratchet.optimizers.base import OptimizerError
from kernel_ratchet.scoring.paired_looks import PairedLooks

#: Paths of the project tree not copied for the sweep-best side.
SKIP = shutil.ignore_patterns(".git", ".ratchet", ".incumbent", "__pycache__", ".pytest_cache")


@dataclass(frozen=True)
class CompareRequest:
    """One comparison: the campaign's checkout ``root``, the sweep's JSON, optionally the
    campaign directory (for its representative shapes and search space), the target ratio, a
    round budget overriding the campaigns' (never under the first look) and a log folder."""

    root: Path
    sweep: Path
    output: Path
    campaign: Path | None = None
    target: float = 0.97
    k_max: int | None = None
    logs: Path | None = None


def shapes_of(sweep: dict[str, Any], campaign: Path | None) -> list[Shape]:
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


def same_space(sweep: dict[str, Any], campaign: Path | None) -> str | None:
    """Why the campaign's search space is not the sweep's (its recorded ``--knobs``), or None
    (also when there is no campaign record to compare)."""
    if campaign is None:
        return None
    from kernel_ratchet.campaign.driver import recorded_driver

    last = recorded_driver(campaign)
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


def _base(
    req: CompareRequest, sweep: dict[str, Any], shapes: list[Shape], params: dict, final: str
) -> dict[str, Any]:
    """The comparison's JSON before any measurement (a space mismatch is warned about)."""
    space = same_space(sweep, req.campaign)
    if space:
        print(f"warning: {space}", file=sys.stderr)
    return {
        "space_warning": space,
        "op": sweep["op"],
        "root": str(req.root),
        "campaign": str(req.campaign) if req.campaign else None,
        "shapes": [s.label for s in shapes],
        "engine_params": params,
        "same_configuration": configuration(final) == configuration(sweep["best_text"]),
        "target": req.target,
        "sweep_best": sweep["best"],
        "sweep_shipped_aggregate": sweep.get("shipped_aggregate"),
    }


def _measure(req: CompareRequest, sweep: dict, op: Any, shapes: list[Shape], settings: tuple):
    """The paired A/B of the sweep's best (incumbent side) against the tree (candidate)."""
    import torch

    from kernel_ratchet.harness.ab import run_paired
    from kernel_ratchet.harness.worker import WorkerSpec

    cuda = torch.cuda.is_available()
    params, k_start, k_max = settings
    with tempfile.TemporaryDirectory() as tmp:
        best_root = Path(tmp) / "sweep_best"
        shutil.copytree(req.root, best_root, ignore=SKIP)
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

        return run_paired(
            spec(best_root),
            spec(req.root),
            shapes,
            phases=["fwd", "bwd"] if op.campaign_type == "compute_fwd_bwd" else ["fwd"],
            seed=secrets.randbits(63),
            rule=PairedLooks(),
            k_start=k_start,
            k_max=k_max,
            log_dir=Path(req.logs or Path(tmp) / "logs"),
            campaign_type=op.campaign_type,
            progress=print,
        )


def compare(req: CompareRequest) -> int:
    """Measure the campaign's tree against the sweep's best and write the comparison JSON to
    ``req.output``; returns 0 when the comparison was decided (or nothing needed measuring), 1
    when the A/B failed. Raises OptimizerError when the sweep has no best configuration."""
    import torch

    from kernel_ratchet.campaign.rounds.paired import paired_settings
    from kernel_ratchet.profile.loader import find_profile, load_profile

    sweep = json.loads(Path(req.sweep).read_text())
    if not sweep.get("best_text"):
        raise OptimizerError(
            f"{req.sweep} has no best configuration (a sweep that did not finish?)"
        )
    op = load_profile(find_profile(req.root)).op(sweep["op"])
    shapes = shapes_of(sweep, req.campaign)
    params, k_start, k_max = paired_settings(torch.cuda.is_available())
    if req.k_max:
        k_max = max(req.k_max, k_start)
    base = _base(req, sweep, shapes, params, (req.root / op.tunables).read_text())
    if base["same_configuration"]:
        base["verdict"] = (
            "MET: the campaign ended at the sweep's best configuration itself "
            "(the same values in every tunables entry); nothing to measure"
        )
        req.output.write_text(json.dumps(base, indent=1))
        print(base["verdict"])
        return 0
    run = _measure(req, sweep, op, shapes, (params, k_start, k_max))
    return _write_result(req, base, run, len(shapes))


def _write_result(req: CompareRequest, base: dict[str, Any], run: Any, n_shapes: int) -> int:
    out = {**base, "run": run.to_dict()}
    if not run.ok:
        out["verdict"] = f"FAILED: {run.failure.sentence()}"
        req.output.write_text(json.dumps(out, indent=1))
        print(out["verdict"], file=sys.stderr)
        return 1
    d = run.decision
    out.update(
        ratio=d.aggregate_ratio,
        ci=[d.aggregate_ci_low, d.aggregate_ci_high],
        per_shape={r.label: [r.ratio, r.ci_low, r.ci_high] for r in d.per_shape},
        rounds=run.rounds,
        verdict=verdict(d.aggregate_ratio, d.aggregate_ci_low, d.aggregate_ci_high, req.target),
    )
    req.output.write_text(json.dumps(out, indent=1))
    print(
        f"campaign vs sweep best, {n_shapes} shapes, {run.rounds} paired rounds: "
        f"{d.aggregate_ratio:.4f}x [{d.aggregate_ci_low:.4f}, {d.aggregate_ci_high:.4f}]"
    )
    print(out["verdict"])
    return 0 if math.isfinite(d.aggregate_ratio) else 1
