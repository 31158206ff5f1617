"""Host side of the warp-specialized FP8 weight gradient of the grouped GEMM
(:mod:`.wgrad_fp8_ws`).

:func:`supported` says whether a problem qualifies; :func:`grouped_wgrad_fp8_ws` builds the TMA
descriptors and launches the kernel; :func:`compile_offline` compiles it for sm_90 without a
GPU. The grouped FP8 step (:mod:`.fp8`) runs it where :data:`.configs.WGRAD_FP8_WS` is set and
the operands qualify.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm import fp8_block_ws_launch as dense
from kernel_ratchet.kernels.gemm.fp8_block_ws import KGROUP, ROWS
from kernel_ratchet.kernels.gemm.fp8_block_ws_cols import SB_LAYOUT
from kernel_ratchet.kernels.grouped_gemm.wgrad_fp8_ws import _wgrad_fp8_ws_kernel
from kernel_ratchet.kernels.offline_compile import compile_gluon
from kernel_ratchet.kernels.quant.launch import Fp8Quantized

#: Groups the device-side schedule holds in one vector (per partition, per tile): with 512
#: the producer warp's 40 registers spill them (48 B, sm_90 offline compile); more groups run
#: the Triton kernel.
MAX_GROUPS = 256
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def _constexprs(groups: int, block_n: int, group_m: int, stages: int, sms: int) -> dict:
    """The kernel's constexpr arguments, the same for a launch and an offline compile."""
    return dict(
        G_POW2=max(triton.next_power_of_2(groups), 2),
        BLOCK_N=block_n,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=sms,
        CONSUMER_REGS=dense.CONSUMER_REGS[2],
    )


def operands_ok(dyt: Fp8Quantized, xt: Fp8Quantized, groups: int, out_dtype: torch.dtype) -> bool:
    """The layout the kernel takes, on any device: FP8 column-wise copies with 16-byte aligned
    rows, N a multiple of 128 (a tile stays in its group's rows of dW), K of 8 (16-byte output
    rows), the X scales chunk-major (a chunk's row of them loads by TMA), 1 to
    :data:`MAX_GROUPS` groups, a 16-bit output."""
    N, K = dyt.data.shape[0], xt.data.shape[0]
    return (
        dyt.data.dtype in _FP8
        and xt.data.dtype in _FP8
        and all(dense._rows_ok(t) for t in (dyt.data, xt.data))
        and dyt.data.shape[1] == xt.data.shape[1] > 0
        and N % (2 * ROWS) == 0
        and K % 8 == 0
        and dense.col_scales_ok(xt.scale)
        and 0 < groups <= MAX_GROUPS
        and out_dtype in (torch.bfloat16, torch.float16)
    )


def supported(dyt: Fp8Quantized, xt: Fp8Quantized, groups: int, out_dtype: torch.dtype) -> bool:
    """:func:`operands_ok` on an sm_90 GPU."""
    dev = dyt.data.device
    return dev.type == "cuda" and dense._sm90(dev) and operands_ok(dyt, xt, groups, out_dtype)


def grouped_wgrad_fp8_ws(
    dyt: Fp8Quantized,
    xt: Fp8Quantized,
    group_lens: torch.Tensor,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    block_n: int = 128,
    stages: int = 4,
    group_m: int = 8,
    num_sms: int | None = None,
) -> torch.Tensor:
    """``dw[g] = dy_gᵀ x_g`` -> ``[G, N, K]`` from the column-wise copies of
    ``quant_fp8_dual_1x128_grouped`` (each group its own chunks); the caller checks
    :func:`supported` first. ``block_n`` columns of K per tile (two 64-row halves of N),
    ``stages`` chunks in flight (at most 5 of 128 columns), ``group_m`` bands of n tiles."""
    N, K, G = dyt.data.shape[0], xt.data.shape[0], group_lens.shape[0]
    dense._check_cols_smem(block_n, stages)
    dw = torch.empty((G, N, K), dtype=out_dtype, device=dyt.data.device)
    la, lb, lc = dense._layouts(block_n, dyt.data.dtype, xt.data.dtype, out_dtype, block_n)
    cuda_context.make_current(dyt.data.device)
    a_desc = TensorDescriptor.from_tensor(dyt.data, [ROWS, KGROUP], la)
    b_desc = TensorDescriptor.from_tensor(xt.data, [block_n, KGROUP], lb)
    sb_desc = TensorDescriptor.from_tensor(xt.scale.t(), [1, block_n], SB_LAYOUT.value)
    c_desc = TensorDescriptor.from_tensor(dw.view(G * N, K), [ROWS, block_n], lc)
    sms = num_sms or torch.cuda.get_device_properties(dw.device).multi_processor_count
    tiles = G * (N // (2 * ROWS)) * triton.cdiv(K, block_n)
    _wgrad_fp8_ws_kernel[(min(sms, tiles),)](
        a_desc, b_desc, sb_desc, c_desc, dyt.scale, group_lens, G, N, K, dyt.scale.stride(0),
        dyt.scale.stride(1), **_constexprs(G, block_n, group_m, stages, sms), **dense.OPTIONS,
    )  # fmt: skip
    return dw


def compile_offline(
    *, groups: int = 128, block_n: int = 128, stages: int = 4, group_m: int = 8, arch: int = 90
):
    """The kernel compiled for ``sm_<arch>`` without a GPU (Triton's front end and the ptxas it
    ships), as :func:`grouped_wgrad_fp8_ws` would launch it on E4M3 operands and a bf16 dW;
    read its cost with :func:`kernel_ratchet.kernels.offline.resources`."""
    dense._check_cols_smem(block_n, stages)
    e4m3 = torch.float8_e4m3fn
    la, lb, lc = dense._layouts(block_n, e4m3, e4m3, torch.bfloat16, block_n)
    sig = {
        "a_desc": f"tensordesc<fp8e4nv[{ROWS}, {KGROUP}],{la!r}>",
        "b_desc": f"tensordesc<fp8e4nv[{block_n}, {KGROUP}],{lb!r}>",
        "sb_desc": f"tensordesc<fp32[1, {block_n}],{SB_LAYOUT.value!r}>",
        "c_desc": f"tensordesc<bf16[{ROWS}, {block_n}],{lc!r}>",
        "sa_ptr": "*fp32",
        "lens_ptr": "*i32",
    }
    sig.update(dict.fromkeys(("G", "N", "K", "stride_sam", "stride_sak"), "i32"))
    consts = _constexprs(groups, block_n, group_m, stages, 132)
    return compile_gluon(
        _wgrad_fp8_ws_kernel, sig, consts, ("sa_ptr", "lens_ptr"), dense.OPTIONS, arch
    )
