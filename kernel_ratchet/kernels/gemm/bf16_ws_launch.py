"""Host side of the warp-specialized 16-bit GEMM (:mod:`.bf16_ws`).

:func:`supported` says whether a problem qualifies (an sm_90 GPU, 16-bit operands in the layouts
the kernel reads with 16-byte aligned rows, output rows of 16 bytes); :func:`matmul_bf16_ws`
builds the TMA descriptors and launches the kernel; :func:`compile_offline` compiles it for
sm_90 without a GPU. The dense launcher (:mod:`.launch`) routes 16-bit GEMMs here by
``configs.WS16_CONFIGS``.
"""

from __future__ import annotations

import functools

import torch
from triton.experimental.gluon import language as gl

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm import descriptor_launch, quick_path
from kernel_ratchet.kernels.gemm.bf16_ws import ROWS, _bf16_ws_kernel
from kernel_ratchet.kernels.gemm.fp8_block_ws_launch import _rows_ok, _sm90
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES
from kernel_ratchet.kernels.offline_compile import compile_gluon

#: Compile options: the default partition is one consumer warpgroup; 12 warps x 168 registers
#: fill the 64 K register file before the partitions move the producer's to the consumers.
OPTIONS = {"num_warps": 4, "maxnreg": 168}
#: Registers per consumer thread after the partitions' moves.
CONSUMER_REGS = 232
_GL = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
#: Whether the launcher's calls after a geometry's first go straight to the compiled kernel's C
#: launcher (:mod:`.descriptor_launch`) instead of Triton's binding of the three descriptors.
DIRECT = True


@functools.cache
def _layouts(block_n: int, block_k: int, dtype: torch.dtype, b_kmajor: bool):
    t = _GL[dtype]
    b_block = [block_n, block_k] if b_kmajor else [block_k, block_n]
    return (
        gl.NVMMASharedLayout.get_default_for([ROWS, block_k], t),
        gl.NVMMASharedLayout.get_default_for(b_block, t),
        gl.NVMMASharedLayout.get_default_for([ROWS, block_n], t),
    )


def smem_bytes(block_n: int, block_k: int, stages: int, itemsize: int = 2) -> int:
    """Shared memory of a launch: the ring's stages (two 64-row A tiles and a B tile each) and
    the two warpgroups' output staging."""
    return stages * (2 * ROWS + block_n) * block_k * itemsize + 2 * ROWS * block_n * itemsize


def check_config(block_n: int, block_k: int, stages: int) -> None:
    """Raise ValueError for a configuration the kernel does not take or that does not fit."""
    if block_n not in (64, 128, 256) or block_k not in (32, 64, 128):
        raise ValueError(  # Gluon's shared-memory buffers take power-of-two shapes only
            f"block_n must be 64, 128 or 256 and block_k 32, 64 or 128; got "
            f"block_n={block_n}, block_k={block_k}"
        )
    if stages < 2:
        raise ValueError(f"the ring needs at least 2 stages, got {stages}")
    need = smem_bytes(block_n, block_k, stages)
    if need + 1024 > SM90_SHARED_BYTES:  # the barriers and alignment take a few hundred bytes
        raise ValueError(
            f"{stages} stages of {block_n} x {block_k} need {need} bytes of shared memory, more "
            f"than an sm_90 SM has ({SM90_SHARED_BYTES}): use fewer stages or a narrower tile"
        )


