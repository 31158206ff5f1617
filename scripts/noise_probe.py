"""How noisy is one paired round on this GPU, and which timing variant is cheapest per unit of
precision? (issue 5: the A/A CIs of 2026-11-30 were ~5x wider than the issue's own A/A)

For each variant of the paired timing parameters (merged over the campaigns'
``GPU_PAIRED_TIMING``), runs one A/A paired measurement of the bundled bf16 GEMM with the real
worker processes, a fixed number of rounds on 3 shapes, and reports per variant: the spread of
one round's log speed ratio, the advantage of the side timed first, seconds per round, and the
cost (spread² x seconds per round; see :mod:`kernel_ratchet.scoring.noise`). Writes a JSON whose
``chosen`` entry ``scripts/ab_validation.py --engine-params-from`` takes. Run on the H200:

    python scripts/noise_probe.py --rounds 24 -o $OUT/probe.json --logs $OUT/probe_logs

Variants run in the order given (the first is the current default, kept unless another is
cheaper with 95% confidence); a variant that would start past ``--budget-s`` is skipped. The
JSON is written after each variant to ``OUTPUT.partial``, which becomes ``OUTPUT`` at the end
(so a job waiting for ``OUTPUT`` starts on the final choice). ``--cpu`` runs a tiny
interpreter version (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from ab_validation import CPU_SHAPES, _spec

from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.scoring.noise import choose, round_noise
from kernel_ratchet.scoring.paired_looks import PairedLooks

SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096), (2048, 6144, 4096)]
VARIANTS = {
    "current": {},
    "warmup 250 ms": {"warmup_ms": 250.0},
    "4 samples": {"samples": 4},
    "100 ms samples": {"sample_ms": 100.0},
}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=24)
    p.add_argument("--variants", help='JSON {"name": {params}, ...} (default: the built-in four)')
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--cpu", action="store_true")
    p.add_argument("-o", "--output", default="noise_probe.json")
    p.add_argument("--logs", help="keep worker logs and timings.jsonl here")
    args = p.parse_args()
    cuda = torch.cuda.is_available() and not args.cpu
    dims = SHAPES if cuda else CPU_SHAPES
    shapes = [Shape(f"m{m}_n{n}_k{k}", m, n, k) for m, n, k in dims]
    base = f"kernel_ratchet.kernels.gemm.adapter:Gemm{'Bf16' if cuda else 'Fp16'}"
    variants = json.loads(args.variants) if args.variants else VARIANTS
    t_start, reports, skipped = time.monotonic(), [], []
    partial = Path(args.output + ".partial")  # the output appears only once every variant ran
    with tempfile.TemporaryDirectory() as tmp_dir:
        logs = Path(args.logs or tmp_dir)
        for i, (name, params) in enumerate(variants.items()):
            if reports and time.monotonic() - t_start > args.budget_s:
                skipped.append(name)
                continue
            spec = _spec(base, cuda, params)
            run = run_paired(
                spec,
                spec,
                shapes,
                phases=["fwd"],
                seed=1000 + i,
                rule=PairedLooks(),
                k_start=args.rounds,
                k_max=args.rounds,
                rng_seed=i,
                log_dir=logs / f"variant-{i}",
                campaign_type="compute_fwd",
            )
            try:
                rep = round_noise(name, spec.engine_params, run)
            except ValueError as exc:
                print(f"{name}: {exc}", file=sys.stderr, flush=True)
                skipped.append(name)
                continue
            reports.append(rep)
            chosen, why = choose(reports)
            out = {
                "rounds": args.rounds,
                "shapes": [s.label for s in shapes],
                "variants": [r.to_dict() for r in reports],
                "skipped": skipped,
                "chosen": {"name": chosen.name, "params": dict(variants[chosen.name]), "why": why},
            }
            partial.write_text(json.dumps(out, indent=2))
            print(
                f"{name}: spread {rep.spread:.2%} (per shape "
                f"{', '.join(f'{v:.2%}' for v in rep.per_shape.values())}), first-timed "
                f"advantage {rep.order_effect:+.2%}, {rep.s_per_round:.2f} s/round, "
                f"cost {rep.cost:.3g}",
                file=sys.stderr,
                flush=True,
            )
    if not reports:
        print("no variant measured", file=sys.stderr)
        return 1
    partial.replace(args.output)
    print("| variant | spread of one round | first-timed advantage | s/round | cost |")
    print("|---|---:|---:|---:|---:|")
    for r in reports:
        print(
            f"| {r.name} | {r.spread:.2%} | {r.order_effect:+.2%} | {r.s_per_round:.2f} "
            f"| {r.cost:.3g} |"
        )
    print(f"\nchosen: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
