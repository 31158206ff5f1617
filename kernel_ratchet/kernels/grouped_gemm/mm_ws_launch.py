"""Host side of the warp-specialized grouped bf16/fp16 GEMM (:mod:`.mm_ws`).

:func:`supported` says whether a problem qualifies (an sm_90 GPU, 16-bit operands with 16-byte
aligned rows, the weight one stack, the dgrad's contraction a multiple of 64);
:func:`grouped_mm_ws` builds the load descriptors and launches the kernel (the store
descriptors are built on the device, so a TMA scratch allocator must be set);
:func:`compile_offline` compiles it for sm_90 without a GPU. The grouped launcher
(:mod:`.launch`) runs it for a bucket whose ``TileConfig.gluon_ws`` is set, where it applies.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm.fp8_block_ws_launch import (
    OPTIONS,
    _rows_ok,
    _sm90,
)

# the weight gradient's: the same consumer warpgroups, accumulators and wgmma widths
from kernel_ratchet.kernels.gemm.wgrad_ws_launch import _GL, CONSUMER_REGS, MAX_GROUPS
from kernel_ratchet.kernels.gemm.wgrad_ws_launch import BLOCK_KS as BLOCK_NS
from kernel_ratchet.kernels.grouped_gemm.fp8_ws_launch import stacked_view
from kernel_ratchet.kernels.grouped_gemm.mm_ws import ROWS, STEP, _grouped_mm_ws_kernel
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES
from kernel_ratchet.kernels.offline_compile import compile_gluon

#: Shared memory the kernel takes beside its buffers (barriers, descriptor staging), bytes.
SHARED_RESERVE = 1024


@functools.cache
def _layouts(block_n: int, dtype: torch.dtype, b_kmajor: bool):
    """Shared layouts of an A step half, a B step and an output half."""
    b_block = [block_n, STEP] if b_kmajor else [STEP, block_n]
    return (
        gl.NVMMASharedLayout.get_default_for([ROWS, STEP], _GL[dtype]),
        gl.NVMMASharedLayout.get_default_for(b_block, _GL[dtype]),
        gl.NVMMASharedLayout.get_default_for([ROWS, block_n], _GL[dtype]),
    )


def shares_staging(block_n: int, stages: int) -> bool:
    """Whether the two consumer warpgroups must take one output staging buffer in turn: two
    (``2 * 64 * block_n`` 16-bit values) do not fit beside the ring's ``stages`` stages."""
    ring = stages * (2 * ROWS + block_n) * STEP * 2
    return ring + 2 * ROWS * block_n * 2 > SM90_SHARED_BYTES - SHARED_RESERVE


def _constexprs(
    groups: int, block_n: int, group_m: int, stages: int, sms: int, dtype: torch.dtype, kmajor: bool
) -> dict[str, object]:
    """The kernel's constexpr arguments, the same for a launch and an offline compile."""
    return dict(
        C_LAYOUT=_layouts(block_n, dtype, kmajor)[2],
        G_POW2=max(triton.next_power_of_2(groups), 2),
        BLOCK_N=block_n,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=sms,
        B_KMAJOR=kmajor,
        SHARED_C=shares_staging(block_n, stages),
        CONSUMER_REGS=CONSUMER_REGS,
    )


def supported(a: torch.Tensor, b: torch.Tensor, b_is_nk: bool) -> bool:
    """Whether :func:`grouped_mm_ws` can run ``a [T, Kr]`` by the stack ``b`` here: on an sm_90
    GPU and :func:`operands_ok`."""
    on_sm90 = a.device.type == "cuda" and _sm90(a.device)
    return on_sm90 and operands_ok(a, b, b_is_nk)


