"""Host side of the warp-specialized grouped weight gradient (:mod:`.wgrad_ws`).

:func:`supported` says whether a problem qualifies (an sm_90 GPU, bf16/fp16 operands with
16-byte aligned rows, N a multiple of 128); :func:`grouped_wgrad_ws` builds the output's TMA
descriptor and launches the kernel (the loads' descriptors are built on the device, so a TMA
scratch allocator must be set); :func:`compile_offline` compiles it for sm_90 without a GPU.
The grouped launcher (:mod:`kernel_ratchet.kernels.grouped_gemm.launch`) runs it for a wgrad
bucket whose ``TileConfig.gluon_ws`` is set, where it applies.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental.gluon import language as gl

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm import descriptor_launch
from kernel_ratchet.kernels.gemm.fp8_block_ws_launch import (
    OPTIONS,
    _rows_ok,
    _sm90,
)
from kernel_ratchet.kernels.gemm.wgrad_ws import ROWS, STEP, _grouped_wgrad_ws_kernel
from kernel_ratchet.kernels.offline_compile import compile_gluon

#: The consumers' registers per thread (a 64 x 256 fp32 accumulator is 128 of them).
CONSUMER_REGS = 232
#: Groups the device-side schedule holds in one vector (per partition).
MAX_GROUPS = 1024
#: Output columns a tile may have (the wgmma's N: at most 256).
BLOCK_KS = (64, 128, 256)
_GL = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


@functools.cache
def _layouts(block_k: int, dtype: torch.dtype, out_dtype: torch.dtype):
    """Shared layouts of a dY step half, an X step and an output half."""
    return (
        gl.NVMMASharedLayout.get_default_for([STEP, ROWS], _GL[dtype]),
        gl.NVMMASharedLayout.get_default_for([STEP, block_k], _GL[dtype]),
        gl.NVMMASharedLayout.get_default_for([ROWS, block_k], _GL[out_dtype]),
    )


def _constexprs(
    groups: int,
    block_k: int,
    group_n: int,
    ordered: bool,
    stages: int,
    sms: int,
    dtype: torch.dtype,
    out_dtype: torch.dtype,
) -> dict[str, object]:
    """The kernel's constexpr arguments, the same for a launch and an offline compile."""
    l_dy, l_x, _ = _layouts(block_k, dtype, out_dtype)
    return dict(
        DY_LAYOUT=l_dy,
        X_LAYOUT=l_x,
        G_POW2=max(triton.next_power_of_2(groups), 2),
        BLOCK_K=block_k,
        GROUP_N=group_n,
        ORDERED=ordered,
        STAGES=stages,
        NUM_SMS=sms,
        CONSUMER_REGS=CONSUMER_REGS,
    )


def longest_first_order(group_lens: torch.Tensor) -> torch.Tensor:
    """The group indices by decreasing row count, ties by index (int32, on the device)."""
    return torch.argsort(group_lens, descending=True, stable=True).to(torch.int32)


def supported(dy: torch.Tensor, x: torch.Tensor, groups: int, out_dtype: torch.dtype) -> bool:
    """Whether ``dy [T, N]`` and ``x [T, K]`` can run here: on an sm_90 GPU and
    :func:`operands_ok`."""
    on_sm90 = dy.device.type == "cuda" and _sm90(dy.device)
    return on_sm90 and operands_ok(dy, x, groups, out_dtype)


def operands_ok(dy: torch.Tensor, x: torch.Tensor, groups: int, out_dtype: torch.dtype) -> bool:
    """Both bf16 (or both fp16) with 16-byte aligned rows (so every group's first row is
    aligned too), N a multiple of 128 (a tile's rows stay in one group of the output viewed
    ``[G * N, K]``), a 16-bit output with 16-byte rows (K a multiple of 8), and 1 to
    :data:`MAX_GROUPS` groups."""
    if dy.dtype not in _GL or x.dtype != dy.dtype or out_dtype not in _GL:
        return False
    return (
        _rows_ok(dy)
        and _rows_ok(x)
        and dy.shape[1] % (2 * ROWS) == 0
        and x.shape[1] % 8 == 0
        and 0 < groups <= MAX_GROUPS
    )


