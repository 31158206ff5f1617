"""Full benchmark of the grouped GEMMs against PyTorch baselines (CUDA GPU).

    python -m kernel_ratchet.kernels.grouped_gemm.bench --dtype bf16 \\
        --shapes kernel_ratchet.kernels.grouped_gemm.shapes:moe_target --csv grouped_bf16.csv

Per shape: our forward and backward (torch.utils.benchmark.Timer, median of blocked runs,
stddev over blocks), the forward of a per-group loop of torch.mm and of torch._grouped_mm
(where the installed torch has it; bf16 operands for both dtypes), and a dense cuBLAS bf16 GEMM
with the same total FLOPs ([M, K] @ [K, N], M = routed rows) forward and backward (two GEMMs).
Correctness: SNR (dB) against the fp32 reference, computed on the GPU.

CSV: the frozen GEMM columns (csv_schema.GEMM_COLUMNS) first, then vendor columns
(``--no-vendor``: the frozen columns only, which is what a campaign's CSV reader accepts).

``--step`` prints the side-by-side table of :mod:`.step_bench` instead: bf16 forward and
fwd+bwd step and the FP8 blockwise step against ``torch._grouped_mm``, interleaved medians::

    python -m kernel_ratchet.kernels.grouped_gemm.bench --step --shapes moe_target,moe_offlist \\
        [-o table.md] [--rounds 5] [--dry-run]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys

import torch

from kernel_ratchet.harness.adapter import Shape, load_shapes
from kernel_ratchet.harness.csv_schema import GEMM_COLUMNS, format_cell
from kernel_ratchet.kernels.benchmarking import output_file, snr_gpu, tflops, time_ms
from kernel_ratchet.kernels.grouped_gemm import step_bench
from kernel_ratchet.kernels.grouped_gemm.adapter import (
    GroupedGemmBf16Adapter,
    GroupedGemmFp8BlockwiseAdapter,
)

VENDOR_COLUMNS = (
    "loop TFLOPS",
    "torch._grouped_mm TFLOPS",
    "dense TFLOPS",
    "dense bwd TFLOPS",
    "fwd / dense",
)


def bench_shape(
    adapter, shape: Shape, mrt: float, backward: bool, check: bool, device: str = "cuda"
) -> list:
    """One CSV row (frozen GEMM columns, then VENDOR_COLUMNS) for ``shape``."""
    case = adapter.make_case(shape, 0, device)
    f_fwd, f_bwd = adapter.flops(shape)
    snr = {"out": math.nan, "da": math.nan, "db": math.nan}
    passed = True
    if check:
        got, ref = adapter.outputs(case), adapter.reference(case)
        snr = {k: snr_gpu(got[k], ref[k]) for k in ref}
        passed = all(v >= adapter.threshold(k) for k, v in snr.items())
        del got, ref
    fwd_ms, fwd_sd = time_ms(lambda: adapter.forward(case), mrt)
    bwd_ms = bwd_sd = math.nan
    if backward:
        adapter.forward(case)
        bwd_ms, bwd_sd = time_ms(lambda: adapter.backward(case), mrt)
    # Baselines: bf16 operands, host-known offsets (an advantage the kernel does not take).
    x = case.x.detach().to(torch.bfloat16)
    w = case.w.detach().to(torch.bfloat16)
    lens = [int(v) for v in case.group_lens.cpu().tolist()]
    offs = [0]
    for n in lens:
        offs.append(offs[-1] + n)
    out = torch.empty((shape.M, shape.N), dtype=torch.bfloat16, device=device)

    def loop() -> None:
        for g in range(shape.B):
            if offs[g + 1] > offs[g]:
                torch.mm(x[offs[g] : offs[g + 1]], w[g].t(), out=out[offs[g] : offs[g + 1]])

    loop_ms, _ = time_ms(loop, mrt)
    gmm_ms = math.nan
    if hasattr(torch, "_grouped_mm"):
        off_t = torch.tensor(offs[1:], dtype=torch.int32, device=device)
        try:
            gmm_ms, _ = time_ms(lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=off_t), mrt)
        except (RuntimeError, TypeError) as exc:
            print(f"# {shape.label}: torch._grouped_mm failed: {exc}", file=sys.stderr)
    a = torch.randn(shape.M, shape.K, device=device, dtype=torch.bfloat16)
    b = torch.randn(shape.K, shape.N, device=device, dtype=torch.bfloat16)
    c = torch.randn(shape.M, shape.N, device=device, dtype=torch.bfloat16)
    dense_ms, _ = time_ms(lambda: torch.mm(a, b), mrt)
    dense_bwd_ms, _ = time_ms(lambda: (torch.mm(c, b.t()), torch.mm(a.t(), c)), mrt)
    fwd = tflops(f_fwd, fwd_ms)
    bwd = tflops(f_bwd, bwd_ms)
    dense = tflops(f_fwd, dense_ms)
    return [
        shape.label,
        shape.B,
        shape.M,
        shape.N,
        shape.K,
        "PASS" if passed else "FAIL",
        fwd,
        fwd * fwd_sd / fwd_ms,
        bwd,
        bwd * bwd_sd / bwd_ms if backward else math.nan,
        fwd_ms,
        bwd_ms,
        snr["out"],
        snr["da"],
        snr["db"],
        tflops(f_fwd, loop_ms),
        tflops(f_fwd, gmm_ms),
        dense,
        tflops(f_bwd, dense_bwd_ms),
        fwd / dense,
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16")
    p.add_argument(
        "--shapes",
        default=None,
        help="module:attr (default: moe_target); with --step also set names, comma-separated",
    )
    p.add_argument(
        "--csv",
        default=None,
        type=output_file,
        help="write the table here (frozen + vendor columns)",
    )
    p.add_argument("--min-run-time", type=float, default=0.2, help="seconds per measurement")
    p.add_argument("--no-backward", action="store_true")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--only", default="", help="comma-separated label substrings to keep")
    p.add_argument(
        "--no-vendor", action="store_true", help="frozen columns only (what a campaign parses)"
    )
    p.add_argument("--step", action="store_true", help="the table against torch._grouped_mm")
    p.add_argument(
        "-o",
        "--output",
        default=None,
        type=output_file,
        help="--step: write the markdown table here",
    )
    p.add_argument("--rounds", type=int, default=5, help="--step: interleaved timing rounds")
    p.add_argument("--dry-run", action="store_true", help="--step on the CPU interpreter")
    p.add_argument(
        "--prepared-weight",
        action="store_true",
        help="--step: also the FP8 step with its weight quantized once beforehand (gradient "
        "accumulation: prepare_weight), next to torch's bf16 step",
    )
    p.add_argument(
        "--flush-l2",
        action="store_true",
        help="--step: time each call alone after an L2 flush (triton do_bench) instead of "
        "back to back",
    )
    p.add_argument(
        "--fill-dispatch",
        default=None,
        type=output_file,
        help="--step: write the FP8 dispatch table (grouped_gemm/dispatch.py) from the steps "
        "measured: our FP8 step against our bf16 step per layer",
    )
    p.add_argument("--merge", action="store_true", help="--fill-dispatch: merge into the table")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.merge and not args.fill_dispatch:
        p.error("--merge merges a run into the table of --fill-dispatch: give both")
    if args.fill_dispatch and args.dry_run:
        p.error("--fill-dispatch needs GPU timings: the interpreter's decide nothing")
    if args.step:
        return step_bench.run(args)
    if args.output or args.dry_run or args.flush_l2 or args.prepared_weight or args.fill_dispatch:
        p.error(
            "-o, --dry-run, --flush-l2, --prepared-weight and --fill-dispatch belong to --step "
            "(the CSV path is --csv)"
        )
    if not torch.cuda.is_available():
        print("the benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    adapter = GroupedGemmBf16Adapter() if args.dtype == "bf16" else GroupedGemmFp8BlockwiseAdapter()
    shapes = load_shapes(args.shapes or "kernel_ratchet.kernels.grouped_gemm.shapes:moe_target")
    if args.only:
        keys = args.only.split(",")
        shapes = [s for s in shapes if any(k in s.label for k in keys)]
    header = [*GEMM_COLUMNS] + ([] if args.no_vendor else [*VENDOR_COLUMNS])
    rows = []
    fh = open(args.csv, "w", newline="") if args.csv else None  # noqa: SIM115
    writer = csv.writer(fh or sys.stdout, lineterminator="\n")
    writer.writerow(header)
    for s in shapes:
        try:
            row = bench_shape(
                adapter, s, args.min_run_time, not args.no_backward, not args.no_check
            )
        except Exception as exc:  # a failing shape is a FAIL row, not the end of the run
            print(f"# {s.label}: {type(exc).__name__}: {exc}", file=sys.stderr)
            row = [s.label, s.B, s.M, s.N, s.K, "FAIL"]
            row += [math.nan] * (len(GEMM_COLUMNS) + len(VENDOR_COLUMNS) - 6)
            torch.cuda.empty_cache()
        torch.cuda.empty_cache()
        rows.append(row)
        writer.writerow([format_cell(c, 3) for c in row[: len(header)]])
        if fh:
            fh.flush()
    if fh:
        fh.close()
    ok = [r for r in rows if r[5] == "PASS" and r[6] == r[6]]
    if ok:
        geo = math.exp(statistics.fmean(math.log(r[6]) for r in ok))
        print(f"# {args.dtype}: geomean forward {geo:.1f} TFLOPS over {len(ok)} PASS shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
