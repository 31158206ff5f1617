"""Exhaustive sweep of a tunables space, measured with the campaign's own harness (issue 6).

The yardstick for the search optimizer: every combination of the chosen knobs of one or more
entries of the op's tunables file is written into the file (the same text rewrite the search
uses), the quick harness runs on the given shapes in a fresh process, and the aggregate of the
primary metric is recorded. The file is restored at the end, whatever happens. Compare a
campaign's final full-validation aggregate with the best row here ("≥ 97% of the best").

    python scripts/sweep_exhaustive.py --op gemm_bf16 --entry CONFIGS/bf16/large \\
        --knobs block_m,block_n,num_stages --shapes 4 -o $OUT/sweep_bf16.json

The JSON is rewritten after every configuration. The file is edited in place: run one sweep
per copy of the tree, never beside jobs that import the same kernels.

Timing: the harness with a light engine (cuda_events, 5 samples of ~50 ms) on a GPU; on the CPU
the interpreter (a smoke test of the script, not a measurement).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from kernel_ratchet.harness.csv_schema import read_csv
from kernel_ratchet.optimizers.tunables import parse_tunables, set_knobs
from kernel_ratchet.profile.loader import find_profile, load_profile
from kernel_ratchet.scoring.metrics import aggregates

RUNNER = """
import os, sys, json, torch
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, {root!r})
from kernel_ratchet.harness.runtime import main
args = json.loads({args!r})
sys.exit(main(sys.argv[1:], **args))
"""


def _grid(space: dict[str, list], knobs: list[str]) -> list[dict]:
    missing = [k for k in knobs if k not in space]
    if missing:
        raise SystemExit(f"knobs {missing} are not in the entry's search space {sorted(space)}")
    return [dict(zip(knobs, vals, strict=True)) for vals in itertools.product(
        *(space[k] for k in knobs))]  # fmt: skip


def _measure(root: Path, op, shapes: list[dict], csv: Path) -> tuple[float | None, str]:
    cuda = torch.cuda.is_available()
    engine = "cuda_events" if cuda else "perf_counter"
    params = ({"samples": 5, "sample_ms": 50.0, "graph": "off"} if cuda
              else {"warmup": 0, "samples": 2, "min_sample_ms": 0.0})  # fmt: skip
    args = {"adapter": op.adapter, "schema": op.schema_name, "shapes": shapes,
            "target_shapes": shapes, "engine": engine, "engine_params": params}  # fmt: skip
    code = RUNNER.format(root=str(root), args=json.dumps(args))
    p = subprocess.run([sys.executable, "-c", code, "--summary-csv", str(csv)], cwd=root,
                       capture_output=True, text=True, timeout=1800)  # fmt: skip
    if p.returncode != 0 or not csv.exists():
        return None, (p.stderr or p.stdout)[-400:]
    table = read_csv(csv)
    if any(not r.passed for r in table.rows):
        return None, "a shape failed its correctness check"
    return aggregates(table, op.campaign_type).primary_avg, ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", required=True)
    p.add_argument("--entry", action="append", required=True, help="e.g. CONFIGS/bf16/large")
    p.add_argument("--knobs", required=True, help="comma-separated knobs to sweep jointly")
    p.add_argument("--shapes", type=int, default=4, help="first N shapes of the op's set")
    p.add_argument("--profile", default=None)
    p.add_argument("--max-configs", type=int, default=200)
    p.add_argument("-o", "--output", default="sweep.json")
    args = p.parse_args()
    prof = load_profile(args.profile or find_profile(Path.cwd()))
    op = prof.op(args.op)
    if not op.tunables:
        raise SystemExit(f"ops.{args.op} declares no tunables file")
    path = prof.root / op.tunables
    original = path.read_text()
    tun = parse_tunables(original)
    knobs = args.knobs.split(",")
    unknown = [e for e in args.entry if e not in tun.entries]
    if unknown:
        raise SystemExit(f"unknown entries {unknown}; the tunables file has {list(tun.entries)}")
    grid = _grid(tun.knob_space(tun.entries[args.entry[0]]), knobs)
    if len(grid) > args.max_configs:
        raise SystemExit(f"{len(grid)} configurations > --max-configs {args.max_configs}")
    sys.path.insert(0, str(prof.root))
    from kernel_ratchet.harness.adapter import load_shapes

    shapes = [s.to_dict() for s in load_shapes(op.shapes)[: args.shapes]]
    rows: list[dict] = []

    def save() -> dict | None:  # after every configuration: a run cut short keeps its rows
        ok = [r for r in rows if r["aggregate"]]
        best = max(ok, key=lambda r: r["aggregate"]) if ok else None
        out = {"op": args.op, "entries": args.entry, "knobs": knobs, "shapes": shapes,
               "rows": rows, "planned": len(grid), "best": best}  # fmt: skip
        Path(args.output).write_text(json.dumps(out, indent=2))
        return best

    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, cfg in enumerate(grid):
                text = original
                for entry in args.entry:  # the same values in every named entry
                    text = set_knobs(text, entry, cfg)
                path.write_text(text)
                agg, err = _measure(prof.root, op, shapes, Path(tmp) / f"c{i}.csv")
                rows.append({"config": cfg, "aggregate": agg, "error": err})
                save()
                print(f"[{i + 1}/{len(grid)}] {cfg}: {agg if agg else 'FAILED ' + err[:80]}",
                      file=sys.stderr, flush=True)  # fmt: skip
    finally:
        path.write_text(original)
    best = save()
    ok = [r for r in rows if r["aggregate"]]
    unit = "GB/s" if op.campaign_type == "memory" else "TFLOPS"
    print(
        f"{len(ok)}/{len(rows)} configurations measured; best {best['config'] if best else '-'}"
        f" at {best['aggregate'] if best else float('nan'):.4g} {unit} ({op.primary_metric})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
