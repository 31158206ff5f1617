"""Host side of the warp-specialized blockwise FP8 GEMM (:mod:`.fp8_block_ws`).

:func:`supported` says whether a problem qualifies (an sm_90 GPU, FP8 K-major operands with
16-byte aligned rows, output rows of 16 bytes); :func:`matmul_fp8_block_ws` builds the TMA
descriptors and launches the kernel; :func:`compile_offline` compiles it for sm_90 without a GPU.
The dense launcher (:mod:`.launch`) routes blockwise GEMMs here by ``configs.WS_CONFIGS``.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm.fp8_block_ws import KGROUP, ROWS, _fp8_block_ws_kernel
from kernel_ratchet.kernels.gemm.fp8_block_ws_cols import SB_LAYOUT, _fp8_block_ws_cols_kernel
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES
from kernel_ratchet.kernels.offline_compile import compile_gluon

#: Registers per thread at launch by consumer warpgroups: 12 warps (two consumer warpgroups and
#: the producer's, padded to a warpgroup) x 168, or 16 x 128, fill the 64 K register file; the
#: partitions then move registers from the producer to the consumers (``CONSUMER_REGS``).
MAXNREG = {2: 168, 3: 128}


def options(consumers: int = 2) -> dict[str, int]:
    """Compile options of a launch: the default partition is one consumer warpgroup."""
    return {"num_warps": 4, "maxnreg": MAXNREG[consumers]}


OPTIONS = options()
#: Registers per consumer thread after the partitions' moves, by consumer warpgroups (2: two
#: 64 x 128 accumulators in flight with MODE 1; 3: 3 x 128 x 152 + the producer's 128 x 40 fill
#: the register file, which leaves room for one wgmma in flight, MODE 0).
CONSUMER_REGS = {2: 232, 3: 152}


def _constexprs(
    group_n: int,
    block_n: int,
    group_m: int,
    stages: int,
    sms: int,
    regs: int,
    mode: int,
    consumers: int = 2,
) -> dict[str, int]:
    """The kernel's constexpr arguments, the same for a launch and an offline compile."""
    return dict(
        SB_GROUP_N=group_n,
        BLOCK_N=block_n,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=sms,
        CONSUMER_REGS=regs,
        MODE=mode,
        CONSUMERS=consumers,
    )


def _cols_constexprs(block_n: int, group_m: int, stages: int, sms: int, regs: int):
    """The constexpr arguments of the column-scale kernel (:mod:`.fp8_block_ws_cols`)."""
    return dict(BLOCK_N=block_n, GROUP_M=group_m, STAGES=stages, NUM_SMS=sms, CONSUMER_REGS=regs)


def _parts(mode: int) -> int:
    """Column parts a consumer takes a k-group in (modes 2 and 3: quarters)."""
    return 4 if mode >= 2 else 1


def _store_n(block_n: int, mode: int) -> int:
    """Columns of one TMA store: one part's."""
    return block_n // _parts(mode)


@functools.cache
def _layouts(
    block_n: int, a_dtype: torch.dtype, b_dtype: torch.dtype, out_dtype: torch.dtype, c_n: int
):
    gl_of = {
        torch.float8_e4m3fn: gl.float8e4nv,
        torch.float8_e5m2: gl.float8e5,
        torch.bfloat16: gl.bfloat16,
        torch.float16: gl.float16,
    }
    return (
        gl.NVMMASharedLayout.get_default_for([ROWS, KGROUP], gl_of[a_dtype]),
        gl.NVMMASharedLayout.get_default_for([block_n, KGROUP], gl_of[b_dtype]),
        gl.NVMMASharedLayout.get_default_for([ROWS, c_n], gl_of[out_dtype]),
    )


def _rows_ok(t: torch.Tensor) -> bool:
    return (
        t.dim() == 2
        and t.stride(1) == 1
        and t.data_ptr() % 16 == 0
        and (t.stride(0) * t.element_size()) % 16 == 0
    )


@functools.lru_cache(maxsize=8)
def _sm90(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device) == (9, 0)


