"""The FP8 step's part of the grouped GEMM sweep (``tune --fp8``): each launch of the FP8
blockwise training step on its own (the weight's quantization with its transposed copy, both
dual quantizations, forward, dgrad, wgrad; TFLOP/s of the GEMMs or GB/s of the passes), then
the FP8 GEMM bucket's alternatives on the forward and the dgrad, and the weight gradient's
(its warp-specialized kernel included). Candidate names: ``f8_*`` GEMM tiles, ``f8wg_*``
weight-gradient tiles, ``shipped:*`` what the step runs now.
"""

from __future__ import annotations

from functools import partial

import torch

from kernel_ratchet.kernels.grouped_gemm import wgrad_fp8_ws_launch as wgrad_ws
from kernel_ratchet.kernels.grouped_gemm.adapter import make_grouped_case
from kernel_ratchet.kernels.grouped_gemm.configs import BUCKETS, WGRAD_FP8_WS, TileConfig
from kernel_ratchet.kernels.grouped_gemm.fp8 import (
    FP8,
    GROUP,
    grouped_mm_fp8,
    grouped_wgrad_fp8,
    quant_weight_128x128,
)
from kernel_ratchet.kernels.grouped_gemm.tune_rows import pick, time_row
from kernel_ratchet.kernels.quant.dual import quant_fp8_dual_1x128
from kernel_ratchet.kernels.quant.dual_grouped import quant_fp8_dual_1x128_grouped
from kernel_ratchet.kernels.quant.launch import Fp8Quantized

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
    # the same with TMA stores (fp8_ws.py's TMA_STORE): each consumer's 64 rows leave through
    # shared memory while it starts the next tile; 32 KiB of output staging beside the ring
    "f8_ws_128x128_s4_st": TileConfig(128, 128, 128, 8, 4, 4, gluon_ws=True, tma_store=1),
    "f8_ws_128x128_s5_st": TileConfig(128, 128, 128, 8, 4, 5, gluon_ws=True, tma_store=1),
}
# wgrad: BLOCK_N x BLOCK_K output tiles (BLOCK_M unused); the token loop steps 128 (the scale)
FP8_WGRAD = {
    # where the warp-specialized config ships, it runs before the bucket where it applies
    **({"shipped:WGRAD_FP8_WS": WGRAD_FP8_WS} if WGRAD_FP8_WS else {}),
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


def sweep_fp8(
    label: str, s, mrt: float, only: tuple[str, ...] = (), device: str = "cuda"
) -> list[tuple]:
    """The FP8 step's launches one by one, then its GEMM and wgrad buckets' alternatives
    (those ``only`` picks, see :func:`.tune_rows.pick`)."""
    case = make_grouped_case(s, 0, device)
    x, w, lens, dout = case.x.detach(), case.w.detach(), case.group_lens, case.dout
    f = 2.0 * s.M * s.N * s.K
    G, N, K = w.shape
    wq = quant_weight_128x128(w, transpose=True)
    xr, xc = quant_fp8_dual_1x128(x, FP8, pad_t_to=GROUP)
    dr, dc = quant_fp8_dual_1x128(dout, FP8, pad_t_to=GROUP)
    wt = Fp8Quantized(wq.data_t, wq.scale_t)
    gb = 1e3  # the TFLOPS column holds GB/s for the passes: bytes * 1e3 / (ms * 1e12)
    passes = {  # name: (call, bytes: bf16 read, two FP8 copies written)
        "pass_weight_quant_t": (partial(quant_weight_128x128, w, transpose=True), 4.0 * G * N * K),
        "pass_dual_x": (partial(quant_fp8_dual_1x128, x, FP8, pad_t_to=GROUP), 4.0 * s.M * K),
        "pass_dual_dout": (partial(quant_fp8_dual_1x128, dout, FP8, pad_t_to=GROUP), 4.0 * s.M * N),
    }
    rows = [
        time_row(label, f"{n} (GB/s)", fn, nbytes * gb, mrt) for n, (fn, nbytes) in passes.items()
    ]
    rows += [
        time_row(label, "gemm_fwd", partial(grouped_mm_fp8, xr, wq, lens, b_is_nk=True), f, mrt),
        time_row(label, "gemm_dgrad", partial(grouped_mm_fp8, dr, wt, lens, b_is_nk=True), f, mrt),
        time_row(label, "gemm_wgrad", partial(grouped_wgrad_fp8, dc, xc, lens), f, mrt),
    ]
    for name, cfg in pick(FP8_MM_MORE, only).items():
        fn = partial(grouped_mm_fp8, xr, wq, lens, b_is_nk=True, config=cfg)
        rows.append(time_row(label, f"fwd {name}", fn, f, mrt))
        fn = partial(grouped_mm_fp8, dr, wt, lens, b_is_nk=True, config=cfg)
        rows.append(time_row(label, f"dgrad {name}", fn, f, mrt))
    _, xg = quant_fp8_dual_1x128_grouped(x, lens, FP8)
    _, dg = quant_fp8_dual_1x128_grouped(dout, lens, FP8)
    fn = partial(quant_fp8_dual_1x128_grouped, dout, lens, FP8)
    rows.append(time_row(label, "pass_dual_dout_grouped (GB/s)", fn, 4.0 * s.M * N * gb, mrt))
    for name, cfg in pick(FP8_WGRAD, only).items():
        ops = (dg, xg) if cfg.group_chunks else (dc, xc)
        fn = partial(grouped_wgrad_fp8, *ops, lens, config=cfg, group_chunks=cfg.group_chunks)
        if cfg.gluon_ws and not wgrad_ws.supported(dg, xg, lens.shape[0], torch.bfloat16):
            continue  # where the kernel does not apply, no row
        if cfg.gluon_ws:
            kw = dict(block_n=cfg.BLOCK_N, stages=cfg.num_stages, group_m=cfg.GROUP_M)
            fn = partial(wgrad_ws.grouped_wgrad_fp8_ws, dg, xg, lens, **kw)
        rows.append(time_row(label, name, fn, f, mrt))
    return rows
