"""Tunables of the dense GEMM kernels: named shape buckets -> launch configuration.

This is the file a campaign's config-only rounds edit (``ratchet.yaml: tunables``). There is no
runtime autotuning on the default path: :func:`bucket_for` maps a problem to a bucket name by
explicit thresholds, and ``CONFIGS[kind][bucket]`` is the configuration used. A run that wants
another configuration passes one explicitly (``config=`` in :mod:`.launch`), which is how the CPU
tests use tiny blocks and how ``tune.py`` sweeps.

Kinds: ``"bf16"`` (bf16/fp16 forward), ``"bf16_bwd"`` (the two backward GEMMs, whose operands are
not both K-major), ``"fp8"`` (tensorwise and rowwise scaling, scales in the epilogue) and
``"fp8_block"`` (1x128 / 128x128 scaling, scales applied per k-block, so ``BLOCK_K`` must be 128).

Buckets were chosen by timing candidates with ``python -m kernel_ratchet.kernels.gemm.tune``
(H200, torch 2.11, triton 3.6); each config's comment says what was swept and what it bought.
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
        split_k: the most K slices reduced with fp32 atomics. A bucket's config is an upper
            bound: the launcher splits only a grid that fills less than half the SMs, into as
            many slices as fill one wave (:func:`split_for`). An explicit config is exact. A
            split runs one program per (tile, slice): ``persistent`` does not apply to it.
        k_unroll: blockwise only: 128-wide k-groups per loop iteration (1 or 2); 2 issues two
            wgmmas before the scaled accumulation waits on them.
        col_parts: blockwise warp-specialized kernel only: 4 takes each k-group as four column
            quarters of ``block_n`` (two in flight with ``k_unroll`` 2, else one), so a
            256-column tile fits the registers of a 128-column one; 1 (every shipped bucket)
            takes it whole.
        warp_specialize: Triton's warp specialization of the k-loop (load and MMA partitions).
            H200, ``tune --only probes``: ±5-10% on the dense kernels by shape, −40% on the
            shipped blockwise tile; no shipped entry and no search value uses it.
        flatten: persistent only: the tile loop and the k-loop are software-pipelined as one
            (``tl.range(..., flatten=True)``), so a tile's epilogue overlaps the next tile's
            first loads instead of draining the pipeline once per tile.
        tma_store: how an output tile is written: 0 masked pointer stores from registers; 1
            through shared memory with one TMA store; 2 the same in two halves of ``block_n``
            (half the staging memory). The launcher keeps 0 where TMA does not apply (pointer
            loads, split-K, output rows not 16-byte aligned).
        stream_k: 16-bit operands only: the k-iterations of all tiles split evenly over at most
            one program per SM (:mod:`.kernel_streamk`), partial tiles summed through an fp32
            workspace; ``persistent``, ``flatten`` and ``split_k`` do not apply. On the
            default path a problem of too few tiles for it (:data:`STREAM_K_MAX_SHARE`) runs
            the bucket's :data:`SPLIT_K_INSTEAD` config.
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
    k_unroll: int = 1
    col_parts: int = 1
    warp_specialize: bool = False
    flatten: bool = False
    tma_store: int = 0
    stream_k: bool = False

    def with_(self, **kw: object) -> GemmConfig:
        """A copy with some fields changed (used by sweeps and tests)."""
        return replace(self, **kw)  # type: ignore[arg-type]


#: Bucket thresholds. ``tiny``: M*N under this many outputs (odd/test shapes, launch-bound).
TINY_OUTPUTS = 128 * 128 * 16
#: ``skinny``: M (or N) at most this, too few tiles to fill 132 SMs with 128x256 tiles.
SKINNY_DIM = 256
#: ``long_k``: at most this many 128x128 output tiles with K at least 4x M and N -> split-K.
LONG_K_TILES = 132
#: ``medium``: the large bucket's 128x256 tiles would use less than this fraction of the
#: SM-time of their waves (a 1000 x 1000 output is 32 such tiles: 0.24 of 132 SMs).
MEDIUM_WAVE_EFFICIENCY = 0.75
#: Split-K keeps at least this many k-blocks per slice (the pipeline's stages need them).
MIN_K_TILES_PER_SPLIT = 4
#: Stream-K runs where each output tile is shared by at most this many programs: a tile's
#: finisher adds the partials of the programs before it one after another, so a 128 x 128
#: output over 132 programs took 0.21 ms against split-K's 0.03 (H200, ``tune --only odd``).
STREAM_K_MAX_SHARE = 8
#: SMs the buckets assume when the caller does not say (H200).
DEFAULT_SMS = 132


def bucket_for(M: int, N: int, K: int, sms: int = DEFAULT_SMS) -> str:
    """The named bucket of an ``[M, K] x [K, N]`` problem (output ``M x N``, contraction ``K``).

    ``tiny``    fewer than :data:`TINY_OUTPUTS` outputs (tests, odd shapes, decode);
    ``long_k``  few output tiles and a contraction at least 4x longer than M and N;
    ``skinny``  M or N at most :data:`SKINNY_DIM`;
    ``medium``  128x256 tiles would fill their waves of ``sms`` programs below
                :data:`MEDIUM_WAVE_EFFICIENCY` (outputs of about 1000 x 1000 to 1000 x 5000);
    ``large``   everything else (all model shapes: M >= 4096).
    """
    if M * N < TINY_OUTPUTS:
        return "long_k" if 4 * max(M, N) <= K and K >= 4096 else "tiny"
    tiles = -(-M // 128) * -(-N // 128)
    if tiles <= LONG_K_TILES and 4 * max(M, N) <= K:
        return "long_k"
    if min(M, N) <= SKINNY_DIM:
        return "skinny"
    big = -(-M // 128) * -(-N // 256)
    if big / (-(-big // sms) * sms) < MEDIUM_WAVE_EFFICIENCY:
        return "medium"
    return "large"


def ws_mode(cfg: GemmConfig) -> int:
    """The warp-specialized blockwise kernel's MODE for a config: with four column parts, 2
    (two in flight, ``k_unroll`` 2) or 3; else 1 (paired k-groups, ``k_unroll`` 2) or 0."""
    return (2 if cfg.k_unroll == 2 else 3) if cfg.col_parts == 4 else cfg.k_unroll - 1


def split_for(cfg: GemmConfig, tiles: int, k_tiles: int, sms: int) -> int:
    """K slices of a bucket's config: 1 unless ``tiles`` programs fill less than half of the
    ``sms``; then as many as fit one wave, at most ``cfg.split_k``, each with at least
    :data:`MIN_K_TILES_PER_SPLIT` k-blocks."""
    if cfg.split_k <= 1 or 2 * tiles > sms:
        return 1
    return max(1, min(cfg.split_k, sms // max(tiles, 1), k_tiles // MIN_K_TILES_PER_SPLIT))


#: The long-K bucket's stream-K tile (GemmConfig fields).
_STREAM_K = dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, use_tma=True,
                 tma_store=2, stream_k=True)  # fmt: skip
#: A flattened persistent pipeline with a TMA-stored epilogue in two halves (GemmConfig fields).
_FLAT_STORE = {"flatten": True, "tma_store": 2}

# Sweep on an H200 (tune.py, do_bench median, torch 2.11, triton 3.6; shapes 4096x6144x4096,
# 8192x28672x4096, 8192x4096x14336; TFLOPS listed in that order, vendor in brackets).
CONFIGS: dict[str, dict[str, GemmConfig]] = {
    # Forward a @ bᵀ (both operands K-major).
    "bf16": {
        # TMA + persistent + 4 stages: 763 / 809 / 764 [cuBLAS 807 / 727 / 782]. Pointer loads
        # with the same tile: 590-593; TMA non-persistent: 617-660; 256x128 pointer: 646-662.
        # One pipeline over every (tile, k-block) of a program, tiles stored by TMA in halves:
        # the step on 4097 x 3000 x 2000 +12.5% [+11.0%, +13.3%], model shapes unchanged, in a
        # paired A/B of 8 shapes (campaigns/gemm_bf16_odd, round 3; `tune --only odd`: forward
        # 0.63 -> 0.91 of cuBLAS there).
        "large": GemmConfig(
            128, 256, 64, num_warps=8, num_stages=4, persistent=True, use_tma=True, **_FLAT_STORE
        ),
        # 128x128 tiles for outputs too small to fill the 128x256 waves. No split-K: on a
        # 1000 x 1000 x 2000 forward its zeroed fp32 buffer, atomics and cast made it 0.25 of
        # cuBLAS (0.71 without); the step +33.6% [+18.9%, +39.5%] (same campaign, round 2).
        "medium": GemmConfig(128, 128, 64, num_warps=8, num_stages=4, use_tma=True),
        "skinny": GemmConfig(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, split_k=4),
        # Stream-K: one launch spreads the k-iterations of a few dozen tiles over one wave
        # (:data:`SPLIT_K_INSTEAD` where under 17 tiles). With the backward's: the step on
        # 500 x 2000 x 30000 +7.98% [+6.97%, +9.50%], 8 shapes 1.0097x [1.0037, 1.0163] in a
        # paired A/B (campaigns/gemm_bf16_odd_streamk; `tune --only odd`: forward 0.57 -> 0.73
        # of cuBLAS there, 383 x 1000 x 12289 0.68 -> 0.98).
        "long_k": GemmConfig(**_STREAM_K),
        # Decode rows and small outputs are bound by the host's launches, not the GPU: one
        # launch, no split-K (its zeroed fp32 buffer and final cast were two launches more).
        # do_bench on an H200, 5 tiny odd shapes: 13-74 us against 50-112 us for the former
        # 64x64x64 pointer tile with split-K 8; with the backward's below, the step 1.114x
        # [1.026, 1.192] in a paired A/B (campaigns/gemm_bf16_small, eager step time).
        "tiny": GemmConfig(64, 64, 128, num_warps=4, num_stages=4, use_tma=True),
    },
    # Backward dout @ b and doutᵀ @ a (one or both operands not K-major: TMA, since pointer loads
    # of a transposed operand collapse to 38-88 TFLOPS). Where the Gluon route runs forward and
    # dgrad, large serves the weight gradient alone: persistent, each tile stored by TMA as the
    # next loads; the step 1.0399x [1.0306, 1.0516] (campaigns/gemm_bf16_odd/wgrad-flat-store).
    "bf16_bwd": {
        "large": GemmConfig(
            128, 256, 64, num_warps=8, num_stages=3, persistent=True, use_tma=True, **_FLAT_STORE
        ),
        "medium": GemmConfig(128, 128, 64, num_warps=8, num_stages=4, use_tma=True, split_k=4),
        "skinny": GemmConfig(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, split_k=4),
        # As the forward's (same campaign); with per-call buffers and Triton's binding it was
        # 18% slower on the 1000 x 5120 x 1000 step (campaigns/gemm_bf16_odd_streamk_first).
        "long_k": GemmConfig(**_STREAM_K),
        # As the forward's: one launch. 16-row tiles, twice the programs streaming the weight
        # of the former 64 x 128 ones: `tune --only decode` (do_bench) 0.595 -> 0.869 of cuBLAS
        # over 6 dgrads; the step on 17 x 11008 x 4096 +15.7% [+15.6%, +15.9%], 6 shapes
        # 1.0376x [1.0239, 1.0539] (campaigns/gemm_bf16_small/decode-sweep, round 3).
        "tiny": GemmConfig(16, 64, 128, num_warps=4, num_stages=6, use_tma=True),
    },
    # FP8 tensorwise / rowwise (scales in the epilogue). K tile 128 = the bf16 bytes per stage.
    "fp8": {
        # TMA + persistent + 4 stages: 1353 / 1392 / 1514 [_scaled_mm 1373 / 1298 / 1319];
        # 256x128 pointer 1266-1406; pointer 128x256: 1022-1128.
        "large": GemmConfig(
            128, 256, 128, num_warps=8, num_stages=4, persistent=True, use_tma=True
        ),
        "medium": GemmConfig(128, 128, 128, num_warps=8, num_stages=4, use_tma=True, split_k=4),
        "skinny": GemmConfig(64, 128, 128, num_warps=4, num_stages=4, use_tma=True, split_k=4),
        "long_k": GemmConfig(64, 128, 128, num_warps=4, num_stages=4, use_tma=True, split_k=32),
        "tiny": GemmConfig(64, 64, 128, num_warps=4, num_stages=3, split_k=8),
    },
    # FP8 blockwise: BLOCK_K is pinned to the 128-wide scaling group; each k-group's wgmma must
    # finish before its scaled accumulation, so smaller tiles with more CTAs per SM win (H200
    # sweeps: 64x128 w4 s4 TMA 711 / 730 TFLOPS, 128x128 w8 s4 620-694, 128x256 548-596). large,
    # 3 stages: the step +5.84% [+4.24%, +8.15%] in a paired A/B on 5 model shapes, the best of
    # an exhaustive 54-point sweep of tile x warps x stages (607 vs 555 TFLOPS step geomean).
    "fp8_block": {
        "large": GemmConfig(64, 128, 128, num_warps=4, num_stages=3, use_tma=True),
        "medium": GemmConfig(64, 128, 128, num_warps=4, num_stages=3, use_tma=True, split_k=4),
        "skinny": GemmConfig(64, 128, 128, num_warps=4, num_stages=4, use_tma=True, split_k=4),
        "long_k": GemmConfig(64, 128, 128, num_warps=4, num_stages=4, use_tma=True, split_k=32),
        "tiny": GemmConfig(64, 64, 128, num_warps=4, num_stages=3, split_k=8),
    },
}

#: Buckets of a kind that the warp-specialized Gluon kernel (:mod:`.fp8_block_ws`) runs instead
#: of the Triton kernel, where it applies (sm_90, FP8 K-major operands with 16-byte rows,
#: ``N % 8 == 0``, one B scale per column part of an output tile). Fields read: ``block_m`` (64
#: rows per consumer warpgroup: 128 is two, 192 three), ``block_n``, ``num_stages``, ``group_m``,
#: ``k_unroll`` (2: issue the next k-group's wgmma before scaling this one's), ``col_parts``.
#: The GEMM alone on 6 model shapes (H200, do_bench, TFLOPS): k_unroll 2 with 6 stages
#: 1007-1059; k_unroll 1 with 4-6 stages 807-1074; the Triton kernel 645-731; torch's blockwise
#: scaled_mm 1027-1224. 1x128 B scales (the weight gradient) run :mod:`.fp8_block_ws_cols`
#: (entries ``<kind>_cols``, :func:`.launch_plan.ws_kind`), whose stages carry the scales.
#: Shared by every entry: grouped-M order, one warpgroup at launch, persistent, TMA, paired
#: k-groups.
_WS = dict(group_m=8, num_warps=4, persistent=True, use_tma=True, k_unroll=2)
WS_CONFIGS: dict[str, dict[str, GemmConfig]] = {
    "fp8_block": {"large": GemmConfig(128, 128, 128, num_stages=6, **_WS)},
    # The weight gradient (1x128 B scales), each stage carrying its k-group's column scales:
    # four stages (five fit; alone, 17 model shapes on an H100: four 879 TFLOPS, five 863,
    # the Triton kernel 687, scaled_mm 922). The step 1.0784x [1.0747, 1.0826] in a paired
    # A/B of 5 model shapes (campaigns/gemm_fp8_blockwise_model/wgrad-cols).
    "fp8_block_cols": {"large": GemmConfig(128, 128, 128, num_stages=4, **_WS)},
}

#: Buckets of the 16-bit kinds that the warp-specialized kernel (:mod:`.bf16_ws`: 128-row tiles;
#: reads block_n, block_k, num_stages, group_m) runs where it applies (sm_90, A K-major, TMA-ready
#: operands, ``N % 8 == 0``: forward and dgrad). Large: alone on an H100 (graph replays), forward
#: 4096 x 14336 x 4096 701 TFLOPS, Triton kernel 651, cuBLAS 673; dgrad 710, 678, 693.
#: Medium (128 x 128 tiles fill more SMs): forward 1000 x 5120 x 1000 304, Triton 256, cuBLAS
#: 567; the step 1.0101x [1.0052, 1.0127] (campaigns/gemm_bf16_odd/ws-quick-path-medium).
WS16_CONFIGS: dict[str, dict[str, GemmConfig]] = {
    "bf16": {
        "large": GemmConfig(128, 256, 64, num_stages=3, group_m=8),
        "medium": GemmConfig(128, 128, 64, num_stages=4, group_m=8),
    },
    "bf16_bwd": {
        "large": GemmConfig(128, 256, 64, num_stages=3, group_m=8),
        "medium": GemmConfig(128, 128, 64, num_stages=4, group_m=8),
    },
}
#: The warp-specialized 16-bit kernel's three 128-row tiles, widest first.
_WS16_WIDEST_FIRST = (
    GemmConfig(128, 256, 64, num_stages=3, group_m=8),
    GemmConfig(128, 128, 64, num_stages=4, group_m=8),
    GemmConfig(128, 64, 64, num_stages=6, group_m=8),
)
#: {kind: {bucket: tiles}} the warp-specialized 16-bit kernel runs a bucket's GEMMs with where
#: WS16_CONFIGS has none: the tile of these that fills its waves best (ties to the first),
#: where that fill reaches :data:`WS16_MIN_FILL` (:func:`.launch_plan.ws16_config`). The
#: skinny bucket's forward and dgrad (campaigns/gemm_bf16_skinny/ws16-fitted).
WS16_FITTED: dict[str, dict[str, tuple[GemmConfig, ...]]] = {
    "bf16": {"skinny": _WS16_WIDEST_FIRST},
    "bf16_bwd": {"skinny": _WS16_WIDEST_FIRST},
}
#: The least share of a persistent launch's output slots that holds outputs: ``M * N`` over
#: its waves (``ceil(tiles / SMs)``) times the SMs times ``128 * block_n``.
WS16_MIN_FILL = 0.7

# What `ratchet run --optimizer search` may change (kernel_ratchet/optimizers/tunables.py).
#: The CONFIGS kinds each op's forward and backward use.
SEARCH_KINDS = {
    "gemm_bf16": ["bf16", "bf16_bwd"],
    "gemm_fp8_tensorwise": ["fp8"],
    "gemm_fp8_rowwise": ["fp8"],
    "gemm_fp8_blockwise": ["fp8_block"],
}
#: Values worth a round on Hopper: wgmma tiles that fit shared memory, 3-5 stages (2 starves the
#: pipeline), 4 or 8 warps; blockwise pins BLOCK_K to its 128-wide scaling group.
SEARCH_SPACE = {
    "*": {
        "block_m": [64, 128, 256],
        "block_n": [64, 128, 256],
        "block_k": [64, 128],
        "group_m": [1, 4, 8, 16],
        "num_warps": [4, 8],
        "num_stages": [3, 4, 5],
        "persistent": [False, True],
        "use_tma": [False, True],
        "split_k": [],
        "k_unroll": [],
    },
    "fp8": {"block_k": [128, 256]},
    "fp8_block": {"block_k": [], "k_unroll": [1, 2]},
    "long_k": {"split_k": [8, 16, 32]},
    "tiny": {"split_k": [1, 4, 8]},
    "skinny": {"split_k": [1, 2, 4]},
    "medium": {"split_k": [1, 2, 4]},
    # the warp-specialized 16-bit kernel's entries: what it reads (128 x 256 fits 3 stages)
    "WS16_CONFIGS": {
        "block_m": [],
        "block_k": [],
        "num_warps": [],
        "persistent": [],
        "use_tma": [],
        "num_stages": [3, 4, 6],
        "group_m": [8, 16],
    },
}

#: {kind: {bucket: config}} for a problem whose bucket config is stream-K but whose tiles are
#: too few for it (each shared by more than :data:`STREAM_K_MAX_SHARE` programs): the tile
#: kernel with split-K that served the bucket before (a 128 x 128 output, K = 16384: 64
#: programs of 64 x 128 tiles).
SPLIT_K_INSTEAD: dict[str, dict[str, GemmConfig]] = {
    "bf16": {
        "long_k": GemmConfig(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, split_k=32)
    },
    "bf16_bwd": {
        "long_k": GemmConfig(64, 128, 64, num_warps=4, num_stages=4, use_tma=True, split_k=32)
    },
}

#: {kind: {bucket: config}} for a problem whose bucket config would split K (its tiles fill at
#: most half the SMs: :func:`split_for`) and whose K is at most :data:`UNSPLIT_MAX_K`'s bound
#: (absent: any K): the config that runs instead, in one launch without split-K's zeroed fp32
#: buffer, atomics and cast. Dict literals of calls, like ``CONFIGS``, so that the search
#: optimizer sees them as entries of their own.
UNSPLIT_INSTEAD: dict[str, dict[str, GemmConfig]] = {
    # 64x64 tiles, twice the programs of 64x128, where 64x128 would split K. The step on
    # 64 x 4096 x 4096 +15.5% [+12.0%, +28.7%], on 128 x 4096 x 14336 +8.8% [+6.8%, +12.9%], 7
    # shapes 1.0378x [1.0298, 1.0504] in a paired A/B (campaigns/gemm_bf16_skinny, round 2).
    # Everywhere in the bucket they were 0.67-0.84x of 64x128 where those fill the GPU (the
    # rolled-back first campaign there).
    "bf16": {"skinny": GemmConfig(64, 64, 128, num_warps=4, num_stages=4, use_tma=True)},
    # The dgrad unsplit where its contraction is at most 8192: 64 x 4096 x 4096 step +30.1%
    # [+10.9%, +72.2%], 7 shapes 1.0357x [1.0171, 1.0589] (same campaign, round 3). With a
    # contraction of 14336 (64 x 14336 x 4096) the unsplit dgrad was 0.87x: the split stays.
    "bf16_bwd": {"skinny": GemmConfig(64, 128, 64, num_warps=4, num_stages=4, use_tma=True)},
}
#: {kind: {bucket: the largest K}} of :data:`UNSPLIT_INSTEAD`'s entries that have a bound.
UNSPLIT_MAX_K: dict[str, dict[str, int]] = {"bf16_bwd": {"skinny": 8192}}

#: {kind: {bucket: config}} for a problem of at most :data:`FEW_ROWS_MAX_M` output rows: the
#: config that runs instead, its row tile fitted to them (a decode GEMM streams its weight once
#: per row tile, so the tile's rows cap the programs that stream it at once).
FEW_ROWS_INSTEAD: dict[str, dict[str, GemmConfig]] = {
    # 16-row tiles where two of them cover the rows: the step on 17 x 11008 x 4096 +4.31%
    # [+3.31%, +4.58%] (forward 45 -> 38 us), 6 shapes 1.0224x [1.0026, 1.0308] in a paired A/B
    # (campaigns/gemm_bf16_small/decode-rows). For the whole bucket it was rolled back: three
    # 16-row tiles on 33 rows stream the weight three times (forward 36 -> 52 us).
    "bf16": {"tiny": GemmConfig(16, 64, 128, num_warps=4, num_stages=6, use_tma=True)},
}
#: {kind: {bucket: the most output rows}} of :data:`FEW_ROWS_INSTEAD`'s entries.
FEW_ROWS_MAX_M: dict[str, dict[str, int]] = {"bf16": {"tiny": 32}}


def config_for(kind: str, M: int, N: int, K: int, sms: int = DEFAULT_SMS) -> GemmConfig:
    """``CONFIGS[kind][bucket_for(M, N, K, sms)]``; or the bucket's :data:`SPLIT_K_INSTEAD`
    config where a stream-K config would share each tile among too many programs; or its
    :data:`UNSPLIT_INSTEAD` config where the bucket's would split K; or its
    :data:`FEW_ROWS_INSTEAD` config for few output rows. Raises KeyError naming the known
    kinds."""
    if kind not in CONFIGS:
        raise KeyError(f"unknown GEMM kind {kind!r}; known: {sorted(CONFIGS)}")
    bucket = bucket_for(M, N, K, sms)
    cfg = CONFIGS[kind][bucket]
    tiles = -(-M // cfg.block_m) * -(-N // cfg.block_n)
    if cfg.stream_k and tiles * STREAM_K_MAX_SHARE < sms:
        return SPLIT_K_INSTEAD.get(kind, {}).get(bucket, cfg.with_(stream_k=False))
    instead = UNSPLIT_INSTEAD.get(kind, {}).get(bucket)
    fits = not UNSPLIT_MAX_K.get(kind, {}).get(bucket, K) < K
    if instead and fits and split_for(cfg, tiles, -(-K // cfg.block_k), sms) > 1:
        return instead
    few = FEW_ROWS_INSTEAD.get(kind, {}).get(bucket)
    return few if few and not FEW_ROWS_MAX_M.get(kind, {}).get(bucket, 0) < M else cfg


@dataclass(frozen=True)
class FewRowsWgrad:
    """A Linear's weight gradient ``doutᵀ @ a`` over at most ``max_rows`` rows on the
    warp-specialized Gluon kernel of :mod:`.wgrad_ws` with one group: tiles of 128 rows of N by
    ``block_k`` columns, bands of ``group_n`` n tiles, ``stages`` steps of 64 rows in flight;
    taken where the kernel applies and the output holds at least ``min_tiles`` tiles."""

    block_k: int = 256
    group_n: int = 16
    stages: int = 3
    max_rows: int = 256
    min_tiles: int = DEFAULT_SMS


#: The dense Linear's few-row weight gradient route (:class:`FewRowsWgrad`); None: the
#: ``bf16_bwd`` buckets everywhere. From four waves of tiles up: below that a call's host time
#: (about 60 us) exceeds the kernel's (campaigns/gemm_bf16_skinny/few-rows-four-waves).
FEW_ROWS_WGRAD: FewRowsWgrad | None = FewRowsWgrad(min_tiles=4 * DEFAULT_SMS)