def supported(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> bool:
    """Whether this kernel can run ``a [M, K] @ b [N, K]ᵀ`` here: an sm_90 GPU, FP8 K-major
    operands with 16-byte aligned rows, and output rows of 16 bytes (``N`` a multiple of 8)."""
    if a.device.type != "cuda" or not _sm90(a.device):
        return False
    if out_dtype not in (torch.bfloat16, torch.float16):
        return False
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    return a.dtype in fp8 and b.dtype in fp8 and _rows_ok(a) and _rows_ok(b) and b.shape[0] % 8 == 0


def check_mode(mode: int, block_n: int, b_scale_group_n: int, consumers: int) -> None:
    """Raise ValueError for a launch configuration the kernel does not take."""
    if mode not in (0, 1, 2, 3):
        raise ValueError(f"mode must be 0, 1, 2 or 3, not {mode}")
    part, half = block_n // _parts(mode), block_n // 2
    if mode >= 2 and (consumers != 2 or part % 16 or b_scale_group_n % half):
        raise ValueError(
            f"mode {mode} takes two consumers, block_n / {_parts(mode)} a multiple of 16 and "
            f"b_scale_group_n a multiple of block_n / 2 (one B scale per half); got "
            f"consumers={consumers}, block_n={block_n}, b_scale_group_n={b_scale_group_n}: "
            "use mode 1 for this launch"
        )


def scales_by_tma(b_scale: torch.Tensor, b_scale_group_n: int, mode: int, consumers: int) -> bool:
    """Whether a launch loads its B scales through TMA (:mod:`.fp8_block_ws_cols`): one per
    column, paired k-groups, two consumers, and ``b_scale`` stored k-group-major (``b_scale.t()``
    contiguous rows of 16-byte multiples, as the 1x128 quantization writes it)."""
    return b_scale_group_n == 1 and mode == 1 and consumers == 2 and col_scales_ok(b_scale)


def _check_cols_smem(block_n: int, stages: int) -> None:
    """Raise ValueError where the column-scale kernel's stages (operands and a row of scales
    each) and its C staging would not fit an SM's shared memory."""
    need = stages * (2 * ROWS * KGROUP + block_n * KGROUP + 4 * block_n) + 2 * ROWS * block_n * 2
    if need + 1024 > SM90_SHARED_BYTES:  # the barriers and alignment take a few hundred bytes
        fit = (SM90_SHARED_BYTES - 1024 - 4 * ROWS * block_n) // (
            2 * ROWS * KGROUP + block_n * KGROUP + 4 * block_n
        )
        raise ValueError(
            f"{stages} stages of {block_n} columns with their B scales need {need} bytes of "
            f"shared memory, more than an sm_90 SM has ({SM90_SHARED_BYTES}): use at most {fit}"
        )


def col_scales_ok(b_scale: torch.Tensor) -> bool:
    """Whether per-column B scales ``[N, ceil(K/128)]`` can load by TMA: stored k-group-major
    (``b_scale.t()`` has contiguous rows of 16-byte multiples), fp32, 16-byte aligned."""
    st = b_scale.stride()
    return (
        b_scale.dtype == torch.float32
        and st[0] == 1
        and (st[1] * 4) % 16 == 0
        and b_scale.data_ptr() % 16 == 0
    )


