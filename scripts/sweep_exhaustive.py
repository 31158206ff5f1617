"""Exhaustive sweep of a tunables space, the yardstick of the search optimizer (issue 6).

Every combination of ``--knobs`` in each ``--entry`` of the op's tunables file is measured with
the campaign's own adapter and timing engine (``cuda_events`` with the harness's parameters,
``kernel_ratchet.campaign.create.GPU_TIMING``, at 5 samples; on the CPU the interpreter, a
smoke test of the script, not a measurement), correctness checked first on every shape. A
configuration is put in force by running the assignments of the rewritten tunables text (the
same text rewrite the search uses) in the already imported tunables module, so the kernels read
it at their next launch; the file on disk is never written, and one process measures every
configuration (no start-up and import per configuration, each shape's inputs and reference
made once).

Entries are swept one at a time, the others at their shipped values. ``ENTRY=PHASE`` says
which timed phase an entry governs: ``fwd``, ``bwd`` or ``both`` (the default). For an op whose
forward and backward use different entries (``gemm_bf16``: ``CONFIGS/bf16/large=fwd``,
``CONFIGS/bf16_bwd/large=bwd``) each phase's time depends on its own entry only, so every
combination of the entries' configurations is scored exactly from the per-entry sweeps: the
joint space is covered with the sum, not the product, of the measurements. The score is the
campaign's primary metric (``kernel_ratchet.scoring.metrics.aggregates``), computed from a CSV
written in the op's frozen schema.

    python scripts/sweep_exhaustive.py --op gemm_bf16 \\
        --knobs block_m,block_n,num_warps,num_stages \\
        --entry CONFIGS/bf16/large=fwd --entry CONFIGS/bf16_bwd/large=bwd \\
        --campaign .ratchet/campaigns/NAME -o $OUT/sweep_bf16.json

``--campaign`` measures that campaign's representative shapes (what its quick validations
measure); without it, ``--shapes N`` evenly spaced shapes of the op's set. The JSON is
rewritten after every configuration (a sweep cut short keeps what it measured) and holds every
measurement, the best combination, the shipped one, and ``best_text``: the tunables file with
the best combination written in (``scripts/compare_sweep.py`` measures it against a campaign's
result with the paired A/B). The best of many single measurements is biased upwards by noise
(the winner's curse); the paired comparison is the number to quote.
"""

from __future__ import annotations
import __future__

import argparse
import ast
import importlib
import itertools
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

import torch

from kernel_ratchet.campaign.create import CPU_TIMING, GPU_TIMING
from kernel_ratchet.harness.adapter import Shape, load_adapter, load_shapes
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.csv_schema import csv_text, get_schema, parse_csv_text
from kernel_ratchet.harness.runtime import ShapeResult, result_cells
from kernel_ratchet.harness.timing.engine import Timing
from kernel_ratchet.harness.timing.registry import make_engine
from kernel_ratchet.optimizers.tunables import parse_tunables, set_knobs
from kernel_ratchet.profile.loader import find_profile, load_profile
from kernel_ratchet.scoring.metrics import aggregates

PHASES = ("fwd", "bwd", "both")
#: Samples per timed phase on the GPU: the harness's ``GPU_TIMING`` with 5 samples of ~50 ms
#: instead of 10 (a sweep measures hundreds of configurations; the paired comparison of
#: ``scripts/compare_sweep.py`` is the number quoted, not a sweep's single measurement).
SWEEP_SAMPLES = 5


def grid(space: dict[str, list], knobs: list[str]) -> list[dict]:
    """Every combination of ``knobs`` over ``space`` (SystemExit naming a missing knob)."""
    missing = [k for k in knobs if k not in space]
    if missing:
        raise SystemExit(f"knobs {missing} are not in the entry's search space {sorted(space)}")
    return [
        dict(zip(knobs, vals, strict=True))
        for vals in itertools.product(*(space[k] for k in knobs))
    ]


