"""Full benchmark of the memory-bound FP8 quantization ops against plain PyTorch (CUDA GPU).

    python -m kernel_ratchet.kernels.quant.bench --op dual \\
        --shapes kernel_ratchet.kernels.quant.shapes:quant_target --csv quant_dual.csv

GB/s = ``Adapter.bytes_moved`` (bytes read + written, minimum) over the median time
(torch.utils.benchmark.Timer). Baselines: the same quantization in eager PyTorch, and the device
copy bandwidth (a bf16 clone of the same tensor, counting read + write), the roofline the
performance goal is stated against. CSV: the frozen memory columns first, then vendor columns
(``--no-vendor``: the frozen columns only, which is what a campaign's CSV reader accepts).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys

import torch

from kernel_ratchet.harness.adapter import load_shapes
from kernel_ratchet.harness.csv_schema import MEMORY_COLUMNS, format_cell
from kernel_ratchet.kernels.benchmarking import output_file, snr_gpu, time_ms
from kernel_ratchet.kernels.quant.adapter import (
    QuantFp8Block128Adapter,
    QuantFp8BlockwiseAdapter,
    QuantFp8DualAdapter,
    QuantFp8RowwiseAdapter,
)

ADAPTERS = {
    "rowwise": QuantFp8RowwiseAdapter,
    "blockwise": QuantFp8BlockwiseAdapter,
    "dual": QuantFp8DualAdapter,
    "block128": QuantFp8Block128Adapter,
}
VENDOR_COLUMNS = ("torch eager GB/s", "copy GB/s", "fraction of copy")
FP8 = torch.float8_e4m3fn


def _eager_1x128(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    R, C = x.shape
    nb = -(-C // 128)
    xf = torch.nn.functional.pad(x.float(), (0, nb * 128 - C)).view(R, nb, 128)
    amax = xf.abs().amax(dim=2, keepdim=True).clamp_min(1e-12)
    q = (xf * (448.0 / amax)).clamp(-448.0, 448.0).to(FP8)
    return q.view(R, -1)[:, :C], amax / 448.0


def _eager_128x128(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """128x128 blocks, both layouts materialized (what the kernel writes)."""
    R, C = x.shape
    nr, nc = -(-R // 128), -(-C // 128)
    xf = torch.nn.functional.pad(x.float(), (0, nc * 128 - C, 0, nr * 128 - R))
    xf = xf.view(nr, 128, nc, 128)
    amax = xf.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-12)
    q = (xf * (448.0 / amax)).clamp(-448.0, 448.0).to(FP8).view(nr * 128, nc * 128)[:R, :C]
    return q, q.t().contiguous(), amax[:, 0, :, 0] / 448.0


def eager(op: str, x: torch.Tensor) -> object:
    """The quantization in plain PyTorch (the baseline the Triton kernels must beat)."""
    if op == "rowwise":
        amax = x.float().abs().amax(dim=1, keepdim=True).clamp_min(1e-12)
        return (x.float() * (448.0 / amax)).clamp(-448.0, 448.0).to(FP8), amax / 448.0
    if op == "blockwise":
        return _eager_1x128(x)
    if op == "block128":
        return _eager_128x128(x)
    return _eager_1x128(x), _eager_1x128(x.t())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--op", choices=tuple(ADAPTERS), default="dual")
    p.add_argument("--shapes", default="kernel_ratchet.kernels.quant.shapes:quant_target")
    p.add_argument("--csv", default=None, type=output_file)
    p.add_argument("--min-run-time", type=float, default=0.2)
    p.add_argument(
        "--no-vendor", action="store_true", help="frozen columns only (what a campaign parses)"
    )
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("the benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    adapter = ADAPTERS[args.op]()
    header = [*MEMORY_COLUMNS] + ([] if args.no_vendor else [*VENDOR_COLUMNS])
    fh = open(args.csv, "w", newline="") if args.csv else None  # noqa: SIM115
    writer = csv.writer(fh or sys.stdout, lineterminator="\n")
    writer.writerow(header)
    rates = []
    for s in load_shapes(args.shapes):
        case = adapter.make_case(s, 0, "cuda")
        got, ref = adapter.outputs(case), adapter.reference(case)
        snrs = {k: snr_gpu(got[k], ref[k]) for k in ref}
        ok = all(v >= adapter.threshold(k) for k, v in snrs.items())
        nbytes = adapter.bytes_moved(s)[0]
        ms, sd = time_ms(lambda c=case: adapter.forward(c), args.min_run_time)
        eager_ms, _ = time_ms(lambda c=case: eager(args.op, c.x), args.min_run_time)
        copy_ms, _ = time_ms(lambda c=case: c.x.clone(), args.min_run_time)
        gbs = nbytes / (ms * 1e-3) / 1e9
        copy = 2.0 * case.x.numel() * 2 / (copy_ms * 1e-3) / 1e9
        row = [
            s.label,
            s.B,
            s.M,
            s.N,
            "PASS" if ok else "FAIL",
            gbs,
            gbs * sd / ms,
            math.nan,
            math.nan,
            ms,
            math.nan,
            snrs["out"],
            nbytes / (eager_ms * 1e-3) / 1e9,
            copy,
            gbs / copy,
        ]
        if ok:
            rates.append(gbs)
        writer.writerow([format_cell(c, 3) for c in row[: len(header)]])
        del case, got, ref
        torch.cuda.empty_cache()
    if fh:
        fh.close()
    if rates:
        geo = math.exp(statistics.fmean(math.log(r) for r in rates))
        print(f"# {args.op}: geomean {geo:.0f} GB/s over {len(rates)} PASS shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
