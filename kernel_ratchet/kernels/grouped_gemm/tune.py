"""Sweep of the grouped GEMM tile buckets on the GPU.

    python -m kernel_ratchet.kernels.grouped_gemm.tune --out $OUT
    python -m kernel_ratchet.kernels.grouped_gemm.tune --fp8 \
        --shapes qwen3_235b_gate_up_uniform,olmoe_1b_7b_gate_up_onehot_heavy --out $OUT

Times the forward, dgrad and wgrad kernels of a few representative MoE shapes under each
candidate TileConfig, prints a short table and writes ``sweep.csv`` (again after each shape,
so a run cut short keeps what it measured). ``--fp8``: the FP8 step's launches and its
buckets' alternatives instead (:mod:`.tune_fp8`). ``--only`` keeps the shipped configs and
the candidates whose name holds one of its words (``--fp8 --only ws``: the warp-specialized
ones). The chosen buckets and the measured reason go into configs.py by hand: nothing is
autotuned at run time.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from functools import partial

import torch

from kernel_ratchet.kernels.benchmarking import output_dir, time_ms
from kernel_ratchet.kernels.grouped_gemm.adapter import make_grouped_case
from kernel_ratchet.kernels.grouped_gemm.configs import (
    BUCKETS,
    DGRAD_WS,
    MM_WS,
    WGRAD_WS,
    TileConfig,
)
from kernel_ratchet.kernels.grouped_gemm.fp8 import (
    grouped_mm_fp8,
    quant_weight_128x128,
)
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_mm, grouped_wgrad
from kernel_ratchet.kernels.grouped_gemm.shapes import moe_offlist, moe_shapes, moe_stress
from kernel_ratchet.kernels.grouped_gemm.tune_fp8 import FP8_MM, sweep_fp8
from kernel_ratchet.kernels.grouped_gemm.tune_rows import pick, time_row
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.launch import quant_fp8_blockwise_1x128

# The shipped bucket first, under "shipped:" (its name says what it holds), then alternatives.
BF16_MM = {
    # where a warp-specialized config ships, it runs before the bucket (groups above
    # SMALL_GROUP_ROWS rows on average)
    **({"shipped:MM_WS": MM_WS} if MM_WS else {}),
    "shipped:bf16_mm_large": BUCKETS["bf16_mm_large"],
    "128x256x64_w8_s3_nosplit": TileConfig(128, 256, 64, 8, 8, 3),
    "128x256x64_w8_s3_split": TileConfig(128, 256, 64, 8, 8, 3, split_tail=True),
    "128x128x64_w8_s4_split": TileConfig(128, 128, 64, 8, 8, 4, split_tail=True),
    "64x256x64_w4_s4": BUCKETS["bf16_mm_small"],
    "64x256x64_w4_s4_x2": TileConfig(64, 256, 64, 4, 4, 4, programs_per_sm=2),
    "128x256x64_w8_s3_tma": TileConfig(128, 256, 64, 8, 8, 3, use_tma=True),
    "128x256x64_w8_s4_tma": TileConfig(128, 256, 64, 8, 8, 4, use_tma=True),
    "128x128x64_w4_s4_x2": TileConfig(128, 128, 64, 8, 4, 4, programs_per_sm=2),
    # a short K (down projections): tiles small enough for two programs per SM
    "128x128x64_w8_s3_tma": TileConfig(128, 128, 64, 8, 8, 3, use_tma=True),
    "128x128x64_w4_s3_tma": TileConfig(128, 128, 64, 8, 4, 3, use_tma=True),
    # one pipeline over a program's (tile, k-block)s: the epilogue overlaps the next tile's
    # loads (a short K spends the most of a tile in it)
    "128x256x64_w8_s4_tma_flat": TileConfig(128, 256, 64, 8, 8, 4, use_tma=True, flatten=True),
    "128x256x64_w8_s3_tma_flat": TileConfig(128, 256, 64, 8, 8, 3, use_tma=True, flatten=True),
    "128x256x64_w8_s4_tma_flat_g4": TileConfig(128, 256, 64, 4, 8, 4, use_tma=True, flatten=True),
    "128x256x64_w8_s4_tma_flat_g16": TileConfig(128, 256, 64, 16, 8, 4, use_tma=True, flatten=True),
    # full tiles stored by TMA (asynchronous: the store drains under the next tile's loads)
    "128x256x64_w8_s4_tma_st2": TileConfig(128, 256, 64, 8, 8, 4, use_tma=True, tma_store=2),
    "128x256x64_w8_s3_tma_st1": TileConfig(128, 256, 64, 8, 8, 3, use_tma=True, tma_store=1),
    # warp-specialized (Gluon): a TMA producer warp, two consumer warpgroups of 64 rows,
    # persistent, TMA stores through per-group descriptors
    "ws_128x256_s3_g8": TileConfig(128, 256, 64, 8, 8, 3, gluon_ws=True),
    # four stages: the two warpgroups take one output staging buffer in turn
    "ws_128x256_s4_g8": TileConfig(128, 256, 64, 8, 8, 4, gluon_ws=True),
    "ws_128x128_s5_g8": TileConfig(128, 128, 64, 8, 8, 5, gluon_ws=True),
}
BF16_DGRAD = {
    **({"dgrad shipped:DGRAD_WS": DGRAD_WS} if DGRAD_WS else {}),
    "dgrad shipped:bf16_mm_large": BUCKETS["bf16_mm_large"],
    "dgrad_128x256x64_w8_s3": TileConfig(128, 256, 64, 8, 8, 3),
    "dgrad_128x256x64_w8_s3_tma": TileConfig(128, 256, 64, 8, 8, 3, use_tma=True),
    "dgrad_128x256x64_w8_s4_tma_flat": TileConfig(
        128, 256, 64, 8, 8, 4, use_tma=True, flatten=True
    ),
    "dgrad_128x256x64_w8_s4_tma_st2": TileConfig(128, 256, 64, 8, 8, 4, use_tma=True, tma_store=2),
    "dgrad_ws_128x256_s3_g8": TileConfig(128, 256, 64, 8, 8, 3, gluon_ws=True),
    "dgrad_ws_128x256_s4_g8": TileConfig(128, 256, 64, 8, 8, 4, gluon_ws=True),
    "dgrad_ws_128x128_s5_g8": TileConfig(128, 128, 64, 8, 8, 5, gluon_ws=True),
}
BF16_WGRAD = {
    # where the warp-specialized kernel applies it runs before the buckets
    **({"shipped:WGRAD_WS": WGRAD_WS} if WGRAD_WS else {}),
    "shipped:bf16_wgrad": BUCKETS["bf16_wgrad"],
    "shipped:bf16_wgrad_small": BUCKETS["bf16_wgrad_small"],
    "wg_64x128x128_w8_s3": TileConfig(64, 128, 128, 1, 8, 3),
    "wg_128x128x64_w8_s4": TileConfig(128, 128, 64, 1, 8, 4),
    # descriptors over each group's rows: the row mask comes from the TMA unit's zero fill
    "wg_64x128x128_w8_s4_tma": TileConfig(64, 128, 128, 1, 8, 4, use_tma=True),
    "wg_64x256x128_w8_s3_tma": TileConfig(64, 256, 128, 1, 8, 3, use_tma=True),
    "wg_64x128x128_w8_s3_tma": TileConfig(64, 128, 128, 1, 8, 3, use_tma=True),
    # few rows per group (a short reduction): tiles small enough for 2-3 programs per SM, so
    # one program's epilogue runs under another's loads
    "wg_64x128x128_w4_s3_tma": TileConfig(64, 128, 128, 1, 4, 3, use_tma=True),
    "wg_64x128x128_w8_s2_tma": TileConfig(64, 128, 128, 1, 8, 2, use_tma=True),
    "wg_64x128x256_w8_s2_tma": TileConfig(64, 128, 256, 1, 8, 2, use_tma=True),
    # persistent programs over the (group, n, k) tiles, the row loop flattened into the tile
    # loop, and tiles stored by TMA: one tile's store under the next tile's loads
    "wg_32x128x128_w4_s3_tma_st1": TileConfig(32, 128, 128, 1, 4, 3, use_tma=True, tma_store=1),
    "wg_32x128x128_w4_s3_tma_pers2_flat": TileConfig(
        32, 128, 128, 1, 4, 3, programs_per_sm=2, use_tma=True, flatten=True, persistent=True
    ),
    "wg_32x128x128_w4_s3_tma_pers2_flat_st1": TileConfig(
        32,
        128,
        128,
        1,
        4,
        3,
        programs_per_sm=2,
        use_tma=True,
        flatten=True,
        tma_store=1,
        persistent=True,
    ),
    "wg_32x128x128_w4_s4_tma_pers2_flat_st2": TileConfig(
        32,
        128,
        128,
        1,
        4,
        4,
        programs_per_sm=2,
        use_tma=True,
        flatten=True,
        tma_store=2,
        persistent=True,
    ),
    "wg_64x128x256_w8_s3_tma_st2": TileConfig(64, 128, 256, 1, 8, 3, use_tma=True, tma_store=2),
    "wg_64x128x256_w8_s3_tma_pers_flat": TileConfig(
        64, 128, 256, 1, 8, 3, use_tma=True, flatten=True, persistent=True
    ),
    # warp-specialized (Gluon): a TMA producer warp over per-group descriptors, two consumer
    # warpgroups of 64 rows of N, persistent, TMA stores; bands of GROUP_M n tiles
    "wg_ws_128x256_s3_g1": TileConfig(64, 128, 256, 1, 8, 3, gluon_ws=True),
    "wg_ws_128x256_s3_g8": TileConfig(64, 128, 256, 8, 8, 3, gluon_ws=True),
    "wg_ws_128x256_s3_g32": TileConfig(64, 128, 256, 32, 8, 3, gluon_ws=True),
    "wg_ws_128x256_s3_g16_lpt": TileConfig(
        64, 128, 256, 16, 8, 3, gluon_ws=True, longest_first=True
    ),
    "wg_ws_128x128_s5_g32": TileConfig(64, 128, 128, 32, 8, 5, gluon_ws=True),
    "wg_64x128x256_w8_s3_tma_pers_flat_st2": TileConfig(
        64, 128, 256, 1, 8, 3, use_tma=True, flatten=True, tma_store=2, persistent=True
    ),
}
SHAPES = ("dsv3_gate_up_top1_cf1.25", "mixtral_8x7b_gate_up_uniform")


#: The bf16 launches a sweep can time (``--kinds``).
KINDS = frozenset({"fwd", "dgrad", "wgrad"})


def sweep_shape(
    label: str, s, mrt: float, kinds: frozenset[str] = KINDS, only: tuple[str, ...] = ()
) -> list[tuple]:
    """Rows (shape, config, ms, TFLOPS) for one shape, of the launches in ``kinds``, of the
    candidates ``only`` picks (see :func:`_pick`)."""
    case = make_grouped_case(s, 0, "cuda")
    x, w, lens, dout = case.x.detach(), case.w.detach(), case.group_lens, case.dout
    f = 2.0 * s.M * s.N * s.K
    a = torch.randn(s.M, s.K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(s.K, s.N, device="cuda", dtype=torch.bfloat16)
    rows = [time_row(label, "dense_cublas", partial(torch.mm, a, b), f, mrt)]
    if hasattr(torch, "_grouped_mm"):  # torch's grouped GEMM on the same routing
        offs = torch.cumsum(lens, 0, dtype=torch.int32)
        wt = w.transpose(-2, -1)
        fn = partial(torch._grouped_mm, x, wt, offs=offs)
        rows.append(time_row(label, "torch_grouped_mm", fn, f, mrt))
        if "dgrad" in kinds:
            fn = partial(torch._grouped_mm, dout, w, offs=offs)
            rows.append(time_row(label, "dgrad torch_grouped_mm", fn, f, mrt))
        if "wgrad" in kinds:
            fn = partial(torch._grouped_mm, dout.t(), x, offs=offs)
            rows.append(time_row(label, "wgrad torch_grouped_mm", fn, f, mrt))
    for name, cfg in pick(BF16_MM, only).items() if "fwd" in kinds else ():
        rows.append(time_row(label, name, partial(grouped_mm, x, w, lens, config=cfg), f, mrt))
    for name, cfg in pick(BF16_DGRAD, only).items() if "dgrad" in kinds else ():
        fn = partial(grouped_mm, dout, w, lens, b_is_nk=False, config=cfg)
        rows.append(time_row(label, name, fn, f, mrt))
    for name, cfg in pick(BF16_WGRAD, only).items() if "wgrad" in kinds else ():
        fn = partial(grouped_wgrad, dout, x, lens, config=cfg)
        rows.append(time_row(label, name, fn, f, mrt))
    if "mixtral" in label and "fwd" in kinds and not only:
        xq = quant_fp8_blockwise_1x128(x)
        wq = quant_weight_128x128(w)
        for name, cfg in FP8_MM.items():
            rows.append(
                time_row(label, name, partial(grouped_mm_fp8, xq, wq, lens, config=cfg), f, mrt)
            )
    return rows


def sweep_dual(mrt: float) -> list[tuple]:
    """Dual quantization num_warps (GB/s in the TFLOPS column: bytes read + written / time)."""
    rows = []
    for R, C in ((8192, 7168), (65536, 2048)):
        x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
        nbytes = 4.0 * R * C + 4.0 * (R * -(-C // 128) + C * -(-R // 128))
        for nw in (4, 8, 16):
            fn = partial(quant_fp8_dual_1x128, x, num_warps=nw)
            rows.append(time_row(f"dual_{R}x{C}", f"num_warps={nw}", fn, nbytes * 1e3, mrt))
        copy_ms, _ = time_ms(x.clone, mrt)
        rows.append((f"dual_{R}x{C}", "copy_bf16", copy_ms, 4.0 * R * C / copy_ms / 1e6))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "."), type=output_dir)
    p.add_argument("--min-run-time", type=float, default=0.05)
    p.add_argument("--shapes", default=",".join(SHAPES), help="shape labels, comma-separated")
    p.add_argument("--fp8", action="store_true", help="the FP8 step's launches and buckets")
    p.add_argument(
        "--kinds",
        default=",".join(sorted(KINDS)),
        help="bf16 launches to sweep, comma-separated: fwd, dgrad, wgrad (default all)",
    )
    p.add_argument(
        "--only",
        default="",
        help="candidates whose name holds one of these, comma-separated (shipped kept; with "
        "--fp8 the GEMM and weight-gradient alternatives, the step's own launches always)",
    )
    args = p.parse_args(argv)
    only = tuple(o for o in args.only.split(",") if o)
    kinds = frozenset(k for k in args.kinds.split(",") if k)
    if not kinds or kinds - KINDS:
        p.error(f"--kinds takes some of {sorted(KINDS)}, got {args.kinds!r}")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    print(torch.__version__, torch.version.cuda, device, flush=True)
    labels = [x for x in args.shapes.split(",") if x]
    known = {s.label: s for s in [*moe_shapes(), *moe_offlist(), *moe_stress()]}
    missing = [x for x in labels if x not in known]
    if missing:
        p.error(f"unknown shape(s) {missing}: see kernel_ratchet.kernels.grouped_gemm.shapes")
    sweep = (
        partial(sweep_fp8, only=only) if args.fp8 else partial(sweep_shape, kinds=kinds, only=only)
    )
    rows: list[tuple] = []
    for label in labels:
        new = sweep(label, known[label], args.min_run_time)
        torch.cuda.empty_cache()
        for r in new:
            unit = "GB/s" if "(GB/s)" in r[1] else "TFLOPS"
            print(f"{r[0]:30s} {r[1]:22s} {r[2]:8.3f} ms {r[3]:7.1f} {unit}", flush=True)
        rows += new
        _write(args.out, rows)  # after each shape: a run cut short keeps what it measured
    new = [] if args.fp8 or "fwd" not in kinds or only else sweep_dual(args.min_run_time)
    for r in new:
        print(f"{r[0]:30s} {r[1]:22s} {r[2]:8.3f} ms {r[3]:7.1f} GB/s", flush=True)
    _write(args.out, rows + new)
    return 0


def _write(out_dir: str, rows: list[tuple]) -> None:
    """``sweep.csv`` in ``out_dir``: shape, config, ms, TFLOPS (GB/s for the passes)."""
    with open(os.path.join(out_dir, "sweep.csv"), "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["shape", "config", "ms", "TFLOPS"])
        out.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