def parse_entries(specs: list[str], has_backward: bool) -> dict[str, str]:
    """``ENTRY[=PHASE]`` -> {entry: phase}; each timed phase governed by exactly one entry."""
    out: dict[str, str] = {}
    for spec in specs:
        entry, _, phase = spec.partition("=")
        phase = phase or "both"
        if phase not in PHASES:
            raise SystemExit(f"--entry {spec}: the phase must be one of {PHASES}")
        out[entry] = phase
    for ph in ("fwd", "bwd") if has_backward else ("fwd",):
        owners = [e for e, p in out.items() if p in (ph, "both")]
        if len(owners) != 1:
            raise SystemExit(
                f"the {ph} phase must be governed by exactly one --entry (ENTRY="
                f"{ph} or ENTRY=both), got {owners or 'none'}"
            )
    return out


def module_name(root: Path, path: Path) -> str:
    rel = path.resolve().relative_to(root.resolve()).with_suffix("")
    return ".".join(rel.parts)


_DEFS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)


def apply_text(module, text: str, filename: str) -> None:
    """Put a tunables text in force in the imported ``module``: its top-level statements other
    than imports, classes and functions (the assignments a search edits) run in the module's
    namespace, so code that looks the configuration up through the module's globals sees it at
    the next call, and the values are instances of the module's own classes (re-running a class
    statement would make a new class that ``==`` and ``isinstance`` elsewhere do not know).
    Raises SystemExit when the text changes a class, a function or an import: a sweep varies
    values only."""
    tree = ast.parse(text, filename)
    source = Path(module.__file__).read_text()
    defs = [ast.dump(n) for n in tree.body if isinstance(n, _DEFS)]
    if defs != [ast.dump(n) for n in ast.parse(source).body if isinstance(n, _DEFS)]:
        raise SystemExit(
            f"{filename}: the text changes code, not only values; a sweep cannot "
            "put it in force in a running process"
        )
    tree.body = [n for n in tree.body if not isinstance(n, _DEFS)]
    flags = __future__.annotations.compiler_flag
    exec(compile(tree, filename, "exec", flags=flags, dont_inherit=True), module.__dict__)  # noqa: S102


def evenly(shapes: list[Shape], n: int) -> list[Shape]:
    if n >= len(shapes):
        return shapes
    step = (len(shapes) - 1) / max(n - 1, 1)
    return [shapes[round(i * step)] for i in range(n)]


def timing_dict(t: Timing | None) -> dict | None:
    if t is None:
        return None
    return {"median_ms": t.median_ms, "stddev_ms": t.stddev_ms, "samples_ms": list(t.samples_ms)}


def _timing(d: dict | None, engine: str) -> Timing | None:
    if d is None:
        return None
    return Timing(d["median_ms"], d["stddev_ms"], tuple(d["samples_ms"]), engine)


def _time_phases(adapter, case, engine, phase: str) -> dict:
    fwd = bwd = None
    if phase in ("fwd", "both"):
        fwd = timing_dict(engine.measure(lambda: adapter.forward(case)))
    if phase in ("bwd", "both") and adapter.has_backward:
        bwd = timing_dict(engine.measure(lambda: adapter.backward(case)))
    return {"fwd": fwd, "bwd": bwd}


def measure_config(adapter, shapes, engine, phase: str, device: str, cases: dict) -> dict:
    """{label: {"snr", "fwd", "bwd"}} of one configuration (correctness checked first on every
    shape, only ``phase`` timed), or {"error": why, "trace": ...}. ``cases`` caches each
    shape's inputs and reference across configurations (seed 0; the reference does not depend
    on the configuration, and ``outputs`` leaves the case unmodified)."""
    out = {}
    for shape in shapes:
        try:
            if shape.label not in cases:
                case = adapter.make_case(shape, 0, device)
                cases[shape.label] = (case, adapter.reference(case))
            case, ref = cases[shape.label]
            got = adapter.outputs(case)
            check = check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})
            del got
            if not check.passed:
                return {"error": f"{shape.label}: check failed: {check.reason}"}
            out[shape.label] = {"snr": check.snr, **_time_phases(adapter, case, engine, phase)}
        except Exception as exc:  # noqa: BLE001 - a configuration that fails is a result
            tb = traceback.format_exc(limit=3)
            return {"error": f"{shape.label}: {type(exc).__name__}: {exc}"[:300], "trace": tb}
    return out


