"""The FP8 blockwise Linear step with its weight prepared once per optimizer step, next to the
step that quantizes the weight in every call and to the bf16 cuBLAS step.

    python -m kernel_ratchet.kernels.gemm.prepared_bench [--shapes model] [--limit 17]
        [--min-run-time 0.03] [--rounds 3] [-o table.md]

Per shape: fresh inputs (seed 0); the FP8 path itself (the dispatch off), run once each way and
checked bit for bit equal (out, da, db); then three steps timed in interleaved rounds
(:func:`.benchmarking.timed_rounds`: medians over the rounds, each round one
``blocked_autorange`` of every step, starting one later than the round before): forward +
backward quantizing the weight, the same with the weight prepared by
:func:`.prepared_weight.prepare_weight`, and cuBLAS bf16 (``a @ bᵀ``, ``dout @ b``,
``doutᵀ @ a``). TFLOP/s are 6·M·N·K over the step's median. The preparation itself is not
timed: it runs once per optimizer step, whatever the number of micro-batches.
"""

from __future__ import annotations

import argparse
import sys

import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.kernels.benchmarking import output_file, timed_rounds
from kernel_ratchet.kernels.gemm.adapter import make_linear_inputs
from kernel_ratchet.kernels.gemm.bench import SHAPE_SETS, geomean
from kernel_ratchet.kernels.gemm.fp8 import Fp8Recipe, gemm_fp8_backward, gemm_fp8_forward
from kernel_ratchet.kernels.gemm.prepared_weight import prepare_weight
from kernel_ratchet.kernels.gemm.vendor import bf16_vendor

HEADER = (
    "| shape | M | N | K | FP8 step TFLOPS | FP8 step, weight prepared | gain "
    "| bf16 cuBLAS step | FP8 / cuBLAS | prepared / cuBLAS | check |"
)
RECIPE = Fp8Recipe("blockwise", dispatch=False)


def measure(shape: Shape, device: str, min_run_time: float, rounds: int) -> tuple[str, list]:
    """One table row and its ratios (gain, FP8 / cuBLAS, prepared / cuBLAS; empty when the
    two FP8 steps differ in a bit)."""
    case = make_linear_inputs(shape, 0, device, torch.bfloat16)
    a, b, d = case.a, case.b, case.dout
    qb = prepare_weight(b).for_weight(b)

    def step(prepared: bool):
        out, state = gemm_fp8_forward(a, b, RECIPE, qb if prepared else None)
        return (out, *gemm_fp8_backward(d, state, RECIPE))

    same = all(torch.equal(x, y) for x, y in zip(step(False), step(True), strict=True))
    fwd, bwd = bf16_vendor(case)
    fns = {
        "fp8": lambda: step(False),
        "prepared": lambda: step(True),
        "cublas": lambda: (fwd(), bwd()),
    }
    t = {k: v.ms for k, v in timed_rounds(fns, min_run_time, rounds).items()}
    flops = 6.0 * shape.M * shape.N * shape.K
    tf = {k: flops / (ms * 1e9) for k, ms in t.items()}
    ratios = [t["fp8"] / t["prepared"], t["cublas"] / t["fp8"], t["cublas"] / t["prepared"]]
    row = (
        f"| {shape.label} | {shape.M} | {shape.N} | {shape.K} | {tf['fp8']:.4g} "
        f"| {tf['prepared']:.4g} | {ratios[0]:.3g} | {tf['cublas']:.4g} | {ratios[1]:.3g} "
        f"| {ratios[2]:.3g} | {'same bits' if same else 'DIFFERENT'} |"
    )
    return row, ratios if same else []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.kernels.gemm.prepared_bench")
    p.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="model")
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes")
    p.add_argument("--min-run-time", type=float, default=0.03, help="seconds per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("-o", "--output", type=output_file, default=None, help="markdown table")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    kept = []
    for shape in SHAPE_SETS[args.shapes]()[: args.limit or None]:
        row, ratios = measure(shape, device, args.min_run_time, args.rounds)
        print(row, flush=True)
        lines.append(row)
        kept.append(ratios)
        if device == "cuda":
            torch.cuda.empty_cache()
    same = [r for r in kept if r]
    names = ("prepared / per-call FP8 step", "FP8 / cuBLAS bf16 step", "prepared / cuBLAS")
    summary = f"{len(same)}/{len(kept)} shapes with the same bits both ways; geomean " + ", ".join(
        f"{n} {geomean([r[i] for r in same]):.3f}" for i, n in enumerate(names)
    )
    lines += ["", summary]
    print(summary)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0 if len(same) == len(kept) else 1


if __name__ == "__main__":
    sys.exit(main())
