"""Tile configurations of the grouped GEMM kernels: named buckets, no runtime autotuning.

A bucket is picked from what the launcher knows without reading device data: the kernel kind
(forward / dgrad / wgrad), the operand dtype, whether the kernels run in the Triton interpreter
and the *average* rows per group (total rows / groups, both known from tensor shapes, so no
host synchronization). Change a bucket only with a measured reason written next to it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TileConfig:
    """One kernel configuration. BLOCK_K of the FP8 kernels must be 128 (the scale block)."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    #: Run a half-height tile for a group's last tile when it has <= BLOCK_M / 2 valid rows.
    #: Off by default: on an H200 (tune.py) 128x256x64 ran 402 TFLOPS with
    #: it vs 435 without on dsv3_gate_up_top1_cf1.25 (where it should help most) and 496 vs
    #: 616 on mixtral_8x7b_gate_up_uniform: the second pipeline costs more than the saved rows.
    split_tail: bool = False
    #: Forward and dgrad (persistent grids): programs launched per SM. One fills an SM with a
    #: 128x256 or 128x128 tile of 8 warps; with a one-warpgroup tile a second program per SM
    #: (registers and shared memory allowing) can run its MMAs while the first scales its FP8
    #: partial product. Each tile is computed the same whatever the count.
    programs_per_sm: int = 1
    #: FP8 forward and dgrad: run the warp-specialized Gluon kernel (:mod:`.fp8_ws`: a TMA
    #: producer warp, two consumer warpgroups, paired k-groups) where it applies, with
    #: BLOCK_N, GROUP_M and num_stages from this config (BLOCK_M is its fixed 128, num_warps
    #: its fixed layout); elsewhere the Triton kernel with this config. bf16 forward and
    #: dgrad: the Gluon kernel of :mod:`.mm_ws` (see :data:`MM_WS`, :data:`DGRAD_WS`). bf16
    #: wgrad: the warp-specialized Gluon kernel of :mod:`kernel_ratchet.kernels.gemm.wgrad_ws`
    #: (tiles of 128 rows of N by BLOCK_K columns, bands of GROUP_M n tiles, num_stages),
    #: where it applies (N a multiple of 128, aligned rows); see :data:`WGRAD_WS`.
    gluon_ws: bool = False
    #: Forward and dgrad: load tiles through TMA descriptors (no split tail) where the
    #: operands allow it (rows contiguous and 16-byte aligned, the weight one stack; bf16
    #: dgrad: K a multiple of BLOCK_K; FP8: a K-major weight); elsewhere pointer loads.
    #: bf16 wgrad: through descriptors over each group's rows (rows contiguous, aligned);
    #: FP8 wgrad: the 128-token chunks through descriptors (aligned bases).
    use_tma: bool = False
    #: FP8 wgrad: the step quantizes x's and dout's columns in 128-token chunks that start at
    #: each group's first token (:mod:`kernel_ratchet.kernels.quant.dual_grouped`), so no chunk
    #: holds two groups' tokens: no token mask, no neighbour's partial chunk to walk.
    group_chunks: bool = False
    #: bf16 forward and dgrad (no split tail), and the bf16 wgrad with ``persistent``: one
    #: software pipeline over every (tile, reduction step) of a persistent program, so a tile's
    #: epilogue overlaps the next tile's loads. On bf16_mm_large a campaign rolled it back: step
    #: 1.0015x [0.9934, 1.0080], +1.6-2% on Qwen3-30B-A3B down, -1-2% on Mixtral down skewed
    #: (campaigns/grouped_gemm_bf16_moe/flatten).
    flatten: bool = False
    #: bf16 GEMMs with TMA loads: how an output tile is written: 0 masked pointer stores; 1 one
    #: TMA store; 2 two TMA stores of half the tile's columns (half the staging memory). The
    #: forward and dgrad store so only a tile whose rows all lie in its group (a group's
    #: partial last tile keeps the masked stores), and not with ``flatten`` (triton 3.6 cannot
    #: fuse the loops around that conditional store); the wgrad where N is a tile multiple.
    #: FP8 forward and dgrad on the Gluon kernel (``gluon_ws``): 1 or 2 store each consumer
    #: warpgroup's 64 rows by TMA, through a descriptor over its group's rows (the TMA unit
    #: clips the rows past the group), where the output's rows are 16-byte aligned.
    tma_store: int = 0
    #: bf16 wgrad: ``programs_per_sm`` programs per SM walk the (group, n tile, k tile) list
    #: instead of one program per tile.
    persistent: bool = False
    #: bf16 wgrad, the Gluon kernel: its persistent programs walk the groups by decreasing row
    #: count (sorted on the device) rather than by index, so their round-robin share of the
    #: tiles ends on short ones (``schedule.wgrad_fill(..., round_robin=True, order=...)``
    #: models it: OLMoE down Zipf-1.2 0.76 -> 0.92). Shipped by no config: on an H200
    #: (tune --kinds wgrad --only lpt) OLMoE down Zipf-1.2 485 -> 531 TFLOPS, Qwen3-235B
    #: gate/up Zipf-1.2 544 -> 510.
    longest_first: bool = False

    def __post_init__(self) -> None:
        if self.programs_per_sm < 1:
            raise ValueError(f"programs_per_sm must be at least 1, got {self.programs_per_sm}")
        if self.tma_store not in (0, 1, 2):
            raise ValueError(f"tma_store must be 0, 1 or 2, got {self.tma_store}")


