"""The launch plan of a dense GEMM geometry (:func:`_plan`): config, aligned copies, TMA,
split-K, grid and the kernel's constexprs, computed once per geometry so that a call of
:func:`.launch.matmul` only allocates and launches."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_ratchet.kernels.gemm import configs as _configs
from kernel_ratchet.kernels.gemm.bf16_ws import ROWS
from kernel_ratchet.kernels.gemm.configs import WS_CONFIGS, GemmConfig, bucket_for, config_for
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK, SCALE_NONE
from kernel_ratchet.kernels.gemm.operands import stride_align
from kernel_ratchet.kernels.quant.launch import cdiv

#: An operand TMA cannot read (rows not 16-byte aligned: a bf16 ``dout [4000, 4100]``) is
#: copied into 16-byte rows when each of its elements feeds at least this many outputs (the
#: GEMM's other dimension): the copy moves 4 bytes per bf16 element, the GEMM then does 512 or
#: more flops on it. Below, or on the pointer path, the operand is read where it is.
PAD_MIN_REUSE = 256

#: Output dtypes of the warp-specialized blockwise kernel (:mod:`.fp8_block_ws`).
_WS_OUT = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class _Plan:
    """What a launch decides from the problem's geometry alone (cached per geometry)."""

    copy_a: bool
    copy_b: bool
    use_tma: bool
    split_k: int
    grid: tuple[int]
    kwargs: dict[str, object]
    ws: GemmConfig | None = None  # run the warp-specialized blockwise kernel with this config
    ws16: GemmConfig | None = None  # run the warp-specialized 16-bit kernel with this config
    stream_k: bool = False  # run the stream-K kernel (:mod:`.kernel_streamk`) on grid[0] programs
    #: (output tiles, elements per tile) of a split whose tiles finish themselves in the
    #: launch (:func:`.launch_scratch.split_slots`); None: a zeroed fp32 output, cast after it
    slots: tuple[int, int] | None = None
    #: {operand signature: its :class:`.fast_launch.Direct` runner or False}.
    runners: dict[tuple, Any] = field(default_factory=dict, compare=False, repr=False)


