"""Exhaustive sweep of a tunables space: the yardstick a search campaign is measured against.

Every combination of ``knobs`` in each entry of the op's tunables file is measured with the
campaign's own adapter and timing engine (``cuda_events`` with the harness's parameters,
:data:`kernel_ratchet.campaign.create.GPU_TIMING`, at :data:`SWEEP_SAMPLES` samples; on the CPU
the Triton interpreter, which exercises the sweep but measures nothing about a GPU), correctness
checked first on every shape. A configuration is put in force by running the assignments of the
rewritten tunables text (the same text rewrite the search uses) in the already imported tunables
module, so the kernels read it at their next launch (:func:`apply_text`); the file on disk is
never written, and one process measures every configuration (no start-up and import per
configuration; each shape's inputs and reference are made once).

Entries are swept one at a time, the others at their shipped values. ``ENTRY=PHASE`` says which
timed phase an entry governs: ``fwd``, ``bwd`` or ``both`` (the default). For an op whose
forward and backward use different entries (``gemm_bf16``: ``CONFIGS/bf16/large=fwd``,
``CONFIGS/bf16_bwd/large=bwd``) each phase's time depends on its own entry only, so every
combination of the entries' configurations is scored exactly from the per-entry sweeps: the
joint space is covered with the sum, not the product, of the measurements. The score is the
campaign's primary metric (:func:`kernel_ratchet.scoring.metrics.aggregates`), computed from a
CSV written in the op's frozen schema.

    ratchet sweep --op gemm_bf16 \\
        --knobs block_m,block_n,num_warps,num_stages \\
        --entry CONFIGS/bf16/large=fwd --entry CONFIGS/bf16_bwd/large=bwd \\
        --campaign .ratchet/campaigns/NAME -o sweep_bf16.json

``--campaign`` measures that campaign's representative shapes (what its quick validations
measure); without it, ``--shapes N`` evenly spaced shapes of the op's set. The JSON is rewritten
after every configuration (a sweep cut short keeps what it measured; ``--resume`` measures only
the configurations an earlier run of the same sweep left out) and holds every measurement, the
best combination, the shipped one, and ``best_text``: the tunables file with the best
combination written in, which :mod:`kernel_ratchet.optimizers.sweep_compare` measures against a
campaign's result with the paired A/B. The best of many single measurements is biased upwards by
noise (the winner's curse): the paired comparison is the number to quote.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernel_ratchet.harness.adapter import Shape, load_adapter, load_shapes
from kernel_ratchet.knobs.tunables import Tunables, parse_tunables, set_knobs
from kernel_ratchet.optimizers.base import OptimizerError
from kernel_ratchet.optimizers.sweep_measure import (
    SWEEP_SAMPLES,
    apply_text,
    combine,
    evenly,
    grid,
    load_module,
    measure_config,
    parse_entries,
    previous,
    score,
)


@dataclass(frozen=True)
class SweepRequest:
    """One sweep: ``entries`` are ``ENTRY[=fwd|bwd|both]``; ``campaign`` (a campaign
    directory) chooses its representative shapes, else ``n_shapes`` of the op's set; at most
    ``max_configs`` configurations per entry; no configuration starts past ``budget_s``."""

    op: str
    entries: tuple[str, ...]
    knobs: tuple[str, ...]
    output: Path
    campaign: Path | None = None
    n_shapes: int = 5
    profile: Path | None = None
    max_configs: int = 200
    budget_s: float = math.inf
    resume: bool = False


@dataclass(frozen=True)
class _Target:
    """What a sweep measures with: the op, its adapter and schema, the tunables file (text,
    parse, imported module), the shapes and the timing engine."""

    campaign_type: str
    adapter: Any
    schema: Any
    path: Path
    original: str
    tunables: Tunables
    module: ModuleType
    shapes: list[Shape]
    engine: Any
    engine_name: str
    device: str


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _engine(cuda: bool) -> tuple[str, Any]:
    from kernel_ratchet.campaign.create import CPU_TIMING, GPU_TIMING
    from kernel_ratchet.harness.timing.quantity import DEFAULT
    from kernel_ratchet.harness.timing.registry import make_engine

    if cuda:
        params = {**GPU_TIMING, **DEFAULT.to_dict(), "samples": SWEEP_SAMPLES, "device": "cuda"}
        return "cuda_events", make_engine("cuda_events", params)
    return "perf_counter", make_engine("perf_counter", dict(CPU_TIMING))


def _shapes(req: SweepRequest, shapes_spec: str) -> list[Shape]:
    if req.campaign is None:
        return evenly(load_shapes(shapes_spec), req.n_shapes)
    from kernel_ratchet.campaign.manifest import load_manifest

    manifest = load_manifest(Path(req.campaign))
    return [Shape.from_dict(d) for d in manifest.representative_shape_dicts]


def prepare(req: SweepRequest) -> _Target:
    """Load the profile, the op's adapter and tunables module, the shapes and the engine.
    Raises OptimizerError when the op has no tunables file or an entry is not in it."""
    import torch

    from kernel_ratchet.harness.csv_schema import get_schema
    from kernel_ratchet.profile.loader import find_profile, load_profile

    cuda = torch.cuda.is_available()
    if not cuda:  # before the op's kernels are imported
        os.environ.setdefault("TRITON_INTERPRET", "1")
    prof = load_profile(req.profile or find_profile(Path.cwd()))
    op = prof.op(req.op)
    if not op.tunables:
        raise OptimizerError(f"ops.{req.op} declares no tunables file")
    path = prof.root / op.tunables
    original = path.read_text()
    tun = parse_tunables(original)
    unknown = [e for e in (s.partition("=")[0] for s in req.entries) if e not in tun.entries]
    if unknown:
        raise OptimizerError(
            f"unknown entries {unknown}; the tunables file has {list(tun.entries)}"
        )
    module = load_module(prof.root, path)
    adapter = load_adapter(op.adapter)
    engine_name, engine = _engine(cuda)
    return _Target(
        campaign_type=op.campaign_type,
        adapter=adapter,
        schema=get_schema(adapter.schema),
        path=path,
        original=original,
        tunables=tun,
        module=module,
        shapes=_shapes(req, op.shapes),
        engine=engine,
        engine_name=engine_name,
        device="cuda" if cuda else "cpu",
    )


def _grids(req: SweepRequest, target: _Target, entries: dict[str, str]) -> dict[str, list]:
    """Each entry's configurations: its search space over ``req.knobs``, with the shipped
    value of each knob added where the space lacks it, so the shipped combination is always
    measured and scored beside the others."""
    tun = target.tunables
    grids = {}
    for e in entries:
        space = {k: list(v) for k, v in tun.knob_space(tun.entries[e]).items()}
        for k in req.knobs:
            shipped = tun.entries[e].knobs[k].value if k in tun.entries[e].knobs else None
            if k in space and shipped is not None and shipped not in space[k]:
                space[k].append(shipped)
        grids[e] = grid(space, list(req.knobs))
    for e, g in grids.items():
        if len(g) > req.max_configs:
            raise OptimizerError(f"{e}: {len(g)} configurations > --max-configs {req.max_configs}")
    return grids


def _record(req: SweepRequest, target: _Target, entries: dict, grids: dict) -> dict[str, Any]:
    """The sweep's JSON before any measurement."""
    import torch

    tun = target.tunables
    return {
        "op": req.op,
        "campaign_type": target.campaign_type,
        "entries": entries,
        "knobs": list(req.knobs),
        "shapes": [s.to_dict() for s in target.shapes],
        "engine": target.engine.describe(),
        "shipped": {e: {k: tun.entries[e].knobs[k].value for k in req.knobs} for e in entries},
        "planned": {e: len(g) for e, g in grids.items()},
        "measured": {e: [] for e in entries},
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "torch": torch.__version__,
    }


