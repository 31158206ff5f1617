"""The blockwise FP8 GEMM alone against torch's blockwise ``scaled_mm``, on pre-quantized operands.

    python -m kernel_ratchet.kernels.gemm.blockwise_vs_vendor [--shapes model] [--limit 17]
        [--layout fwd|wgrad]

Per shape, on the same FP8 operands (1x128 activation scales; 128x128 weight blocks for the
forward and dgrad layout ``fwd``, 1x128 rows of B for the weight-gradient layout ``wgrad``):
our dispatched kernel (:func:`.launch.matmul`, the shipped plan) and cuBLAS through
``torch.nn.functional.scaled_mm``, each the median of ``triton.testing.do_bench`` (200 ms),
ours then the vendor's then ours again (the two medians of ours averaged), after a check of
ours against the vendor's output (SNR, dB). Quantization is not timed; the Linear step with
quantization is :mod:`.bench`'s. Prints a markdown table, geomeans last.
"""

from __future__ import annotations

import argparse
import math

import torch
import triton.testing

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm.bench import SHAPE_SETS
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK
from kernel_ratchet.kernels.gemm.launch import matmul
from kernel_ratchet.kernels.gemm.vendor import _block_smm
from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128, quant_fp8_blockwise_1x128

E4M3 = torch.float8_e4m3fn


def _ms(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))


def row(M: int, N: int, K: int, layout: str) -> tuple[float, float, float]:
    """(ours TFLOPS, vendor TFLOPS, SNR of ours against the vendor's output) of one shape."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=gen)
    qa = quant_fp8_blockwise_1x128(a, E4M3, align=16)
    blocks = layout == "fwd"
    qb = (quant_fp8_block_128x128 if blocks else quant_fp8_blockwise_1x128)(b, E4M3, align=16)
    group = 128 if blocks else 1

    def ours() -> torch.Tensor:
        return matmul(
            qa.data,
            qb.data,
            scale_mode=SCALE_BLOCK,
            a_scale=qa.scale,
            b_scale=qb.scale,
            b_scale_group_n=group,
            kind="fp8_block",
        )

    def vendor() -> torch.Tensor:
        return _block_smm(qa.data, qa.scale, qb.data, qb.scale, blocks)

    snr = snr_db(ours().float(), vendor().float())
    t_ours = _ms(ours)
    t_vendor = _ms(vendor)
    t_ours = (t_ours + _ms(ours)) / 2
    flops = 2 * M * N * K
    return flops / t_ours / 1e9, flops / t_vendor / 1e9, snr


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="model")
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes")
    p.add_argument("--layout", choices=["fwd", "wgrad"], default="fwd")
    args = p.parse_args()
    shapes = SHAPE_SETS[args.shapes]()
    shapes = shapes[: args.limit] if args.limit else shapes
    print("| shape | M | N | K | ours TFLOPS | scaled_mm TFLOPS | ratio | SNR dB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    logs: list[tuple[float, float]] = []
    for s in shapes:
        ours, vendor, snr = row(s.M, s.N, s.K, args.layout)
        logs.append((math.log(ours), math.log(vendor)))
        print(
            f"| {s.label} | {s.M} | {s.N} | {s.K} | {ours:.0f} | {vendor:.0f} "
            f"| {ours / vendor:.3f} | {snr:.1f} |",
            flush=True,
        )
    go = math.exp(sum(x for x, _ in logs) / len(logs))
    gv = math.exp(sum(y for _, y in logs) / len(logs))
    print(f"| geomean | | | | {go:.0f} | {gv:.0f} | {go / gv:.3f} | |")


if __name__ == "__main__":
    main()