def operands_ok(a: torch.Tensor, b: torch.Tensor, b_is_nk: bool) -> bool:
    """Both bf16 (or both fp16) with 16-byte aligned rows, the weight one stack whose groups
    follow each other, 1 to :data:`MAX_GROUPS` groups, an output with 16-byte rows (N a
    multiple of 8), and for the dgrad (``b [G, Kr, N]``) Kr a multiple of 64 (a k step must
    not read the next group's rows)."""
    if a.dtype not in _GL or b.dtype != a.dtype or a.dim() != 2 or b.dim() != 3:
        return False
    G = b.shape[0]
    Kr = a.shape[1]
    N = b.shape[1] if b_is_nk else b.shape[2]
    view = stacked_view(b)
    return (
        view is not None
        and _rows_ok(a)
        and _rows_ok(view)
        and 0 < G <= MAX_GROUPS
        and N % 8 == 0
        and (b_is_nk or Kr % STEP == 0)
        and (b.shape[2] if b_is_nk else b.shape[1]) == Kr
    )


def grouped_mm_ws(
    a: torch.Tensor,
    b: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    b_is_nk: bool = True,
    block_n: int = 256,
    group_m: int = 8,
    stages: int = 3,
    num_sms: int | None = None,
) -> torch.Tensor:
    """``out[rows of g] = a[rows of g] @ b[g]ᵀ`` (``b_is_nk``: ``b [G, N, Kr]``) or ``@ b[g]``
    (``b [G, Kr, N]``) -> ``[T, N]`` in ``a``'s dtype. The caller checks :func:`supported` and
    sets Triton's allocator (device-side descriptors). Shared memory is ``stages * (128 +
    block_n) * 128`` bytes for the ring and ``256 * block_n`` for the output staging, half
    that where it would not fit (:func:`shares_staging`)."""
    if block_n not in BLOCK_NS:
        raise ValueError(f"block_n must be one of {BLOCK_NS} (a wgmma's N), got {block_n}")
    T, Kr = a.shape
    G = b.shape[0]
    N = b.shape[1] if b_is_nk else b.shape[2]
    out = torch.empty((T, N), dtype=a.dtype, device=a.device)
    if T == 0 or N == 0:
        return out
    la, lb, _ = _layouts(block_n, a.dtype, b_is_nk)
    cuda_context.make_current(a.device)
    a_desc = TensorDescriptor.from_tensor(a, [ROWS, STEP], la)
    b_block = [block_n, STEP] if b_is_nk else [STEP, block_n]
    b_desc = TensorDescriptor.from_tensor(stacked_view(b), b_block, lb)
    sms = num_sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    _grouped_mm_ws_kernel[(sms,)](
        a_desc,
        b_desc,
        out,
        group_lens,
        G,
        N,
        Kr,
        out.stride(0),
        **_constexprs(G, block_n, group_m, stages, sms, a.dtype, b_is_nk),
        **OPTIONS,
    )
    return out


def compile_offline(
    *,
    groups: int = 128,
    block_n: int = 256,
    group_m: int = 8,
    stages: int = 3,
    b_is_nk: bool = True,
    arch: int = 90,
):
    """The kernel compiled for ``sm_<arch>`` without a GPU, as :func:`grouped_mm_ws` would
    launch it on bf16 operands; read its cost with
    :func:`kernel_ratchet.kernels.offline.resources`."""
    la, lb, _ = _layouts(block_n, torch.bfloat16, b_is_nk)
    b_block = f"{block_n}, {STEP}" if b_is_nk else f"{STEP}, {block_n}"
    consts = _constexprs(groups, block_n, group_m, stages, 132, torch.bfloat16, b_is_nk)
    sig = {
        "a_desc": f"tensordesc<bf16[{ROWS}, {STEP}],{la!r}>",
        "b_desc": f"tensordesc<bf16[{b_block}],{lb!r}>",
        "c_ptr": "*bf16",
        "lens_ptr": "*i32",
    }
    sig.update(dict.fromkeys(("G", "N", "K", "stride_cm"), "i32"))
    return compile_gluon(_grouped_mm_ws_kernel, sig, consts, ("c_ptr",), OPTIONS, arch)