def _measure_entries(
    req: SweepRequest,
    target: _Target,
    grids: dict[str, list],
    out: dict[str, Any],
    save: Callable[[], None],
    say: Callable[[str], None],
) -> float:
    """Measure every configuration not measured yet, one entry at a time; returns the seconds
    spent. The tunables module is back at the shipped text afterwards, whatever happened."""
    t0, cases, measured = time.monotonic(), {}, out["measured"]
    try:
        for e, g in grids.items():
            done = [r["config"] for r in measured[e]]
            for i, cfg in enumerate(g):
                if cfg in done:
                    continue
                if time.monotonic() - t0 > req.budget_s:
                    out["cut"] = f"--budget-s {req.budget_s:g} spent"
                    break
                apply_text(target.module, set_knobs(target.original, e, cfg), str(target.path))
                c0 = time.monotonic()
                res = measure_config(
                    target.adapter,
                    target.shapes,
                    target.engine,
                    out["entries"][e],
                    target.device,
                    cases,
                )
                row = {"config": cfg, "seconds": round(time.monotonic() - c0, 2)}
                row.update({"shapes": res} if "error" not in res else res)
                measured[e].append(row)
                save()
                status = "ok" if "shapes" in row else "FAILED " + row["error"][:100]
                say(f"[{e} {i + 1}/{len(g)}] {cfg}: {status} ({row['seconds']} s)")
    finally:
        apply_text(target.module, target.original, str(target.path))
    return time.monotonic() - t0