# Interpreter (CPU tests): its cost is per program (Python per tile), not per element, so
# 64-wide tiles run the CPU tests about 3x faster than 16-wide ones (a tiny wgrad launched
# 1008 programs, now 84); the odd test shapes still leave partial tiles on every axis.
# split_tail stays on in the interpreter so the CPU tests keep that path correct.
INTERP = TileConfig(64, 64, 64, GROUP_M=2, num_warps=1, num_stages=1, split_tail=True)
INTERP_FP8 = TileConfig(64, 64, 128, GROUP_M=2, num_warps=1, num_stages=1, split_tail=True)

# Hopper buckets. Starting points from Hopper bf16 GEMM practice, then swept with tune.py on an
# H200 (torch 2.11, triton 3.6, torch.utils.benchmark median):
#   forward, dsv3_gate_up_top1_cf1.25 / mixtral_8x7b_gate_up_uniform, TFLOPS:
#     128x256x64 w8 s3 435 / 616 | 128x128x64 w8 s4 (split) 317 / 492 |
#     64x256x64 w4 s4 363 / 453 | dense cuBLAS same FLOPs 689 / 706
#   bf16 forward / dgrad, qwen3_235b gate_up uniform and mixtral down skewed, TFLOPS:
#     128x256x64 w8 s4 TMA loads 705 / 777 forward (chosen; a campaign round accepted it at
#     1.11x on the step) | the same with pointer loads, 3 stages 651 / 658, its dgrad 510 / 517
#     (255 registers) against 687 / 687 with TMA loads | dense cuBLAS 673 / 697
#   wgrad (mixtral uniform): 64x128x128 w8 s3 495 | 128x128x64 w8 s4 378
#   bf16 wgrad, qwen3_235b gate_up uniform / mixtral down skewed, TFLOPS: 64x128x128 w8 s3
#     with per-group TMA descriptors 402 / 487 (chosen; a campaign round accepted it at 1.04x
#     on the step) | the same with pointer loads 375 / 411 | 4 stages, TMA 307 / 381 |
#     64x256x128 w8 s3, TMA 413 / 531 (not yet through a campaign)
#   fp8 forward / dgrad (tune.py --fp8; qwen3_235b gate_up uniform, olmoe gate_up
#     one-hot-heavy, mixtral down skewed), forward TFLOPS: the warp-specialized Gluon kernel
#     128x128, 4 stages 878 / 711 / 888, dgrad 824 / 677 / 824 (chosen; a campaign round
#     accepted it at 1.29x on the step) | Triton 128x128x128 w8 s4 513 / 452 / 528 |
#     64x128x128 w4 s4, 2 programs per SM, TMA 721 / 653 / 768 | 128x256x128 w8 s3 331 / 299 / 355
#   fp8 wgrad (tune.py --fp8; qwen3_235b gate_up uniform / olmoe gate_up one-hot-heavy /
#     mixtral down skewed), TFLOPS: 64x128 w4 s3 333 / 368 / 384 (chosen; campaign rounds
#     accepted 64x128 w4 s4 at 1.16x on the step over 128x128 w8 s3, then 3 stages at
#     1.008x) | 64x128 w4 s4 322 / 362 / 360 | 128x128 w8 s3 249 / 262 / 247 (255 registers,
#     spilled) | 128x64 w4 s4 237 / 239 / 273 | 128x256 w8 s3 235 / 230 / 215
# The "small" buckets (average <= SMALL_GROUP_ROWS rows per group) were not timed at such
# shapes; at 225 rows per group the large tile already beat the 64-row one by 20%.
BUCKETS: dict[str, TileConfig] = {
    # forward / dgrad, many rows per group: large tiles, few wasted rows.
    "bf16_mm_large": TileConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=4, use_tma=True),
    # forward / dgrad, few rows per group (<= 192 on average): a 64-row tile wastes fewer rows
    # of the partial last tile of every group.
    "bf16_mm_small": TileConfig(
        64, 256, 64, GROUP_M=4, num_warps=4, num_stages=4, split_tail=False
    ),
    # wgrad: output tile over (N, K) = BLOCK_N x BLOCK_K, reduction over the group's rows in
    # steps of BLOCK_M. 128x256 through TMA: 426 / 552 TFLOP/s against 405 / 497 for 128x128
    # (tune, Qwen3-235B gate/up uniform / Mixtral down skewed).
    "bf16_wgrad": TileConfig(64, 128, 256, GROUP_M=1, num_warps=8, num_stages=3, use_tma=True),
    # wgrad, few rows per group (<= SMALL_WGRAD_ROWS on average): a short reduction, so a
    # 128x128 tile of one warpgroup stepping 32 rows, small enough for several programs per SM.
    # tune, ms, shipped 128x256 -> this: DeepSeek-V3 gate/up uniform 13.82 -> 11.39, Qwen3-30B
    # gate/up 1.003 -> 0.940, Qwen3-235B gate/up 4.01 -> 3.79, OLMoE down 0.537 -> 0.517;
    # Mixtral down skewed (2048 rows per group) 3.36 -> 3.58, so not there.
    "bf16_wgrad_small": TileConfig(
        32, 128, 128, GROUP_M=1, num_warps=4, num_stages=3, use_tma=True
    ),
    # the Gluon kernel ignores num_warps; 8 is the Triton tile's where it does not apply
    "fp8_mm_large": TileConfig(
        128, 128, 128, GROUP_M=8, num_warps=8, num_stages=4, gluon_ws=True, tma_store=1
    ),
    "fp8_mm_small": TileConfig(
        64, 128, 128, GROUP_M=4, num_warps=4, num_stages=4, split_tail=False
    ),
    # each group's own 128-token chunks (no token mask, no chunk shared by two groups), TMA:
    # 3.92 / 1.05 / 3.19 ms against 4.98 / 1.48 / 5.02 in the shared chunks (tune --fp8,
    # Qwen3-235B gate/up uniform / OLMoE one-hot-heavy / Mixtral down skewed).
    "fp8_wgrad": TileConfig(
        128, 64, 128, GROUP_M=1, num_warps=4, num_stages=3, use_tma=True, group_chunks=True
    ),
}