def grouped_wgrad_ws(
    dy: torch.Tensor,
    x: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    out_dtype: torch.dtype | None = None,
    block_k: int = 256,
    group_n: int = 1,
    longest_first: bool = False,
    stages: int = 3,
    num_sms: int | None = None,
    runners: dict | None = None,
) -> torch.Tensor:
    """``dw[g] = dy_gᵀ @ x_g`` -> ``[G, N, K]`` (zeros for an empty group). The caller checks
    :func:`supported` first and sets Triton's allocator (device-side descriptors).
    ``longest_first``: the programs walk the groups by decreasing row count (a sort of
    ``group_lens`` on the device, no host read) instead of by index. Shared memory is
    ``stages * (128 + block_k) * 128 + 256 * block_k`` bytes. ``runners``: the caller's table of
    direct launches (:mod:`.descriptor_launch`), a geometry's later calls launched straight
    through the compiled kernel's C launcher; None: Triton's launch every call."""
    if block_k not in BLOCK_KS:
        raise ValueError(f"block_k must be one of {BLOCK_KS} (a wgmma's N), got {block_k}")
    T, N = dy.shape
    K = x.shape[1]
    G = group_lens.shape[0]
    out_dtype = out_dtype or x.dtype
    dw = torch.empty((G, N, K), dtype=out_dtype, device=x.device)
    if dw.numel() == 0:
        return dw
    _, _, l_out = _layouts(block_k, x.dtype, out_dtype)
    cuda_context.make_current(dw.device)
    sms = num_sms or torch.cuda.get_device_properties(x.device).multi_processor_count
    tiles = G * (N // (2 * ROWS)) * triton.cdiv(K, block_k)
    if longest_first:  # the order follows the lengths in one buffer: no kernel argument more
        order = longest_first_order(group_lens)
        group_lens = torch.cat([group_lens.to(torch.int32), order])
    rest = (G, N, K, dy.stride(0), x.stride(0))
    config = (block_k, group_n, longest_first, stages, sms)
    key = (x.dtype, out_dtype, x.device.index, *rest, *config)
    descriptor_launch.launch(
        _grouped_wgrad_ws_kernel,
        runners,
        (min(sms, tiles),),
        (dy, x, dw.view(G * N, K), group_lens),
        (None, None, ([ROWS, block_k], l_out), None),
        rest,
        _constexprs(G, block_k, group_n, longest_first, stages, sms, x.dtype, out_dtype) | OPTIONS,
        key,
    )
    return dw


def compile_offline(
    *,
    groups: int = 128,
    block_k: int = 256,
    group_n: int = 1,
    longest_first: bool = False,
    stages: int = 3,
    arch: int = 90,
):
    """The kernel compiled for ``sm_<arch>`` without a GPU, as :func:`grouped_wgrad_ws` would
    launch it on bf16 operands; read its cost with
    :func:`kernel_ratchet.kernels.offline.resources`."""
    _, _, l_out = _layouts(block_k, torch.bfloat16, torch.bfloat16)
    fn = _grouped_wgrad_ws_kernel
    consts = _constexprs(
        groups, block_k, group_n, longest_first, stages, 132, torch.bfloat16, torch.bfloat16
    )
    sig = {
        "dy_ptr": "*bf16",
        "x_ptr": "*bf16",
        "dw_desc": f"tensordesc<bf16[{ROWS}, {block_k}],{l_out!r}>",
        "lens_ptr": "*i32",
    }
    sig.update(dict.fromkeys(("G", "N", "K", "stride_dy", "stride_x"), "i32"))
    return compile_gluon(fn, sig, consts, ("dy_ptr", "x_ptr"), OPTIONS, arch)