def _finish(target: _Target, out: dict[str, Any], sweep_s: float, save: Callable[[], None]) -> int:
    """Score every combination, write the best (and ``best_text``) into the JSON, print the
    summary line; 0 when a finite best was found."""
    entries, measured = out["entries"], out["measured"]

    def score_fn(by_phase: dict[str, Any]) -> float:
        return score(
            target.adapter,
            target.schema,
            target.shapes,
            target.campaign_type,
            by_phase,
            target.engine_name,
        )

    combos = combine(entries, measured, score_fn)
    if not combos:
        out["best"] = None
        save()
        _say("no configuration measured on every entry")
        return 1
    best = combos[0]
    text = target.original
    for e, cfg in best["configs"].items():
        text = set_knobs(text, e, cfg)
    ship = next((c for c in combos if c["configs"] == out["shipped"]), None)
    out.update(
        best=best,
        best_text=text,
        shipped_aggregate=ship and ship["aggregate"],
        top=combos[:10],
        combinations=len(combos),
        sweep_s=round(sweep_s, 1),
    )
    save()
    unit = "GB/s" if target.campaign_type == "memory" else "TFLOPS"
    ship_s = f"{ship['aggregate']:.4g}" if ship else "not measured"
    print(
        f"{len(combos)} combinations scored from {sum(len(v) for v in measured.values())} "
        f"measured configurations in {sweep_s:.0f} s; best {best['configs']} at "
        f"{best['aggregate']:.4g} {unit}; shipped {ship_s}"
    )
    return 0 if math.isfinite(best["aggregate"]) else 1


def run_sweep(req: SweepRequest, say: Callable[[str], None] = _say) -> int:
    """Run the sweep ``req`` describes, writing its JSON to ``req.output`` after every
    configuration; returns 0 when a best combination was scored, 1 otherwise. Raises
    OptimizerError (bad entries, knobs or sizes) and the profile's and campaign's errors."""
    target = prepare(req)
    entries = parse_entries(list(req.entries), target.adapter.has_backward)
    grids = _grids(req, target, entries)
    out = _record(req, target, entries, grids)

    def save() -> None:
        req.output.write_text(json.dumps(out, indent=1))

    if req.resume and req.output.exists():
        kept = previous(json.loads(req.output.read_text()), out)
        for e, rows in kept.items():
            out["measured"][e].extend(rows)
        say(f"resumed: {sum(map(len, kept.values()))} configurations kept")
    sweep_s = _measure_entries(req, target, grids, out, save, say)
    return _finish(target, out, sweep_s, save)