#: The bf16 weight gradient's warp-specialized config
#: (:mod:`kernel_ratchet.kernels.gemm.wgrad_ws`), taken before the wgrad buckets wherever
#: that kernel applies (an sm_90 GPU, N a multiple of 128, aligned rows); None: the buckets'
#: Triton kernel everywhere. 128 x 256 tiles, 3 stages, bands of 16 n tiles: against
#: torch._grouped_mm's weight gradient 0.95-1.14x on thirteen layers, where the Triton buckets
#: ran 0.79-1.08x (tune --kinds wgrad --only ws, the table in docs/grouped-gemm.md); a
#: campaign accepted it at 1.0655x on the step (campaigns/grouped_gemm_bf16_moe/wgrad-ws).
WGRAD_WS: TileConfig | None = TileConfig(
    64, 128, 256, GROUP_M=16, num_warps=8, num_stages=3, gluon_ws=True
)

#: The FP8 weight gradient's warp-specialized config (:mod:`.wgrad_fp8_ws`: ``BLOCK_N``
#: columns of K per tile, ``num_stages`` chunks in flight, ``GROUP_M`` bands of n tiles),
#: taken before the ``fp8_wgrad`` bucket wherever that kernel applies (an sm_90 GPU, each
#: group's own chunks, N a multiple of 128); None: the bucket's Triton kernel everywhere. A
#: campaign accepted 5 stages at 1.1505x on the FP8 step
#: (campaigns/grouped_gemm_fp8_blockwise_moe/wgrad-ws-fp8).
WGRAD_FP8_WS: TileConfig | None = TileConfig(
    128, 128, 128, GROUP_M=8, num_warps=4, num_stages=5, gluon_ws=True
)

#: The bf16 forward's warp-specialized config (:mod:`.mm_ws`: 128-row tiles of BLOCK_N
#: columns, GROUP_M bands of row tiles, num_stages), taken before the ``bf16_mm_large``
#: bucket wherever that kernel applies (an sm_90 GPU, aligned rows); None: the buckets'
#: Triton kernel everywhere.
MM_WS: TileConfig | None = None
#: The same for the bf16 dgrad (the kernel also needs its contraction, the forward's N, a
#: multiple of 64): a config of its own, as the two kinds rank the configs differently.
DGRAD_WS: TileConfig | None = None


#: Average rows per group at or below which the "small" bucket is used.
SMALL_GROUP_ROWS = 192
#: Average rows per group at or below which the bf16 weight gradient takes its "small" bucket.
SMALL_WGRAD_ROWS = 1024


def select(kind: str, dtype: str, avg_rows: float, interpret: bool) -> TileConfig:
    """Pick the bucket for ``kind`` in {"mm", "wgrad"} and ``dtype`` in {"bf16", "fp8"}.

    ``avg_rows`` is total rows / number of groups (host-known shapes only).
    """
    if interpret:
        return INTERP_FP8 if dtype == "fp8" else INTERP
    if kind == "wgrad":
        small = dtype == "bf16" and avg_rows <= SMALL_WGRAD_ROWS
        return BUCKETS[f"{dtype}_wgrad_small" if small else f"{dtype}_wgrad"]
    size = "small" if avg_rows <= SMALL_GROUP_ROWS else "large"
    return BUCKETS[f"{dtype}_mm_{size}"]