@functools.lru_cache(maxsize=1024)
def _plan(
    kind: str,
    explicit: GemmConfig | None,
    M: int,
    N: int,
    K: int,
    geom: tuple[int, bool, bool, int, bool, bool],
    scale_mode: int,
    num_sms: int,
    interp: bool,
    ws_group: int = 0,
    out_dtype: torch.dtype | None = None,
    ws16: bool = False,
) -> _Plan:
    """Config, aligned copies, TMA, split-K, grid and constexprs of one problem geometry.

    ``geom``: (row stride, TMA-readable, K-major) of A, then of B. ``ws_group``: the group size of
    the B scales of a blockwise GEMM on an sm_90 GPU (else 0): the plan runs the warp-specialized
    kernel where :data:`.configs.WS_CONFIGS` has the bucket (:func:`ws_kind`), both
    operands are K-major and TMA-readable, the 16-bit output's rows are 16 bytes and the B
    scales suit the config (:func:`ws_applies`). ``ws16``: a 16-bit GEMM on an sm_90
    GPU, run by the warp-specialized 16-bit kernel where :func:`ws16_config` gives a config, A
    is K-major, both operands TMA-readable and the output's rows 16 bytes. Host work per call
    matters on small GEMMs (cuBLAS runs a 1000 x 5120 x 1000 forward in about 21 us on
    an H200), so the launcher computes this once per geometry and the call only allocates and
    launches.
    """
    a_row, a_ok, a_kmajor, b_row, b_ok, b_kmajor = geom
    ws_ok = a_ok and b_ok and a_kmajor and b_kmajor and N % 8 == 0
    if explicit is None and ws_group and ws_ok and not interp and out_dtype in _WS_OUT:
        ws = WS_CONFIGS.get(ws_kind(kind, ws_group), {}).get(bucket_for(M, N, K, num_sms))
        if ws is not None and ws_applies(ws, ws_group):
            return _Plan(False, False, True, 1, (0,), {}, ws)
    if explicit is None and ws16 and not interp and a_ok and b_ok and a_kmajor and N % 8 == 0:
        ws = ws16_config(kind, M, N, K, num_sms)
        if ws is not None:
            return _Plan(False, False, True, 1, (0,), {}, ws16=ws)
    cfg = explicit or config_for(kind, M, N, K, num_sms)
    if scale_mode == SCALE_BLOCK and cfg.block_k != 128:
        raise ValueError(f"blockwise scaling needs BLOCK_K = 128, config has {cfg.block_k}")
    tma_path = cfg.use_tma and not interp
    copy_a = tma_path and not a_ok and N >= PAD_MIN_REUSE
    copy_b = tma_path and not b_ok and M >= PAD_MIN_REUSE
    use_tma = tma_path and (a_ok or copy_a) and (b_ok or copy_b)
    k_tiles = cdiv(K, cfg.block_k)
    tiles = cdiv(M, cfg.block_m) * cdiv(N, cfg.block_n)
    stream_k = cfg.stream_k and scale_mode == SCALE_NONE  # which splits K its own way
    if stream_k:
        split_k = 1
    elif explicit is not None:
        split_k = max(1, min(cfg.split_k, k_tiles))
    else:
        split_k = _configs.split_for(cfg, tiles, k_tiles, num_sms)
    tiles *= split_k
    # A persistent program looping over split-K slices summed 128 x 128 tiles wrongly (about
    # 0.17 relative error on an 800 x 800 output over K = 3000, H100), where one program per
    # (tile, slice) sums them right: a split never persists.
    persistent = cfg.persistent and split_k == 1
    kwargs = dict(
        SCALE_MODE=scale_mode,
        A_KMAJOR=a_kmajor,
        B_KMAJOR=b_kmajor,
        BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k,
        GROUP_M=cfg.group_m,
        SPLIT_K=split_k,
        USE_TMA=use_tma,
        PERSISTENT=persistent,
        NUM_SMS=num_sms,
        K_UNROLL=cfg.k_unroll if scale_mode == SCALE_BLOCK else 1,
        WARP_SPECIALIZE=cfg.warp_specialize,
        A_ALIGN=stride_align(use_tma or copy_a, a_row),
        B_ALIGN=stride_align(use_tma or copy_b, b_row),
        FLATTEN=cfg.flatten and persistent,
        TMA_STORE=cfg.tma_store if use_tma and split_k == 1 and _rows_16b(N, out_dtype) else 0,
        SPLIT_FINISH=split_k > 1 and scale_mode == SCALE_NONE,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    if stream_k:
        programs = min(num_sms, tiles * k_tiles)
        keep = ("A_KMAJOR", "B_KMAJOR", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "USE_TMA")
        keep += ("TMA_STORE", "num_warps", "num_stages")
        kwargs = {k: kwargs[k] for k in keep} | {"PROGRAMS": programs}
        return _Plan(copy_a, copy_b, use_tma, 1, (programs,), kwargs, stream_k=True)
    grid = (min(num_sms, tiles),) if persistent else (tiles,)
    slots = (tiles // split_k, cfg.block_m * cfg.block_n) if kwargs["SPLIT_FINISH"] else None
    return _Plan(copy_a, copy_b, use_tma, split_k, grid, kwargs, slots=slots)


def ws_kind(kind: str, b_scale_group_n: int) -> str:
    """The :data:`.configs.WS_CONFIGS` key of a blockwise GEMM of ``kind``: ``<kind>_cols`` for
    one B scale per column (1x128 groups along K, the weight gradient: :mod:`.fp8_block_ws_cols`).
    """
    return f"{kind}_cols" if b_scale_group_n == 1 else kind


def ws_applies(cfg: GemmConfig, b_scale_group_n: int) -> bool:
    """Whether a :data:`.configs.WS_CONFIGS` entry takes B scales in groups of
    ``b_scale_group_n``: one per column (its ``_cols`` entries), or one covering each column part
    it scales at once."""
    return b_scale_group_n == 1 or b_scale_group_n % (cfg.block_n // min(cfg.col_parts, 2)) == 0


def ws16_config(kind: str, M: int, N: int, K: int, sms: int) -> GemmConfig | None:
    """The warp-specialized 16-bit kernel's config of an ``M x N`` output over ``K``: the
    bucket's :data:`.configs.WS16_CONFIGS` entry; else, of its :data:`.configs.WS16_FITTED`
    tiles, the first of those that fill the output slots of their waves best
    (:func:`ws16_fill`), where that fill reaches :data:`.configs.WS16_MIN_FILL`; else None."""
    bucket = bucket_for(M, N, K, sms)
    fixed = _configs.WS16_CONFIGS.get(kind, {}).get(bucket)
    if fixed is not None:
        return fixed
    best, fill = None, 0.0
    for cfg in _configs.WS16_FITTED.get(kind, {}).get(bucket, ()):
        f = ws16_fill(M, N, cfg.block_n, sms)
        if f > fill + 1e-9:
            best, fill = cfg, f
    return best if fill >= _configs.WS16_MIN_FILL else None


def ws16_fill(M: int, N: int, block_n: int, sms: int) -> float:
    """The share of a persistent launch's output slots (``sms`` programs of a tile of two
    consumers' rows by ``block_n`` per wave) that holds the ``M x N`` output: what partial
    tiles and a last wave's idle SMs leave of the GPU."""
    rows = 2 * ROWS  # the warp-specialized 16-bit kernel's tile rows (:mod:`.bf16_ws`)
    tiles = cdiv(M, rows) * cdiv(N, block_n)
    return M * N / (cdiv(tiles, sms) * sms * rows * block_n)


def _rows_16b(N: int, dtype: torch.dtype | None) -> bool:
    """Whether a new row-major ``[M, N]`` output of ``dtype`` has 16-byte rows (TMA-writable)."""
    return dtype is not None and (N * dtype.itemsize) % 16 == 0
