"""Sweep of the grouped GEMM tile buckets on the GPU.

    python -m kernel_ratchet.kernels.grouped_gemm.tune --out $OUT
    python -m kernel_ratchet.kernels.grouped_gemm.tune --fp8 \
        --shapes qwen3_235b_gate_up_uniform,olmoe_1b_7b_gate_up_onehot_heavy --out $OUT

Times the forward, dgrad and wgrad kernels of a few representative MoE shapes under each
candidate TileConfig, prints a short table and writes ``sweep.csv``. ``--fp8``: for each
shape, every launch of the FP8 blockwise training step on its own (the weight's quantization
with its transposed copy, both dual quantizations, forward, dgrad, wgrad, in TFLOP/s of the
GEMMs or GB/s of the passes), then the FP8 GEMM bucket's alternatives on the forward and
the dgrad, and the wgrad's (its warp-specialized kernel included). The chosen buckets and
the measured reason go into configs.py by hand: nothing is autotuned at run time.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from functools import partial

import torch

from kernel_ratchet.kernels.benchmarking import tflops, time_ms
from kernel_ratchet.kernels.grouped_gemm import wgrad_fp8_ws_launch as wgrad_ws
from kernel_ratchet.kernels.grouped_gemm.adapter import make_grouped_case
from kernel_ratchet.kernels.grouped_gemm.configs import (
    BUCKETS,
    DGRAD_WS,
    MM_WS,
    WGRAD_WS,
    TileConfig,
)
from kernel_ratchet.kernels.grouped_gemm.fp8 import (
    FP8,
    GROUP,
    grouped_mm_fp8,
    grouped_wgrad_fp8,
    quant_weight_128x128,
)
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_mm, grouped_wgrad
from kernel_ratchet.kernels.grouped_gemm.shapes import moe_offlist, moe_shapes, moe_stress
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.dual_grouped import quant_fp8_dual_1x128_grouped
from kernel_ratchet.kernels.quant.launch import Fp8Quantized, quant_fp8_blockwise_1x128

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
FP8_MM = {
    "shipped:fp8_mm_large": BUCKETS["fp8_mm_large"],
    "f8_128x128x128_w8_s4": TileConfig(128, 128, 128, 8, 8, 4),
    "f8_128x256x128_w8_s3": TileConfig(128, 256, 128, 8, 8, 3),
}
FP8_MM_MORE = {
    **FP8_MM,
    "f8_128x128x128_w8_s3": TileConfig(128, 128, 128, 8, 8, 3),
    "f8_128x128x128_w8_s4_g16": TileConfig(128, 128, 128, 16, 8, 4),
    "f8_64x128x128_w4_s4": BUCKETS["fp8_mm_small"],
    "f8_128x64x128_w4_s4": TileConfig(128, 64, 128, 8, 4, 4),
    # one-warpgroup tiles with 2-3 programs per SM: one's MMAs run while another scales
    "f8_64x128x128_w4_s4_x2": TileConfig(64, 128, 128, 8, 4, 4, programs_per_sm=2),
    "f8_64x128x128_w4_s3_x2": TileConfig(64, 128, 128, 8, 4, 3, programs_per_sm=2),
    "f8_64x128x128_w4_s3_x3": TileConfig(64, 128, 128, 8, 4, 3, programs_per_sm=3),
    "f8_128x128x128_w4_s3_x2": TileConfig(128, 128, 128, 8, 4, 3, programs_per_sm=2),
    "f8_128x128x128_w8_s4_tma": TileConfig(128, 128, 128, 8, 8, 4, use_tma=True),
    "f8_64x128x128_w4_s4_x2_tma": TileConfig(
        64, 128, 128, 8, 4, 4, programs_per_sm=2, use_tma=True
    ),
    # the warp-specialized Gluon kernel (fp8_ws.py): a TMA producer warp, two consumer
    # warpgroups, paired k-groups; stages of 32 KiB
    "f8_ws_128x128_s6": TileConfig(128, 128, 128, 8, 4, 6, gluon_ws=True),
    "f8_ws_128x128_s4": TileConfig(128, 128, 128, 8, 4, 4, gluon_ws=True),
    "f8_ws_128x128_s6_g16": TileConfig(128, 128, 128, 16, 4, 6, gluon_ws=True),
}
# wgrad: BLOCK_N x BLOCK_K output tiles (BLOCK_M unused); the token loop steps 128 (the scale)
FP8_WGRAD = {
    "shipped:fp8_wgrad": BUCKETS["fp8_wgrad"],
    "f8wg_64x128_w4_s3": TileConfig(128, 64, 128, 1, 4, 3),
    "f8wg_64x128_w4_s4": TileConfig(128, 64, 128, 1, 4, 4),
    "f8wg_128x128_w8_s3": TileConfig(128, 128, 128, 1, 8, 3),
    "f8wg_128x128_w8_s4": TileConfig(128, 128, 128, 1, 8, 4),
    "f8wg_128x128_w4_s3": TileConfig(128, 128, 128, 1, 4, 3),
    "f8wg_64x128_w8_s4": TileConfig(128, 64, 128, 1, 8, 4),
    "f8wg_128x64_w4_s4": TileConfig(128, 128, 64, 1, 4, 4),
    "f8wg_128x256_w8_s3": TileConfig(128, 128, 256, 1, 8, 3),
    # the chunks through TMA descriptors (the token mask stays, applied in registers)
    "f8wg_64x128_w4_s3_tma": TileConfig(128, 64, 128, 1, 4, 3, use_tma=True),
    "f8wg_64x128_w4_s4_tma": TileConfig(128, 64, 128, 1, 4, 4, use_tma=True),
    "f8wg_128x128_w8_s3_tma": TileConfig(128, 128, 128, 1, 8, 3, use_tma=True),
    # each group's own 128-token chunks (quant.dual_grouped): no token mask, no shared chunk
    "f8wg_64x128_w4_s3_gc": TileConfig(128, 64, 128, 1, 4, 3, group_chunks=True),
    "f8wg_64x128_w4_s4_gc_tma": TileConfig(128, 64, 128, 1, 4, 4, use_tma=True, group_chunks=True),
    "f8wg_128x128_w8_s3_gc_tma": TileConfig(
        128, 128, 128, 1, 8, 3, use_tma=True, group_chunks=True
    ),
    "f8wg_ws_128x128_s4": TileConfig(128, 128, 128, 8, 4, 4, gluon_ws=True, group_chunks=True),
    "f8wg_ws_128x128_s5": TileConfig(128, 128, 128, 8, 4, 5, gluon_ws=True, group_chunks=True),
}
SHAPES = ("dsv3_gate_up_top1_cf1.25", "mixtral_8x7b_gate_up_uniform")


#: The bf16 launches a sweep can time (``--kinds``).
KINDS = frozenset({"fwd", "dgrad", "wgrad"})


def _time(label: str, name: str, fn, flop: float, mrt: float) -> tuple:
    try:
        ms, _ = time_ms(fn, mrt)
    except Exception as exc:  # a config that does not compile is a result, not a crash
        print(f"# {label} {name}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
        ms = float("nan")
    return (label, name, ms, tflops(flop, ms))


def _pick(candidates: dict[str, TileConfig], only: tuple[str, ...]) -> dict[str, TileConfig]:
    """The shipped buckets and the candidates whose name holds one of ``only`` (all if empty)."""
    return {
        k: v
        for k, v in candidates.items()
        if not only or k.startswith(("shipped:", "dgrad shipped:")) or any(o in k for o in only)
    }


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
    rows = [_time(label, "dense_cublas", partial(torch.mm, a, b), f, mrt)]
    if hasattr(torch, "_grouped_mm"):  # torch's grouped GEMM on the same routing
        offs = torch.cumsum(lens, 0, dtype=torch.int32)
        wt = w.transpose(-2, -1)
        rows.append(
            _time(label, "torch_grouped_mm", partial(torch._grouped_mm, x, wt, offs=offs), f, mrt)
        )
        if "dgrad" in kinds:
            fn = partial(torch._grouped_mm, dout, w, offs=offs)
            rows.append(_time(label, "dgrad torch_grouped_mm", fn, f, mrt))
        if "wgrad" in kinds:
            fn = partial(torch._grouped_mm, dout.t(), x, offs=offs)
            rows.append(_time(label, "wgrad torch_grouped_mm", fn, f, mrt))
    for name, cfg in _pick(BF16_MM, only).items() if "fwd" in kinds else ():
        rows.append(_time(label, name, partial(grouped_mm, x, w, lens, config=cfg), f, mrt))
    for name, cfg in _pick(BF16_DGRAD, only).items() if "dgrad" in kinds else ():
        fn = partial(grouped_mm, dout, w, lens, b_is_nk=False, config=cfg)
        rows.append(_time(label, name, fn, f, mrt))
    for name, cfg in _pick(BF16_WGRAD, only).items() if "wgrad" in kinds else ():
        fn = partial(grouped_wgrad, dout, x, lens, config=cfg)
        rows.append(_time(label, name, fn, f, mrt))
    if "mixtral" in label and "fwd" in kinds and not only:
        xq = quant_fp8_blockwise_1x128(x)
        wq = quant_weight_128x128(w)
        for name, cfg in FP8_MM.items():
            rows.append(
                _time(label, name, partial(grouped_mm_fp8, xq, wq, lens, config=cfg), f, mrt)
            )
    return rows


def sweep_fp8(label: str, s, mrt: float, device: str = "cuda") -> list[tuple]:
    """The FP8 step's launches one by one, then its GEMM and wgrad buckets' alternatives."""
    case = make_grouped_case(s, 0, device)
    x, w, lens, dout = case.x.detach(), case.w.detach(), case.group_lens, case.dout
    f = 2.0 * s.M * s.N * s.K
    G, N, K = w.shape
    wq = quant_weight_128x128(w, transpose=True)
    xr, xc = quant_fp8_dual_1x128(x, FP8, pad_t_to=GROUP)
    dr, dc = quant_fp8_dual_1x128(dout, FP8, pad_t_to=GROUP)
    wt = Fp8Quantized(wq.data_t, wq.scale_t)
    w_bytes = 2.0 * G * N * K + 2.0 * G * N * K  # bf16 read, two FP8 copies written
    gb = 1e3  # the TFLOPS column holds GB/s for the passes: bytes * 1e3 / (ms * 1e12)

    def dual_bytes(rows: int, cols: int) -> float:
        return 2.0 * rows * cols + 2.0 * rows * cols  # bf16 read, rows and columns written

    rows = [
        _time(
            label,
            "pass_weight_quant_t (GB/s)",
            partial(quant_weight_128x128, w, transpose=True),
            w_bytes * gb,
            mrt,
        ),
        _time(
            label,
            "pass_dual_x (GB/s)",
            partial(quant_fp8_dual_1x128, x, FP8, pad_t_to=GROUP),
            dual_bytes(s.M, K) * gb,
            mrt,
        ),
        _time(
            label,
            "pass_dual_dout (GB/s)",
            partial(quant_fp8_dual_1x128, dout, FP8, pad_t_to=GROUP),
            dual_bytes(s.M, N) * gb,
            mrt,
        ),
        _time(label, "gemm_fwd", partial(grouped_mm_fp8, xr, wq, lens, b_is_nk=True), f, mrt),
        _time(label, "gemm_dgrad", partial(grouped_mm_fp8, dr, wt, lens, b_is_nk=True), f, mrt),
        _time(label, "gemm_wgrad", partial(grouped_wgrad_fp8, dc, xc, lens), f, mrt),
    ]
    for name, cfg in FP8_MM_MORE.items():
        fn = partial(grouped_mm_fp8, xr, wq, lens, b_is_nk=True, config=cfg)
        rows.append(_time(label, f"fwd {name}", fn, f, mrt))
        fn = partial(grouped_mm_fp8, dr, wt, lens, b_is_nk=True, config=cfg)
        rows.append(_time(label, f"dgrad {name}", fn, f, mrt))
    _, xg = quant_fp8_dual_1x128_grouped(x, lens, FP8)
    _, dg = quant_fp8_dual_1x128_grouped(dout, lens, FP8)
    fn = partial(quant_fp8_dual_1x128_grouped, dout, lens, FP8)
    rows.append(_time(label, "pass_dual_dout_grouped (GB/s)", fn, dual_bytes(s.M, N) * gb, mrt))
    for name, cfg in FP8_WGRAD.items():
        ops = (dg, xg) if cfg.group_chunks else (dc, xc)
        fn = partial(grouped_wgrad_fp8, *ops, lens, config=cfg, group_chunks=cfg.group_chunks)
        if cfg.gluon_ws and not wgrad_ws.supported(dg, xg, lens.shape[0], torch.bfloat16):
            continue  # where the kernel does not apply, no row
        if cfg.gluon_ws:
            kw = dict(block_n=cfg.BLOCK_N, stages=cfg.num_stages, group_m=cfg.GROUP_M)
            fn = partial(wgrad_ws.grouped_wgrad_fp8_ws, dg, xg, lens, **kw)
        rows.append(_time(label, name, fn, f, mrt))
    return rows


def sweep_dual(mrt: float) -> list[tuple]:
    """Dual quantization num_warps (GB/s in the TFLOPS column: bytes read + written / time)."""
    rows = []
    for R, C in ((8192, 7168), (65536, 2048)):
        x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
        nbytes = 4.0 * R * C + 4.0 * (R * -(-C // 128) + C * -(-R // 128))
        for nw in (4, 8, 16):
            fn = partial(quant_fp8_dual_1x128, x, num_warps=nw)
            rows.append(_time(f"dual_{R}x{C}", f"num_warps={nw}", fn, nbytes * 1e3, mrt))
        copy_ms, _ = time_ms(x.clone, mrt)
        rows.append((f"dual_{R}x{C}", "copy_bf16", copy_ms, 4.0 * R * C / copy_ms / 1e6))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "."))
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
        help="bf16 candidates whose name holds one of these, comma-separated (shipped kept)",
    )
    args = p.parse_args(argv)
    only = tuple(o for o in args.only.split(",") if o)
    kinds = frozenset(k for k in args.kinds.split(",") if k)
    if not kinds or kinds - KINDS:
        p.error(f"--kinds takes some of {sorted(KINDS)}, got {args.kinds!r}")
    print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), flush=True)
    labels = [x for x in args.shapes.split(",") if x]
    known = {s.label: s for s in [*moe_shapes(), *moe_offlist(), *moe_stress()]}
    missing = [x for x in labels if x not in known]
    if missing:
        p.error(f"unknown shape(s) {missing}: see kernel_ratchet.kernels.grouped_gemm.shapes")
    sweep = sweep_fp8 if args.fp8 else partial(sweep_shape, kinds=kinds, only=only)
    rows = []
    for label in labels:
        new = sweep(label, known[label], args.min_run_time)
        torch.cuda.empty_cache()
        for r in new:
            print(f"{r[0]:30s} {r[1]:22s} {r[2]:8.3f} ms {r[3]:7.1f} TFLOPS", flush=True)
        rows += new
    new = [] if args.fp8 or "fwd" not in kinds or only else sweep_dual(args.min_run_time)
    for r in new:
        print(f"{r[0]:30s} {r[1]:22s} {r[2]:8.3f} ms {r[3]:7.1f} GB/s", flush=True)
    rows += new
    with open(os.path.join(args.out, "sweep.csv"), "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["shape", "config", "ms", "TFLOPS"])
        out.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
