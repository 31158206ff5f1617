"""Full benchmark of the dense GEMM ops against the vendor library.

    python -m kernel_ratchet.kernels.gemm.bench --dtype bf16|fp8
        [--granularity tensorwise|rowwise|blockwise] [--grad-dtype e4m3|e5m2]
        [--shapes model|large|odd|cpu] [-o out.csv] [--min-run-time 0.2] [--rounds 1]
        [--no-vendor]
    python -m kernel_ratchet.kernels.gemm.bench --set odd|dispatch [--fill-dispatch PATH]
        [--rounds 1 (3 with --fill-dispatch)] [--timing wall|graph] [-o out.md]

``--set`` prints the side-by-side table of :mod:`.compare` instead (bf16 ours vs cuBLAS, FP8
Linear vs the bf16 path) and can write the FP8 dispatch table from it; ``--timing graph``
times its GPU work alone (CUDA-graph replays), so a row that ``wall`` shows host-bound says
what its kernels cost.

Per shape: fresh random inputs from the seed; the correctness check (autograd path against the
fp32 reference, SPEC section 5 thresholds); then forward and backward timed with
``torch.utils.benchmark.Timer.blocked_autorange`` (it synchronizes the device around each
block; median of the per-call block times, stddev over blocks), ours then the vendor's on the
same tensors. With ``--rounds N`` (N > 1) the four calls are timed in N interleaved rounds
instead, each round starting one call later, and a cell is the median over the rounds (stddev
across them): one slow block no longer decides a row. A shape that raises gets a FAIL row.

The CSV holds the frozen GEMM columns (``csv_schema.GEMM_COLUMNS``) and, unless
``--no-vendor``, these appended after them: ``Step TFLOPS`` (6·MNK over fwd+bwd time),
``vendor``, ``Vendor Forward TFLOPS``, ``Vendor Backward TFLOPS``, ``Vendor Step TFLOPS``,
``vendor_out_snr``, ``fwd_ratio``, ``bwd_ratio``, ``step_ratio`` (ours / vendor). The one CSV
reader of the system accepts only the frozen columns: give ``--no-vendor`` when a campaign
parses the file.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.correctness import check_outputs, snr_db
from kernel_ratchet.harness.csv_schema import GEMM_COLUMNS, format_cell
from kernel_ratchet.kernels.benchmarking import (
    Timed,
    output_file,
    time_call,
    timed_rounds,
)
from kernel_ratchet.kernels.gemm import adapter as ad
from kernel_ratchet.kernels.gemm import bench_set
from kernel_ratchet.kernels.gemm import shapes as sh
from kernel_ratchet.kernels.gemm import vendor as vd

VENDOR_COLUMNS = (
    "Step TFLOPS",
    "vendor",
    "Vendor Forward TFLOPS",
    "Vendor Backward TFLOPS",
    "Vendor Step TFLOPS",
    "vendor_out_snr",
    "fwd_ratio",
    "bwd_ratio",
    "step_ratio",
)
SHAPE_SETS: dict[str, Callable[[], list[Shape]]] = {
    "model": sh.model_shapes,
    "large": sh.model_shapes_large_m,
    "odd": lambda: list(sh.ODD_SHAPES),
    "mixed": sh.mixed_shapes,
    "dispatch": sh.dispatch_shapes,
    "cpu": lambda: list(sh.CPU_SHAPES),
}


def _tflops(flops: float, t: Timed | None) -> tuple[float, float]:
    """(TFLOPS at the median, its stddev propagated from the time's)."""
    if t is None or t.ms <= 0:
        return math.nan, math.nan
    rate = flops / (t.ms * 1e-3) / 1e12
    return rate, rate * t.std_ms / t.ms


def step_tflops(shape: Shape, fwd_ms: float, bwd_ms: float) -> float:
    """SPEC section 6 combined step: 6·M·N·K / ((fwd_ms + bwd_ms)·1e-3) / 1e12."""
    return 6.0 * shape.M * shape.N * shape.K / ((fwd_ms + bwd_ms) * 1e-3) / 1e12


def make_adapter(dtype: str, granularity: str, grad_dtype: str) -> ad._GemmAdapter:
    if dtype in ("bf16", "fp16"):
        return ad.GemmBf16() if dtype == "bf16" else ad.GemmFp16()
    name = f"GemmFp8{granularity.capitalize()}" + ("E5M2" if grad_dtype == "e5m2" else "")
    return getattr(ad, name)()


def vendor_fns(adapter: ad._GemmAdapter, case: ad.GemmCase):
    """(name, forward, backward) of the vendor baseline, or None."""
    if isinstance(adapter, ad.GemmBf16):
        return ("cublas", *vd.bf16_vendor(case))
    assert isinstance(adapter, ad._GemmFp8)
    g, gd = adapter.granularity, adapter.grad_dtype
    if g == "tensorwise":
        return ("scaled_mm", *vd.tensorwise_vendor(case, gd))
    if g == "rowwise":
        return ("scaled_mm", *vd.rowwise_vendor(case, gd))
    fns = vd.blockwise_vendor(case, gd)
    return None if fns is None else ("scaled_mm_blockwise", *fns)


def bench_shape(
    adapter: ad._GemmAdapter,
    shape: Shape,
    *,
    device: str,
    min_run_time: float,
    vendor: bool,
    rounds: int = 1,
) -> list[object]:
    """One CSV row (frozen columns, then vendor columns when ``vendor``). ``rounds`` > 1 times
    ours and the vendor's forward and backward in interleaved rounds (:func:`timed_rounds`):
    medians over rounds, stddev across them."""
    fwd_flops, bwd_flops = adapter.flops(shape)
    nan = math.nan
    try:
        case = adapter.make_case(shape, seed=0, device=device)
        ref = adapter.reference(case)
        got = adapter.outputs(case)
        chk = check_outputs(got, ref, {k: adapter.threshold(k) for k in ref})
        del got
        fns = {"fwd": lambda: adapter.forward(case), "bwd": lambda: adapter.backward(case)}
        vfns = vendor_fns(adapter, case) if vendor else None
        if vfns is not None:
            fns |= {"vfwd": vfns[1], "vbwd": vfns[2]}
        if rounds > 1:
            t = timed_rounds(fns, min_run_time, rounds)
        else:
            t = {n: time_call(fn, min_run_time) for n, fn in fns.items()}
        tf, tb = t["fwd"], t["bwd"]
    except Exception as exc:  # a failing shape is a FAIL row, not a crash of the whole bench
        print(f"  {shape.label}: FAIL ({type(exc).__name__}: {exc})", file=sys.stderr)
        row: list[object] = [shape.label, shape.B, shape.M, shape.N, shape.K, "FAIL"]
        row += [nan] * (len(GEMM_COLUMNS) - len(row))
        return row + ([""] * len(VENDOR_COLUMNS) if vendor else [])
    f, fs = _tflops(fwd_flops, tf)
    b, bs = _tflops(bwd_flops, tb)
    snr = chk.snr
    row = [
        shape.label,
        shape.B,
        shape.M,
        shape.N,
        shape.K,
        "PASS" if chk.passed else "FAIL",
        f,
        fs,
        b,
        bs,
        tf.ms,
        tb.ms,
        snr["out"],
        snr["da"],
        snr["db"],
    ]
    if not vendor:
        return row
    step = step_tflops(shape, tf.ms, tb.ms)
    vrow: list[object] = [step, "none", nan, nan, nan, nan, nan, nan, nan]
    if vfns is not None:
        name, vf, _ = vfns
        vsnr = snr_db(vf(), ref["out"])
        vtf, vtb = t["vfwd"], t["vbwd"]
        vfr, vbr = _tflops(fwd_flops, vtf)[0], _tflops(bwd_flops, vtb)[0]
        vstep = step_tflops(shape, vtf.ms, vtb.ms)
        vrow = [step, name, vfr, vbr, vstep, vsnr, f / vfr, b / vbr, step / vstep]
    return row + vrow


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if isinstance(x, float) and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def run(args: argparse.Namespace) -> list[list[object]]:
    """Benchmark every shape; with ``-o`` the CSV is rewritten after each row (a killed run
    keeps what it measured)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    adapter = make_adapter(args.dtype, args.granularity, args.grad_dtype)
    shapes = SHAPE_SETS[args.shapes]()
    if args.limit:
        shapes = shapes[: args.limit]
    rows = []
    for shape in shapes:
        row = bench_shape(
            adapter,
            shape,
            device=device,
            min_run_time=args.min_run_time,
            vendor=not args.no_vendor,
            rounds=args.rounds,
        )
        rows.append(row)
        print(_line(row), flush=True)
        if args.output:
            write_rows(args.output, rows, not args.no_vendor)
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def _line(row: list[object]) -> str:
    """One shape's console line: label, check, our TFLOPS, SNRs, vendor and ratios (4 digits)."""
    cells = [format_cell(c, 4) if isinstance(c, float) else str(c) for c in row]
    return " ".join(f"{c:>9}" for c in cells[:1] + cells[5:9] + cells[12:])


def summarize(rows: list[list[object]], vendor: bool) -> str:
    """Geomeans over PASS rows: ours (fwd, bwd, step) and, with vendor columns, theirs."""
    ok = [r for r in rows if r[5] == "PASS"]
    n = len(GEMM_COLUMNS)
    out = f"PASS {len(ok)}/{len(rows)}  geomean fwd {geomean([r[6] for r in ok]):.1f}"
    out += f"  bwd {geomean([r[8] for r in ok]):.1f}"
    if vendor:
        out += f"  step {geomean([r[n] for r in ok]):.1f} TFLOPS"
        out += f" | vendor fwd {geomean([r[n + 2] for r in ok]):.1f}"
        out += f"  bwd {geomean([r[n + 3] for r in ok]):.1f}"
        out += f"  step {geomean([r[n + 4] for r in ok]):.1f}"
        out += f" | ratio fwd {geomean([r[n + 6] for r in ok]):.3f}"
        out += f"  bwd {geomean([r[n + 7] for r in ok]):.3f}"
        out += f"  step {geomean([r[n + 8] for r in ok]):.3f}"
    return out


def write_rows(path: str, rows: list[list[object]], vendor: bool) -> None:
    header = list(GEMM_COLUMNS) + (list(VENDOR_COLUMNS) if vendor else [])
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for row in rows:
            w.writerow([format_cell(c) if not isinstance(c, str) else c for c in row])


#: Interleaved rounds per cell when ``--fill-dispatch`` writes path decisions: with one
#: ``blocked_autorange`` per path a single slow moment of the GPU flips a row, and a merge
#: keeps the slower FP8 time of every run (docs/odd-shapes.md has a row it flipped).
FILL_ROUNDS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kernel_ratchet.kernels.gemm.bench")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp8"], default=None)
    p.add_argument(
        "--set",
        dest="set_",
        choices=sorted(SHAPE_SETS),
        default=None,
        help="side-by-side table of the Linear paths on this shape set (no --dtype)",
    )
    p.add_argument(
        "--fill-dispatch",
        default=None,
        type=output_file,
        metavar="PATH",
        help="with --set: write the FP8 dispatch table measured on the set to PATH",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="with --fill-dispatch: merge this run into the table at PATH (FP8 only where it "
        "was faster in every run) instead of replacing it",
    )
    p.add_argument(
        "--granularity", choices=["tensorwise", "rowwise", "blockwise"], default="blockwise"
    )
    p.add_argument("--grad-dtype", choices=["e4m3", "e5m2"], default="e4m3")
    p.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="model")
    p.add_argument(
        "-o",
        "--output",
        default=None,
        type=output_file,
        help="CSV path (--set: markdown; default: print only)",
    )
    p.add_argument("--min-run-time", type=float, default=0.2, help="seconds per Timer measurement")
    p.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="time each call of a row this many rounds, interleaved, and take the median "
        "(1: one blocked_autorange each, one after another); default 1, and "
        f"{FILL_ROUNDS} with --fill-dispatch, whose path decisions one slow moment of the GPU "
        "would otherwise flip",
    )
    p.add_argument(
        "--timing",
        choices=["wall", "graph"],
        default="wall",
        help="with --set: wall = back-to-back calls on the host's clock, launches included; "
        "graph = GPU time per call from CUDA-graph replays, launches left out",
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes")
    p.add_argument("--no-vendor", action="store_true", help="frozen columns only, no vendor")
    args = p.parse_args(argv)
    if (args.dtype is None) == (args.set_ is None):
        p.error("give exactly one of --dtype (per-op benchmark) and --set (side-by-side table)")
    if args.fill_dispatch and args.set_ is None:
        p.error("--fill-dispatch needs --set")
    if args.rounds is None:
        args.rounds = FILL_ROUNDS if args.fill_dispatch else 1
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.timing == "graph" and args.set_ is None:
        p.error("--timing graph needs --set")
    if args.merge and not args.fill_dispatch:
        p.error("--merge needs --fill-dispatch PATH (the table to merge this run into)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.set_ is not None:
        return bench_set.run_set(args, SHAPE_SETS[args.set_]()[: args.limit or None])
    rows = run(args)
    print(summarize(rows, not args.no_vendor))
    return 0 if all(r[5] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