def supported_dtypes(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> bool:
    """Whether ``a`` and ``b`` are of one 16-bit dtype, the output too, on an sm_90 GPU: what
    the launcher checks before it plans (layouts and sizes are the plan's)."""
    return (
        a.dtype in _GL
        and b.dtype is a.dtype
        and out_dtype is a.dtype
        and a.device.type == "cuda"
        and _sm90(a.device)
    )


def run(
    a: torch.Tensor,
    b: torch.Tensor,
    b_kmajor: bool,
    cfg,
    num_sms: int,
    runners: dict,
    quick_key: tuple | None = None,
) -> torch.Tensor:
    """:func:`matmul_bf16_ws` under a ``configs.WS16_CONFIGS`` entry (a ``GemmConfig``) for one
    launch plan, whose ``runners`` keep its direct launches where :data:`DIRECT` is on.
    ``quick_key``: the call's :mod:`.quick_path` key, under which the next call of the same
    key launches the direct runner straight away."""
    c = matmul_bf16_ws(
        a,
        b,
        b_kmajor=b_kmajor,
        block_n=cfg.block_n,
        block_k=cfg.block_k,
        stages=cfg.num_stages,
        group_m=cfg.group_m,
        num_sms=num_sms,
        runners=runners if DIRECT else None,
    )
    if quick_key and DIRECT:
        grid = grid_size(c.shape[0], c.shape[1], cfg.block_n, num_sms)
        quick_path.remember(
            quick_key, *c.shape, c.dtype, grid, runners.get(runner_key(a)), descriptors=True
        )
    return c


def supported(a: torch.Tensor, b: torch.Tensor, b_kmajor: bool) -> bool:
    """Whether this kernel can run ``a [M, K] @ b`` here (``b [N, K]`` with ``b_kmajor``, else
    ``[K, N]``): an sm_90 GPU, one 16-bit dtype, contiguous 16-byte aligned rows, and output
    rows of 16 bytes (``N`` a multiple of 8)."""
    n = b.shape[0] if b_kmajor else b.shape[1]
    return supported_dtypes(a, b, a.dtype) and _rows_ok(a) and _rows_ok(b) and n % 8 == 0


def grid_size(M: int, N: int, block_n: int, sms: int) -> int:
    """Persistent programs of a launch: one per SM, or one per output tile where fewer."""
    return min(sms, -(-M // (2 * ROWS)) * -(-N // block_n))


def runner_key(a: torch.Tensor) -> tuple:
    """The key of a launch plan's direct runner for the operand ``a``."""
    return (a.dtype, a.device.index)


def matmul_bf16_ws(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    b_kmajor: bool = True,
    block_n: int = 128,
    block_k: int = 64,
    stages: int = 4,
    group_m: int = 8,
    num_sms: int | None = None,
    runners: dict | None = None,
) -> torch.Tensor:
    """``a [M, K] @ bᵀ`` (``b [N, K]``, ``b_kmajor``) or ``a @ b`` (``b [K, N]``) -> ``[M, N]``
    in ``a``'s dtype, fp32 accumulation. The caller checks :func:`supported` first.
    ``runners``: the cache of one problem geometry's direct launches (:mod:`.descriptor_launch`),
    keyed by dtype and device; None: Triton's launch every call."""
    check_config(block_n, block_k, stages)
    M, K = a.shape
    N = b.shape[0] if b_kmajor else b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0 or K == 0:  # nothing to launch: an empty output, or a sum of nothing
        return c.zero_()
    sms = num_sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    cuda_context.make_current(a.device)
    grid = (grid_size(M, N, block_n, sms),)
    key = runner_key(a)
    runner = runners.get(key) if runners is not None else None
    if runner:
        runner(grid[0], (a, b, c))  # the runner encodes (or reuses) the three descriptors
        return c
    la, lb, lc = _layouts(block_n, block_k, a.dtype, b_kmajor)
    b_block = [block_n, block_k] if b_kmajor else [block_k, block_n]
    blocks = (([ROWS, block_k], la), (b_block, lb), ([ROWS, block_n], lc))
    kwargs = {**_constexprs(block_n, block_k, group_m, stages, sms, b_kmajor), **OPTIONS}
    descriptor_launch.launch(
        _bf16_ws_kernel, runners, grid, (a, b, c), blocks, (M, N, K), kwargs, key
    )
    return c


def _constexprs(
    block_n: int, block_k: int, group_m: int, stages: int, sms: int, b_kmajor: bool
) -> dict[str, int | bool]:
    """The kernel's constexpr arguments, the same for a launch and an offline compile."""
    return dict(
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=sms,
        CONSUMER_REGS=CONSUMER_REGS,
        B_KMAJOR=b_kmajor,
    )


def compile_offline(
    *,
    block_n: int = 128,
    block_k: int = 64,
    stages: int = 4,
    group_m: int = 8,
    b_kmajor: bool = True,
    arch: int = 90,
):
    """The kernel compiled for ``sm_<arch>`` without a GPU, as :func:`matmul_bf16_ws` would
    launch it on bf16 operands; read its cost with
    :func:`kernel_ratchet.kernels.offline.resources`."""
    check_config(block_n, block_k, stages)
    la, lb, lc = _layouts(block_n, block_k, torch.bfloat16, b_kmajor)
    b_block = [block_n, block_k] if b_kmajor else [block_k, block_n]
    sig = {
        "a_desc": f"tensordesc<bf16[{ROWS}, {block_k}],{la!r}>",
        "b_desc": f"tensordesc<bf16[{b_block[0]}, {b_block[1]}],{lb!r}>",
        "c_desc": f"tensordesc<bf16[{ROWS}, {block_n}],{lc!r}>",
    }
    sig.update(dict.fromkeys(("M", "N", "K"), "i32"))
    consts = _constexprs(block_n, block_k, group_m, stages, 132, b_kmajor)
    return compile_gluon(_bf16_ws_kernel, sig, consts, (), OPTIONS, arch)
