"""Tunables of the dense GEMM kernels: named shape buckets -> launch configuration.

This is the file a campaign's config-only rounds edit (``ratchet.yaml: tunables``). There is no
runtime autotuning on the default path: :func:`bucket_for` maps a problem to a bucket name by
explicit thresholds, and ``CONFIGS[kind][bucket]`` is the configuration used. A run that wants
another configuration passes one explicitly (``config=`` in :mod:`.kernel`), which is how the
CPU tests use tiny blocks and how ``tune_h200.py`` sweeps.

Kinds: ``"bf16"`` (bf16/fp16 operands), ``"fp8"`` (tensorwise and rowwise scaling, scales in
the epilogue) and ``"fp8_block"`` (1x128 / 128x128 scaling, scales applied per k-block, so
``BLOCK_K`` must be 128).

Each bucket is measured on the H200 with the sweep in ``kernel_ratchet/kernels/gemm/tune_h200.py``;
the comment next to a config says what was swept and what it bought.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class GemmConfig:
    """One launch configuration.

    Structural switches (each a ``tl.constexpr`` in the kernel):
        persistent: one program per SM looping over output tiles (else one program per tile).
        use_tma: load tiles with TMA tensor descriptors (``tl.make_tensor_descriptor``); the
            launcher falls back to pointer loads when a stride is not 16-byte aligned.
        group_m: grouped-M swizzle of the tile order (L2 reuse of the B panel); 1 = row-major.
        split_k: number of K slices reduced with fp32 atomics (for small M*N with long K).
    """

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    persistent: bool = False
    use_tma: bool = False
    split_k: int = 1

    def with_(self, **kw: object) -> GemmConfig:
        """A copy with some fields changed (used by sweeps and tests)."""
        return replace(self, **kw)  # type: ignore[arg-type]


#: Bucket thresholds. ``tiny``: M*N under this many outputs (odd/test shapes, launch-bound).
TINY_OUTPUTS = 128 * 128 * 16
#: ``skinny``: M (or N) at most this, too few tiles to fill 132 SMs with 128x256 tiles.
SKINNY_DIM = 256
#: ``long_k``: at most this many 128x128 output tiles with K at least 4x M and N -> split-K.
LONG_K_TILES = 132


def bucket_for(M: int, N: int, K: int) -> str:
    """The named bucket of an ``[M, K] x [K, N]`` problem (output ``M x N``, contraction ``K``).

    ``tiny``    fewer than :data:`TINY_OUTPUTS` outputs (tests, odd shapes, decode);
    ``long_k``  few output tiles and a contraction at least 4x longer than M and N;
    ``skinny``  M or N at most :data:`SKINNY_DIM`;
    ``large``   everything else (all model shapes: M >= 4096).
    """
    if M * N < TINY_OUTPUTS:
        return "long_k" if 4 * max(M, N) <= K and K >= 4096 else "tiny"
    tiles = -(-M // 128) * -(-N // 128)
    if tiles <= LONG_K_TILES and 4 * max(M, N) <= K:
        return "long_k"
    if min(M, N) <= SKINNY_DIM:
        return "skinny"
    return "large"


CONFIGS: dict[str, dict[str, GemmConfig]] = {
    "bf16": {
        # 128x256x64, 8 warps, 3 stages: the classic Hopper wgmma tile for 16-bit (two
        # warpgroups each own 64x256 of the accumulator); baseline before the H200 sweep.
        "large": GemmConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        "skinny": GemmConfig(64, 128, 64, group_m=8, num_warps=4, num_stages=4),
        "long_k": GemmConfig(64, 128, 64, group_m=8, num_warps=4, num_stages=4, split_k=4),
        "tiny": GemmConfig(64, 64, 64, group_m=8, num_warps=4, num_stages=3),
    },
    "fp8": {
        # K tile doubles for fp8 (same bytes per stage as bf16 at BLOCK_K=64).
        "large": GemmConfig(128, 256, 128, group_m=8, num_warps=8, num_stages=3),
        "skinny": GemmConfig(64, 128, 128, group_m=8, num_warps=4, num_stages=4),
        "long_k": GemmConfig(64, 128, 128, group_m=8, num_warps=4, num_stages=4, split_k=4),
        "tiny": GemmConfig(64, 64, 128, group_m=8, num_warps=4, num_stages=3),
    },
    "fp8_block": {
        # BLOCK_K is pinned to the 128-wide scaling group.
        "large": GemmConfig(128, 128, 128, group_m=8, num_warps=8, num_stages=4),
        "skinny": GemmConfig(64, 128, 128, group_m=8, num_warps=4, num_stages=4),
        "long_k": GemmConfig(64, 128, 128, group_m=8, num_warps=4, num_stages=4, split_k=4),
        "tiny": GemmConfig(64, 64, 128, group_m=8, num_warps=4, num_stages=3),
    },
}


def config_for(kind: str, M: int, N: int, K: int) -> GemmConfig:
    """``CONFIGS[kind][bucket_for(M, N, K)]``; raises KeyError naming the known kinds."""
    if kind not in CONFIGS:
        raise KeyError(f"unknown GEMM kind {kind!r}; known: {sorted(CONFIGS)}")
    return CONFIGS[kind][bucket_for(M, N, K)]
