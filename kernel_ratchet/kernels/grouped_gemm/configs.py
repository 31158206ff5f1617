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
    split_tail: bool = True


# Interpreter (CPU tests): the smallest tiles tl.dot accepts keep the CPU suite fast.
INTERP = TileConfig(32, 16, 16, GROUP_M=2, num_warps=1, num_stages=1)
INTERP_FP8 = TileConfig(32, 16, 128, GROUP_M=2, num_warps=1, num_stages=1)

# H200 buckets. Starting points from Hopper bf16 GEMM practice (128x256x64, 8 warps, 3 stages
# keeps two wgmma warpgroups busy at ~200 KB shared memory); swept in tune_h200.py, results and
# the reason for each choice in docs/benchmarks.md.
BUCKETS: dict[str, TileConfig] = {
    # forward / dgrad, many rows per group: large tiles, few wasted rows.
    "bf16_mm_large": TileConfig(128, 256, 64, GROUP_M=8, num_warps=8, num_stages=3),
    # forward / dgrad, few rows per group (<= 192 on average): a 64-row tile wastes fewer rows
    # of the partial last tile of every group.
    "bf16_mm_small": TileConfig(
        64, 256, 64, GROUP_M=4, num_warps=4, num_stages=4, split_tail=False
    ),
    # wgrad: output tile over (N, K), reduction over the group's rows.
    "bf16_wgrad": TileConfig(64, 128, 128, GROUP_M=1, num_warps=8, num_stages=3),
    "fp8_mm_large": TileConfig(128, 128, 128, GROUP_M=8, num_warps=8, num_stages=4),
    "fp8_mm_small": TileConfig(
        64, 128, 128, GROUP_M=4, num_warps=4, num_stages=4, split_tail=False
    ),
    "fp8_wgrad": TileConfig(128, 128, 128, GROUP_M=1, num_warps=8, num_stages=3),
}

#: Average rows per group at or below which the "small" bucket is used.
SMALL_GROUP_ROWS = 192


def select(kind: str, dtype: str, avg_rows: float, interpret: bool) -> TileConfig:
    """Pick the bucket for ``kind`` in {"mm", "wgrad"} and ``dtype`` in {"bf16", "fp8"}.

    ``avg_rows`` is total rows / number of groups (host-known shapes only).
    """
    if interpret:
        return INTERP_FP8 if dtype == "fp8" else INTERP
    if kind == "wgrad":
        return BUCKETS[f"{dtype}_wgrad"]
    size = "small" if avg_rows <= SMALL_GROUP_ROWS else "large"
    return BUCKETS[f"{dtype}_mm_{size}"]
