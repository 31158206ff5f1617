"""How noisy is one paired round on this GPU, and which timing variant is cheapest per unit of
precision?

For each variant of the paired timing parameters (merged over the campaigns'), runs one A/A
paired measurement of the bundled bf16 GEMM with the real worker processes, a fixed number of
rounds on 3 shapes, and reports per variant: the spread of one round's log speed ratio, the
advantage of the side timed first, seconds per round, and the cost (spread² x seconds per
round; see :mod:`kernel_ratchet.scoring.noise`). Writes a JSON whose ``chosen`` entry
``python -m kernel_ratchet.method.ab_trials --engine-params-from`` takes::

    python -m kernel_ratchet.method.noise_probe --rounds 24 -o probe.json --logs probe_logs

Variants run in the order given (the first is the current default, kept unless another is
cheaper with 95% confidence); a variant that would start past ``--budget-s`` is skipped. The
JSON is written after each variant to ``OUTPUT.partial``, which becomes ``OUTPUT`` at the end
(so whatever waits for ``OUTPUT`` starts on the final choice). ``--cpu`` runs a tiny
interpreter version (it exercises the probe; the numbers say nothing about a GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernel_ratchet.kernels.benchmarking import output_file
from kernel_ratchet.method import planted
from kernel_ratchet.scoring.noise import RoundNoise, choose, round_noise
from kernel_ratchet.scoring.paired_looks import PairedLooks

SHAPES = [(4096, 4096, 4096), (4096, 14336, 4096), (2048, 6144, 4096)]
VARIANTS = {
    "current": {},
    "warmup 250 ms": {"warmup_ms": 250.0},
    "4 samples": {"samples": 4},
    "100 ms samples": {"sample_ms": 100.0},
    "A B B A, 25 ms samples": {"sample_ms": 25.0, "alternations": 2},
    "4 turns, 12.5 ms samples, warm-up 10 ms": {
        "sample_ms": 12.5,
        "warmup_ms": 10.0,
        "alternations": 4,
    },
}


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _measure(name: str, i: int, overrides: dict, rounds: int, cuda: bool, logs: Path, shapes: list):
    """One variant's A/A run and its noise (None with the reason printed when it failed).
    ``alternations`` in a variant is the A/B's turns per side (not a timing parameter)."""
    from kernel_ratchet.campaign.rounds.paired import paired_settings
    from kernel_ratchet.harness.ab import run_paired

    params = {**paired_settings(cuda)[0], **overrides}
    turns = int(params.pop("alternations", 1))
    spec = planted.worker_spec(planted.base_adapter(cuda), cuda, params)
    run = run_paired(
        spec,
        spec,
        planted.shapes(shapes),
        phases=["fwd"],
        seed=1000 + i,
        rule=PairedLooks(),
        k_start=rounds,
        k_max=rounds,
        rng_seed=i,
        log_dir=logs / f"variant-{i}",
        campaign_type="compute_fwd",
        alternations=turns,
    )
    try:
        recorded = {**spec.engine_params, **({"alternations": turns} if turns > 1 else {})}
        return round_noise(name, recorded, run)
    except ValueError as exc:
        _say(f"{name}: {exc}")
        return None


def _line(rep: RoundNoise) -> str:
    return (
        f"{rep.name}: spread {rep.spread:.2%} (per shape "
        f"{', '.join(f'{v:.2%}' for v in rep.per_shape.values())}), first-timed "
        f"advantage {rep.order_effect:+.2%}, {rep.s_per_round:.2f} s/round, "
        f"cost {rep.cost:.3g}"
    )


def probe(
    variants: dict[str, dict[str, Any]],
    rounds: int,
    output: Path,
    *,
    cuda: bool,
    budget_s: float = 300.0,
    logs: Path | None = None,
    shapes: list[tuple[int, int, int]] | None = None,
) -> list[RoundNoise]:
    """Measure ``variants`` in order (none started past ``budget_s``), writing the JSON to
    ``OUTPUT.partial`` after each and moving it to ``output`` at the end; returns the reports
    (empty when no variant was measured, and then nothing is written to ``output``).
    ``shapes``: GEMM (M, N, K) to measure (default :data:`SHAPES`, the interpreter's own on
    the CPU)."""
    t_start, reports, skipped = time.monotonic(), [], []
    partial = Path(f"{output}.partial")
    n_shapes = shapes or (SHAPES if cuda else planted.CPU_SHAPES)
    with tempfile.TemporaryDirectory() as tmp_dir:
        for i, (name, params) in enumerate(variants.items()):
            if reports and time.monotonic() - t_start > budget_s:
                skipped.append(name)
                continue
            rep = _measure(name, i, params, rounds, cuda, Path(logs or tmp_dir), n_shapes)
            if rep is None:
                skipped.append(name)
                continue
            reports.append(rep)
            chosen, why = choose(reports)
            out = {
                "rounds": rounds,
                "shapes": [s.label for s in planted.shapes(n_shapes)],
                "variants": [r.to_dict() for r in reports],
                "skipped": skipped,
                "chosen": {"name": chosen.name, "params": dict(variants[chosen.name]), "why": why},
            }
            partial.write_text(json.dumps(out, indent=2))
            _say(_line(rep))
    if reports:
        partial.replace(output)
    return reports


def table(reports: list[RoundNoise]) -> str:
    """The markdown table of the variants, then the choice and its reason."""
    lines = [
        "| variant | spread of one round | first-timed advantage | s/round | cost |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.name} | {r.spread:.2%} | {r.order_effect:+.2%} | {r.s_per_round:.2f} "
        f"| {r.cost:.3g} |"
        for r in reports
    ]
    return "\n".join(lines) + f"\n\nchosen: {choose(reports)[1]}"


def main(argv: list[str] | None = None) -> int:
    """``python -m kernel_ratchet.method.noise_probe``: probe the variants, print the table."""
    import torch

    p = argparse.ArgumentParser(
        prog="python -m kernel_ratchet.method.noise_probe", description=__doc__.splitlines()[0]
    )
    p.add_argument("--rounds", type=int, default=24)
    p.add_argument("--variants", help='JSON {"name": {params}, ...} (default: the built-in ones)')
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--shapes", help="GEMM shapes MxNxK,... (default: the built-in three)")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("-o", "--output", default="noise_probe.json", type=output_file)
    p.add_argument("--logs", help="keep worker logs and timings.jsonl here")
    args = p.parse_args(argv)
    variants = json.loads(args.variants) if args.variants else VARIANTS
    cuda = torch.cuda.is_available() and not args.cpu
    logs = Path(args.logs) if args.logs else None
    shapes = None
    if args.shapes:
        try:
            shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",")]
        except ValueError:
            p.error(f"--shapes wants MxNxK,... (e.g. 8192x4096x4096), got {args.shapes!r}")
        if any(len(s) != 3 for s in shapes):
            p.error(f"--shapes wants three sizes per shape, got {args.shapes!r}")
    reports = probe(
        variants,
        args.rounds,
        Path(args.output),
        cuda=cuda,
        budget_s=args.budget_s,
        logs=logs,
        shapes=shapes,
    )
    if not reports:
        _say("no variant measured")
        return 1
    print(table(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