def matmul_fp8_block_ws(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale: torch.Tensor,
    b_scale: torch.Tensor,
    *,
    b_scale_group_n: int,
    out_dtype: torch.dtype = torch.bfloat16,
    block_n: int = 128,
    stages: int = 4,
    group_m: int = 8,
    consumer_regs: int | None = None,
    mode: int = 1,
    num_sms: int | None = None,
    consumers: int = 2,
) -> torch.Tensor:
    """``a [M, K] @ b [N, K]ᵀ`` with blockwise scales (see the module docstring) -> ``[M, N]``.

    The caller checks :func:`supported` first. ``block_n`` (a multiple of 8, at most 256),
    ``stages``, ``group_m``, ``mode`` and ``consumers`` (warpgroups of 64 output rows: 2 or 3)
    are the launch configuration; shared memory is ``stages * (64 * consumers + block_n) * 128 +
    consumers * 64 * block_n * 2`` bytes (over 4 with ``mode`` 2 and 3, which take a k-group as
    four column quarters, two or one at a time, and need ``b_scale_group_n`` a multiple of
    ``block_n / 2`` and two consumers).
    """
    M, K = a.shape
    N = b.shape[0]
    check_mode(mode, block_n, b_scale_group_n, consumers)
    regs = consumer_regs or CONSUMER_REGS[consumers]
    c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    c_n = _store_n(block_n, mode)
    la, lb, lc = _layouts(block_n, a.dtype, b.dtype, out_dtype, c_n)
    cuda_context.make_current(a.device)
    a_desc = TensorDescriptor.from_tensor(a, [ROWS, KGROUP], la)
    b_desc = TensorDescriptor.from_tensor(b, [block_n, KGROUP], lb)
    c_desc = TensorDescriptor.from_tensor(c, [ROWS, c_n], lc)
    sms = num_sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = triton.cdiv(M, consumers * ROWS) * triton.cdiv(N, block_n)
    if scales_by_tma(b_scale, b_scale_group_n, mode, consumers):
        _check_cols_smem(block_n, stages)
        sb_desc = TensorDescriptor.from_tensor(b_scale.t(), [1, block_n], SB_LAYOUT.value)
        _fp8_block_ws_cols_kernel[(min(sms, tiles),)](
            a_desc, b_desc, sb_desc, c_desc, a_scale, M, N, K, a_scale.stride(0),
            a_scale.stride(1), **_cols_constexprs(block_n, group_m, stages, sms, regs),
            **options(consumers),
        )  # fmt: skip
        return c
    _fp8_block_ws_kernel[(min(sms, tiles),)](
        a_desc,
        b_desc,
        c_desc,
        a_scale,
        b_scale,
        M,
        N,
        K,
        a_scale.stride(0),
        a_scale.stride(1),
        b_scale.stride(0),
        b_scale.stride(1),
        **_constexprs(b_scale_group_n, block_n, group_m, stages, sms, regs, mode, consumers),
        **options(consumers),
    )
    return c


def compile_offline(
    *,
    block_n: int = 128,
    stages: int = 4,
    group_m: int = 8,
    b_scale_group_n: int = 128,
    mode: int = 1,
    consumer_regs: int | None = None,
    arch: int = 90,
    consumers: int = 2,
):
    """The kernel compiled for ``sm_<arch>`` without a GPU (Triton's front end and the ptxas it
    ships), as :func:`matmul_fp8_block_ws` would launch it on E4M3 operands; read its cost with
    :func:`kernel_ratchet.kernels.offline.resources`."""
    check_mode(mode, block_n, b_scale_group_n, consumers)
    c_n = _store_n(block_n, mode)
    e4m3 = torch.float8_e4m3fn
    la, lb, lc = _layouts(block_n, e4m3, e4m3, torch.bfloat16, c_n)
    regs = consumer_regs or CONSUMER_REGS[consumers]
    sig = {
        "a_desc": f"tensordesc<fp8e4nv[{ROWS}, {KGROUP}],{la!r}>",
        "b_desc": f"tensordesc<fp8e4nv[{block_n}, {KGROUP}],{lb!r}>",
        "c_desc": f"tensordesc<bf16[{ROWS}, {c_n}],{lc!r}>",
        "sa_ptr": "*fp32",
    }
    sig.update(dict.fromkeys(("M", "N", "K", "stride_sam", "stride_sak"), "i32"))
    if b_scale_group_n == 1 and mode == 1 and consumers == 2:  # column scales through TMA
        _check_cols_smem(block_n, stages)
        sig["sb_desc"] = f"tensordesc<fp32[1, {block_n}],{SB_LAYOUT.value!r}>"
        consts = _cols_constexprs(block_n, group_m, stages, 132, regs)
        fn, aligned = _fp8_block_ws_cols_kernel, ("sa_ptr",)
    else:
        sig["sb_ptr"] = "*fp32"
        sig.update(dict.fromkeys(("stride_sbn", "stride_sbk"), "i32"))
        consts = _constexprs(b_scale_group_n, block_n, group_m, stages, 132, regs, mode, consumers)
        fn, aligned = _fp8_block_ws_kernel, ("sa_ptr", "sb_ptr")
    return compile_gluon(fn, sig, consts, aligned, options(consumers), arch)