def score(adapter, schema, shapes, campaign_type: str, parts: dict[str, dict], engine: str):
    """Primary aggregate of one combination: ``parts`` maps each phase to its measured shapes."""
    rows = []
    for s in shapes:
        fwd = _timing(parts["fwd"][s.label]["fwd"], engine)
        bwd = _timing(parts["bwd"][s.label]["bwd"], engine) if "bwd" in parts else None
        snr = parts["fwd"][s.label]["snr"]
        rows.append(result_cells(schema, adapter, ShapeResult(s, True, "", snr, fwd, bwd)))
    return aggregates(parse_csv_text(csv_text(schema, rows)), campaign_type).primary_avg


def combine(entries: dict[str, str], measured: dict[str, list[dict]], score_fn) -> list[dict]:
    """Every combination of the entries' measured configurations, best first."""
    ok = {e: [r for r in rows if "shapes" in r] for e, rows in measured.items()}
    combos = []
    for picks in itertools.product(*(ok[e] for e in entries)):
        by_phase = {}
        for e, r in zip(entries, picks, strict=True):
            for ph in ("fwd", "bwd") if entries[e] == "both" else (entries[e],):
                by_phase[ph] = r["shapes"]
        combos.append(
            {
                "configs": {e: r["config"] for e, r in zip(entries, picks, strict=True)},
                "aggregate": score_fn(by_phase),
            }
        )
    combos.sort(key=lambda c: -c["aggregate"])
    return combos


