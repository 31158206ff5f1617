"""The blockwise FP8 GEMM alone against torch's blockwise ``scaled_mm``, on pre-quantized operands.

    python -m kernel_ratchet.kernels.gemm.blockwise_vs_vendor [--shapes model] [--limit 17]
        [--layout fwd|wgrad] [--ws block_n=128,stages=6,mode=1,group_m=8,consumers=2 ...]

Per shape, on the same FP8 operands (1x128 activation scales; 128x128 weight blocks for the
forward and dgrad layout ``fwd``, 1x128 rows of B for the weight-gradient layout ``wgrad``):
our dispatched kernel (:func:`.launch.matmul`, the shipped plan) and cuBLAS through
``torch.nn.functional.scaled_mm``, each the median of ``triton.testing.do_bench`` (200 ms),
ours then the vendor's then ours again (the two medians of ours averaged), after a check of
ours against the vendor's output (SNR, dB). Quantization is not timed; the Linear step with
quantization is :mod:`.bench`'s. Prints a markdown table, geomeans last. Each ``--ws`` adds a
column: the warp-specialized kernel (:mod:`.fp8_block_ws`) launched directly with that
configuration (how its ``WS_CONFIGS`` entries are chosen), and a line under the table with its
speed over the shipped plan's.
"""

from __future__ import annotations

import argparse
import math

import torch
import triton.testing

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.gemm import fp8_block_ws_launch as fp8_block_ws
from kernel_ratchet.kernels.gemm.bench import SHAPE_SETS
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK
from kernel_ratchet.kernels.gemm.launch import matmul
from kernel_ratchet.kernels.gemm.vendor import _block_smm
from kernel_ratchet.kernels.quant.launch import quant_fp8_block_128x128, quant_fp8_blockwise_1x128

E4M3 = torch.float8_e4m3fn


def _ms(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))


def ws_config(spec: str) -> dict[str, int]:
    """``"block_n=128,stages=6"`` -> keyword arguments of
    :func:`.fp8_block_ws_launch.matmul_fp8_block_ws`; anything else exits with the allowed keys."""
    allowed = ("block_n", "stages", "mode", "group_m", "consumer_regs", "consumers")
    out: dict[str, int] = {}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        if key not in allowed or not value.isdigit():
            raise SystemExit(f"error: --ws takes {'/'.join(allowed)}=INT pairs, got {part!r}")
        out[key] = int(value)
    return out


def row(
    M: int, N: int, K: int, layout: str, ws: tuple[dict[str, int], ...] = ()
) -> tuple[float, float, float, list[float]]:
    """(ours TFLOPS, vendor TFLOPS, SNR of ours against the vendor's output, TFLOPS of the WS
    kernel under each config of ``ws``) of one shape."""
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
    extra = []
    for cfg in ws:

        def run(cfg: dict[str, int] = cfg) -> torch.Tensor:
            return fp8_block_ws.matmul_fp8_block_ws(
                qa.data, qb.data, qa.scale, qb.scale, b_scale_group_n=group, **cfg
            )

        if snr_db(run().float(), vendor().float()) < 40.0:
            raise SystemExit(f"error: --ws {cfg} computes a different product on {M}x{N}x{K}")
        extra.append(flops / _ms(run) / 1e9)
    return flops / t_ours / 1e9, flops / t_vendor / 1e9, snr, extra


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="model")
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes")
    p.add_argument("--layout", choices=["fwd", "wgrad"], default="fwd")
    p.add_argument("--ws", action="append", default=[], help="a WS kernel config to time too")
    args = p.parse_args()
    ws = tuple(ws_config(spec) for spec in args.ws)
    shapes = SHAPE_SETS[args.shapes]()
    shapes = shapes[: args.limit] if args.limit else shapes
    extra = "".join(f" ws {spec} |" for spec in args.ws)
    print(f"| shape | M | N | K | ours TFLOPS | scaled_mm TFLOPS | ratio | SNR dB |{extra}")
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(ws))
    logs: list[list[float]] = []
    for s in shapes:
        ours, vendor, snr, more = row(s.M, s.N, s.K, args.layout, ws)
        logs.append([math.log(x) for x in (ours, vendor, *more)])
        cells = "".join(f" {x:.0f} |" for x in more)
        print(
            f"| {s.label} | {s.M} | {s.N} | {s.K} | {ours:.0f} | {vendor:.0f} "
            f"| {ours / vendor:.3f} | {snr:.1f} |{cells}",
            flush=True,
        )
    g = [math.exp(sum(col) / len(col)) for col in zip(*logs, strict=True)]
    cells = "".join(f" {x:.0f} |" for x in g[2:])
    print(f"| geomean | | | | {g[0]:.0f} | {g[1]:.0f} | {g[0] / g[1]:.3f} | |{cells}")
    for line in against_ours(args.ws, logs):
        print(line)


def against_ours(specs: list[str], logs: list[list[float]]) -> list[str]:
    """One line per ``--ws`` column: its TFLOP/s over the shipped plan's (the first column of
    ``logs``, natural logs of TFLOP/s per shape), geomean, range and shapes faster."""
    out = []
    for i, spec in enumerate(specs):
        ratios = [math.exp(row[2 + i] - row[0]) for row in logs]
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        out.append(
            f"\nws {spec}: {geo:.3f}x the shipped plan (geomean), {min(ratios):.2f}-"
            f"{max(ratios):.2f} per shape, faster on {sum(r > 1 for r in ratios)} of {len(ratios)}"
        )
    return out


if __name__ == "__main__":
    main()
