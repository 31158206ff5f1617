"""Sweep of the GEMM configs (structural switches and tiles) on the GPU, with checks.

    python -m kernel_ratchet.kernels.gemm.tune [--out DIR] [--budget-s 200] [--only probes]
    python -m kernel_ratchet.kernels.gemm.tune --only odd   # bf16 tiles on off-grid shapes
    python -m kernel_ratchet.kernels.gemm.tune --only skinny   # the same on 64-256 rows
    python -m kernel_ratchet.kernels.gemm.tune --only decode   # bf16 tiles for decode rows

For each kind and operand layout a short list of candidate configs is checked (SNR of the
output against fp32) and timed with ``triton.testing.do_bench`` (median) on a few model shapes,
next to the vendor kernel on the same shape. Results go to ``DIR/sweep.json`` and a table is
printed last. The winners are copied into :mod:`.configs` by hand, with the numbers in a comment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.testing

from kernel_ratchet.harness.correctness import snr_db
from kernel_ratchet.kernels.benchmarking import output_dir
from kernel_ratchet.kernels.gemm import tune_cases, tune_odd
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK, SCALE_TENSOR
from kernel_ratchet.kernels.gemm.launch import matmul
from kernel_ratchet.kernels.gemm.tune_cases import bench, run_cases
from kernel_ratchet.kernels.quant.launch import (
    quant_fp8_block_128x128,
    quant_fp8_blockwise_1x128,
    quant_fp8_tensorwise,
)

C = GemmConfig
SHAPES = [(4096, 6144, 4096), (8192, 28672, 4096), (8192, 4096, 14336)]
BF16 = [
    C(128, 256, 64, num_warps=8, num_stages=3),
    C(128, 256, 64, num_warps=8, num_stages=4),
    C(128, 256, 64, num_warps=8, num_stages=3, use_tma=True),
    C(128, 256, 64, num_warps=8, num_stages=4, use_tma=True, persistent=True),
    C(256, 128, 64, num_warps=8, num_stages=3),
    C(128, 128, 64, num_warps=4, num_stages=4),
    C(128, 256, 64, num_warps=8, num_stages=3, persistent=True),
    C(128, 128, 64, num_warps=8, num_stages=4, use_tma=True),
]
FP8 = [
    C(128, 256, 128, num_warps=8, num_stages=3),
    C(128, 256, 128, num_warps=8, num_stages=4),
    C(128, 256, 128, num_warps=8, num_stages=3, use_tma=True),
    C(128, 256, 128, num_warps=8, num_stages=4, use_tma=True, persistent=True),
    C(256, 128, 128, num_warps=8, num_stages=3),
    C(128, 128, 128, num_warps=4, num_stages=4),
    C(128, 128, 128, num_warps=8, num_stages=5, use_tma=True),
]
FP8_BLOCK = [
    C(128, 128, 128, num_warps=8, num_stages=4),
    C(128, 128, 128, num_warps=4, num_stages=4),
    C(128, 256, 128, num_warps=8, num_stages=3),
    C(128, 128, 128, num_warps=8, num_stages=4, use_tma=True),
    C(128, 256, 128, num_warps=8, num_stages=3, use_tma=True),
    C(128, 128, 128, num_warps=4, num_stages=5, use_tma=True, persistent=True),
    C(64, 128, 128, num_warps=4, num_stages=4),
]


# Second round for blockwise only (--only fp8_block): around the first round's winners.
FP8_BLOCK_2 = [
    C(128, 128, 128, num_warps=8, num_stages=4, use_tma=True, k_unroll=2),
    C(128, 128, 128, num_warps=8, num_stages=3, use_tma=True, k_unroll=2),
    C(128, 256, 128, num_warps=8, num_stages=3, use_tma=True, k_unroll=2),
    C(64, 128, 128, num_warps=4, num_stages=4, use_tma=True, k_unroll=2),
    C(128, 128, 128, num_warps=8, num_stages=4, use_tma=True, persistent=True),
    C(128, 128, 128, num_warps=8, num_stages=5, use_tma=True),
    C(64, 128, 128, num_warps=4, num_stages=4, use_tma=True),
    C(128, 128, 128, num_warps=8, num_stages=4, use_tma=True, persistent=True, k_unroll=2),
]
# Warp specialization of the k-loop (--only probes): the shipped configs with and without it.
WS_BASE = {
    "bf16.fwd": [
        C(128, 256, 64, num_warps=8, num_stages=4, persistent=True, use_tma=True),
        C(128, 256, 64, num_warps=8, num_stages=3, use_tma=True),
    ],
    "fp8.fwd": [C(128, 256, 128, num_warps=8, num_stages=4, persistent=True, use_tma=True)],
    "fp8_block.fwd": [
        C(64, 128, 128, num_warps=4, num_stages=4, use_tma=True),
        C(128, 128, 128, num_warps=8, num_stages=4, use_tma=True),
    ],
}
ONLY: str | None = None


def _versions() -> dict[str, str]:
    try:
        drv = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.max.sm",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        drv = "?"
    return {"torch": torch.__version__, "triton": triton.__version__, "gpu": drv}


def _vendor_blockwise(ba, bb):
    """torch's blockwise FP8 GEMM (cuBLAS 1x128 activations x 128x128 weights) as a callable,
    or None with every refusal printed. The weight's scales are laid out (N/128, K/128) for
    ``b``; the vendor wants them for ``b.t()``, (K/128, N/128) (H200, torch 2.11: "scale_b
    must have shape 32 x 224, got [224, 32]"); each scale is tried in both memory orders."""
    try:
        import torch.nn.functional as F

        BW = F.ScalingType
    except AttributeError as exc:
        print(f"vendor blockwise unavailable: {exc}")
        return None
    errors = []
    for sa in (ba.scale, ba.scale.t().contiguous().t()):
        for sb in (bb.scale.t(), bb.scale.t().contiguous()):
            fn = lambda sa=sa, sb=sb: F.scaled_mm(  # noqa: E731
                ba.data,
                bb.data.t(),
                sa,
                BW.BlockWise1x128,
                sb,
                BW.BlockWise128x128,
                output_dtype=torch.bfloat16,
            )
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - probing which layout the build takes
                errors.append(f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
                continue
            print(f"vendor blockwise: scale_a strides {sa.stride()}, scale_b strides {sb.stride()}")
            return fn
    print("vendor blockwise unavailable: " + " | ".join(dict.fromkeys(errors)))
    return None


def _sweep_shape(
    M: int, N: int, K: int, g: torch.Generator, t0: float, budget_s: float, results: list[dict]
) -> None:
    """Vendor timings and every candidate config on one shape, appended to results."""

    def rnd(*s: int) -> torch.Tensor:
        return torch.randn(*s, device=tune_cases.DEVICE, dtype=torch.bfloat16, generator=g)

    a, b, d = rnd(M, K), rnd(N, K) * K**-0.5, rnd(M, N)
    ref = a.float() @ b.float().t()
    ref_da = d.float() @ b.float()
    ref_db = d.float().t() @ a.float()
    vend = {
        "bf16.fwd": bench(lambda: a @ b.t()),
        "bf16.da": bench(lambda: d @ b),
        "bf16.db": bench(lambda: d.t() @ a),
    }
    qa, qb = quant_fp8_tensorwise(a), quant_fp8_tensorwise(b)
    vend["fp8.fwd"] = bench(
        lambda: torch._scaled_mm(qa.data, qb.data.t(), qa.scale, qb.scale, out_dtype=torch.bfloat16)
    )
    ba = quant_fp8_blockwise_1x128(a)
    bb = quant_fp8_block_128x128(b, with_transpose=True)
    bdt = quant_fp8_blockwise_1x128(d, transpose=True)
    bat = quant_fp8_blockwise_1x128(a, transpose=True)
    fn = _vendor_blockwise(ba, bb)
    if fn is not None:
        vsnr = snr_db(fn(), ref)
        vend["fp8_block.fwd"] = bench(fn)
        print(f"vendor blockwise snr {vsnr:.1f}", flush=True)
    # (kernel under a config, reference) per GEMM; every case list below draws from this
    gemms = {
        "bf16.fwd": (lambda c: matmul(a, b, config=c), ref),
        "bf16.da": (lambda c: matmul(d, b, b_kmajor=False, config=c), ref_da),
        "bf16.db": (lambda c: matmul(d, a, a_kmajor=False, b_kmajor=False, config=c), ref_db),
        "fp8.fwd": (
            lambda c: matmul(
                qa.data,
                qb.data,
                scale_mode=SCALE_TENSOR,
                a_scale=qa.scale,
                b_scale=qb.scale,
                config=c,
            ),
            ref,
        ),
        "fp8_block.fwd": (
            lambda c: matmul(
                ba.data,
                bb.data,
                scale_mode=SCALE_BLOCK,
                a_scale=ba.scale,
                b_scale=bb.scale,
                config=c,
            ),
            ref,
        ),
        "fp8_block.db": (
            lambda c: matmul(
                bdt.data,
                bat.data,
                scale_mode=SCALE_BLOCK,
                a_scale=bdt.scale,
                b_scale=bat.scale,
                b_scale_group_n=1,
                config=c,
            ),
            ref_db,
        ),
    }
    if ONLY == "probes":
        # The same activation scales stored M-major ([K/128, M] in memory, read through the
        # kernel's scale strides): a k-group's BLOCK_M scales become one contiguous load
        # instead of BLOCK_M loads K/128 floats apart.
        sa_mmajor = ba.scale.t().contiguous().t()
        gemms["fp8_block.fwd.sa_mmajor"] = (
            lambda c: matmul(
                ba.data,
                bb.data,
                scale_mode=SCALE_BLOCK,
                a_scale=sa_mmajor,
                b_scale=bb.scale,
                config=c,
            ),
            ref,
        )
        plan = [
            (what, cfg.with_(warp_specialize=ws))
            for what, cfgs in WS_BASE.items()
            for cfg in cfgs
            for ws in (False, True)
        ]
        plan += [("fp8_block.fwd.sa_mmajor", cfg) for cfg in WS_BASE["fp8_block.fwd"]]
    elif ONLY == "fp8_block":
        plan = [(what, cfg) for cfg in FP8_BLOCK_2 for what in ("fp8_block.fwd", "fp8_block.db")]
    else:
        plan = [("bf16.fwd", cfg) for cfg in BF16]
        plan += [(what, cfg) for cfg in BF16[:3] + BF16[4:5] for what in ("bf16.da", "bf16.db")]
        plan += [("fp8.fwd", cfg) for cfg in FP8]
        plan += [("fp8_block.fwd", cfg) for cfg in FP8_BLOCK]
        plan += [("fp8_block.db", cfg) for cfg in FP8_BLOCK[:1] + FP8_BLOCK[2:5]]
    cases = [(what, cfg, *gemms[what]) for what, cfg in plan]
    run_cases(M, N, K, cases, vend, t0, budget_s, results)
    torch.cuda.empty_cache()


def plan(only: str | None) -> tuple[Callable[..., None], list[tuple[int, int, int]]]:
    """The sweep function and the (M, N, K) shapes of an ``--only`` mode (None: the default)."""
    if only == "odd":
        return tune_odd.sweep_shape, tune_odd.ODD_SHAPES + tune_odd.GUARD_SHAPES
    if only == "skinny":
        return tune_odd.sweep_skinny, tune_odd.SKINNY_SHAPES + tune_odd.GUARD_SHAPES
    if only == "decode":
        return tune_odd.sweep_decode, tune_odd.DECODE_SHAPES
    return _sweep_shape, SHAPES[1:] if only else SHAPES


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.environ.get("OUT", "."), type=output_dir)
    p.add_argument("--budget-s", type=float, default=200.0)
    p.add_argument(
        "--only",
        choices=["fp8_block", "probes", "odd", "skinny", "decode"],
        default=None,
        help="second round: blockwise tiles; or probes: warp specialization on/off "
        "and M-major blockwise activation scales; or odd: bf16 tiles and split-K on "
        "off-grid shapes; or skinny: the same tiles on 64 to 256 rows of model widths, and "
        "their weight gradient on the Gluon kernel with one group; or "
        "decode: bf16 tiles for decode rows and small outputs",
    )
    p.add_argument("--smoke", action="store_true", help="CPU interpreter, one tiny shape")
    args = p.parse_args()
    global SHAPES, ONLY
    ONLY = args.only
    sweep, SHAPES = plan(ONLY)
    if args.smoke:
        tune_cases.DEVICE = "cpu"
        SHAPES = [(33, 40, 72) if ONLY in ("odd", "skinny", "decode") else (64, 96, 256)]
    t0 = time.time()
    results: list[dict] = []
    info = _versions()
    print(info, flush=True)
    g = torch.Generator(device=tune_cases.DEVICE).manual_seed(0)
    for M, N, K in SHAPES:
        sweep(M, N, K, g, t0, args.budget_s, results)
        torch.cuda.empty_cache()
    Path(args.out, "sweep.json").write_text(
        json.dumps({"info": info, "results": results}, indent=1)
    )
    _table(results)
    print("\nBY BUCKET (geomean speed vs vendor over the bucket's swept GEMMs)")
    print("\n".join(tune_cases.bucket_table(results)))
    print(f"sweep took {time.time() - t0:.0f} s")


def _table(results: list[dict]) -> None:
    """Best config per (kind, shape) against the vendor."""
    best: dict[tuple, dict] = {}
    vend: dict[tuple, float] = {}
    for r in results:
        key = (r["what"], tuple(r["shape"]))
        if r.get("cfg") == "vendor":
            vend[key] = r["tflops"]
        elif "tflops" in r and (key not in best or r["tflops"] > best[key]["tflops"]):
            best[key] = r
    print("\nBEST per kind/shape (TFLOPS, vs vendor)")
    for key, r in sorted(best.items()):
        v = vend.get(key)
        print(
            f"{key[0]:14s} {key[1]} {r['tflops']:7.1f} vendor {v or 0:7.1f} "
            f"{(r['tflops'] / v) if v else float('nan'):.3f} {r['cfg']}"
        )


if __name__ == "__main__":
    main()