def previous(old: dict, new: dict) -> dict[str, list[dict]]:
    """The measured rows of an earlier run of the same sweep (same op, entries, knobs, shapes);
    SystemExit when it was another sweep."""
    same = ("op", "entries", "knobs", "shapes")
    differ = [k for k in same if old.get(k) != new.get(k)]
    if differ:
        raise SystemExit(f"--resume: the existing output is another sweep (differs in {differ})")
    return {e: list(rows) for e, rows in old.get("measured", {}).items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", required=True)
    p.add_argument(
        "--entry",
        action="append",
        required=True,
        help="ENTRY[=fwd|bwd|both], e.g. CONFIGS/bf16/large=fwd",
    )
    p.add_argument("--knobs", required=True, help="comma-separated knobs swept jointly")
    p.add_argument("--campaign", help="campaign dir: sweep its representative shapes")
    p.add_argument("--shapes", type=int, default=5, help="without --campaign: N shapes of the set")
    p.add_argument("--profile", default=None)
    p.add_argument("--max-configs", type=int, default=200, help="per entry")
    p.add_argument(
        "--budget-s",
        type=float,
        default=math.inf,
        help="measure no configuration past this many seconds, then score what was measured",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the measured configurations of an existing --output of the same "
        "sweep and measure only the others",
    )
    p.add_argument("-o", "--output", default="sweep.json")
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if not cuda:  # before the op's kernels are imported
        os.environ.setdefault("TRITON_INTERPRET", "1")
    prof = load_profile(args.profile or find_profile(Path.cwd()))
    op = prof.op(args.op)
    if not op.tunables:
        raise SystemExit(f"ops.{args.op} declares no tunables file")
    sys.path.insert(0, str(prof.root))
    path = prof.root / op.tunables
    original = path.read_text()
    tun = parse_tunables(original)
    unknown = [e.partition("=")[0] for e in args.entry if e.partition("=")[0] not in tun.entries]
    if unknown:
        raise SystemExit(f"unknown entries {unknown}; the tunables file has {list(tun.entries)}")
    knobs = args.knobs.split(",")
    adapter = load_adapter(op.adapter)
    schema = get_schema(adapter.schema)
    entries = parse_entries(args.entry, adapter.has_backward)
    grids = {e: grid(tun.knob_space(tun.entries[e]), knobs) for e in entries}
    for e, g in grids.items():
        if len(g) > args.max_configs:
            raise SystemExit(f"{e}: {len(g)} configurations > --max-configs {args.max_configs}")
    if args.campaign:
        from kernel_ratchet.campaign.manifest import load_manifest

        manifest = load_manifest(Path(args.campaign))
        shapes = [Shape.from_dict(d) for d in manifest.representative_shape_dicts]
    else:
        shapes = evenly(load_shapes(op.shapes), args.shapes)
    engine_name = "cuda_events" if cuda else "perf_counter"
    params = {**GPU_TIMING, "samples": SWEEP_SAMPLES} if cuda else dict(CPU_TIMING)
    engine = make_engine(engine_name, {**params, "device": device} if cuda else params)
    module = importlib.import_module(module_name(prof.root, path))
    shipped = {e: {k: tun.entries[e].knobs[k].value for k in knobs} for e in entries}
    measured: dict[str, list[dict]] = {e: [] for e in entries}
    out = {
        "op": args.op,
        "campaign_type": op.campaign_type,
        "entries": entries,
        "knobs": knobs,
        "shapes": [s.to_dict() for s in shapes],
        "engine": engine.describe(),
        "shipped": shipped,
        "planned": {e: len(g) for e, g in grids.items()},
        "measured": measured,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "torch": torch.__version__,
    }

    def save() -> None:
        Path(args.output).write_text(json.dumps(out, indent=1))

    if args.resume and Path(args.output).exists():
        kept = previous(json.loads(Path(args.output).read_text()), out)
        for e, rows in kept.items():
            measured[e].extend(rows)
        print(f"resumed: {sum(map(len, kept.values()))} configurations kept", file=sys.stderr)
    t0, cases = time.monotonic(), {}
    try:
        for e, g in grids.items():
            done = [r["config"] for r in measured[e]]
            for i, cfg in enumerate(g):
                if cfg in done:
                    continue
                if time.monotonic() - t0 > args.budget_s:
                    out["cut"] = f"--budget-s {args.budget_s:g} spent"
                    break
                apply_text(module, set_knobs(original, e, cfg), str(path))
                c0 = time.monotonic()
                res = measure_config(adapter, shapes, engine, entries[e], device, cases)
                row = {"config": cfg, "seconds": round(time.monotonic() - c0, 2)}
                row.update({"shapes": res} if "error" not in res else res)
                measured[e].append(row)
                save()
                print(
                    f"[{e} {i + 1}/{len(g)}] {cfg}: "
                    f"{'ok' if 'shapes' in row else 'FAILED ' + row['error'][:100]} "
                    f"({row['seconds']} s)",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        apply_text(module, original, str(path))
    sweep_s = time.monotonic() - t0

    def score_fn(by_phase):
        return score(adapter, schema, shapes, op.campaign_type, by_phase, engine_name)

    combos = combine(entries, measured, score_fn)
    if not combos:
        out["best"] = None
        save()
        print("no configuration measured on every entry", file=sys.stderr)
        return 1
    best = combos[0]
    text = original
    for e, cfg in best["configs"].items():
        text = set_knobs(text, e, cfg)
    ship = next((c for c in combos if c["configs"] == shipped), None)
    out.update(
        best=best,
        best_text=text,
        shipped_aggregate=ship and ship["aggregate"],
        top=combos[:10],
        combinations=len(combos),
        sweep_s=round(sweep_s, 1),
    )
    save()
    unit = "GB/s" if op.campaign_type == "memory" else "TFLOPS"
    ship_s = f"{ship['aggregate']:.4g}" if ship else "not measured"
    print(
        f"{len(combos)} combinations scored from {sum(len(v) for v in measured.values())} "
        f"measured configurations in {sweep_s:.0f} s; best {best['configs']} at "
        f"{best['aggregate']:.4g} {unit}; shipped {ship_s}"
    )
    return 0 if math.isfinite(best["aggregate"]) else 1


if __name__ == "__main__":
    sys.exit(main())
