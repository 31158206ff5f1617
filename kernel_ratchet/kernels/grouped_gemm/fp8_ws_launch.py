"""Host side of the warp-specialized grouped FP8 GEMM (:mod:`.fp8_ws`).

:func:`supported` says whether a problem qualifies (an sm_90 GPU, FP8 K-major operands with
16-byte aligned rows, 128x128 weight blocks); :func:`grouped_mm_fp8_ws` builds the TMA
descriptors and launches the kernel; :func:`compile_offline` compiles it for sm_90 without a
GPU. The grouped launcher (:mod:`.fp8`) runs it for a bucket whose ``TileConfig.gluon_ws`` is
set, where it applies (``TileConfig.tma_store``: the output stored by TMA where its rows allow).
The TMA store builds its descriptors on the device, so the launch sets Triton's allocator.
"""

from __future__ import annotations

import functools

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernel_ratchet.kernels import cuda_context
from kernel_ratchet.kernels.gemm.fp8_block_ws_launch import OPTIONS, _sm90
from kernel_ratchet.kernels.gemm.launch import _ensure_tma_allocator
from kernel_ratchet.kernels.grouped_gemm.fp8_ws import KGROUP, ROWS, _grouped_fp8_ws_kernel
from kernel_ratchet.kernels.offline_compile import compile_gluon

#: The consumers' registers per thread (the dense kernel's default; OPTIONS are its launch's).
CONSUMER_REGS = 232
#: Groups the device-side schedule holds in one vector (per partition, per tile).
MAX_GROUPS = 1024


def _constexprs(
    g_pow2: int,
    block_n: int,
    group_m: int,
    stages: int,
    sms: int,
    mode: int,
    out_dtype: torch.dtype | None = None,
) -> dict[str, object]:
    """The kernel's constexpr arguments, the same for a launch and an offline compile
    (``out_dtype``: the output's, stored by TMA; None: masked stores)."""
    consts: dict[str, object] = dict(
        G_POW2=g_pow2,
        BLOCK_N=block_n,
        GROUP_M=group_m,
        STAGES=stages,
        NUM_SMS=sms,
        CONSUMER_REGS=CONSUMER_REGS,
        MODE=mode,
        C_LAYOUT=None,
        TMA_STORE=False,
    )
    if out_dtype is not None:
        layout = gl.NVMMASharedLayout.get_default_for([ROWS, block_n], _GL_OUT[out_dtype])
        consts.update(C_LAYOUT=layout, TMA_STORE=True)
    return consts


#: Output dtypes of the TMA store, in Gluon's names.
_GL_OUT = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16, torch.float32: gl.float32}


def tma_storable(out: torch.Tensor) -> bool:
    """Whether the kernel can store ``out [T, N]`` by TMA: a dtype it names, contiguous rows
    of a multiple of 16 bytes from a 16-byte aligned base (each group's first row is then
    aligned too)."""
    return out.dtype in _GL_OUT and _rows_ok(out)


@functools.cache
def _layouts(block_n: int, a_dtype: torch.dtype, b_dtype: torch.dtype):
    gl_of = {torch.float8_e4m3fn: gl.float8e4nv, torch.float8_e5m2: gl.float8e5}
    return (
        gl.NVMMASharedLayout.get_default_for([ROWS, KGROUP], gl_of[a_dtype]),
        gl.NVMMASharedLayout.get_default_for([block_n, KGROUP], gl_of[b_dtype]),
    )


def _rows_ok(t: torch.Tensor) -> bool:
    return (
        t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(-2) * t.element_size()) % 16 == 0
    )


def supported(a: torch.Tensor, b: torch.Tensor, block_n: int) -> bool:
    """Whether ``a [T, K]`` times each group's ``b[g] [N, K]`` can run here: an sm_90 GPU, FP8
    K-major operands with 16-byte aligned rows, ``b`` one stack whose groups follow each other
    (viewed ``[G * N, K]``), ``block_n`` dividing the 128-wide weight blocks, and at most
    :data:`MAX_GROUPS` groups."""
    on_sm90 = a.device.type == "cuda" and _sm90(a.device)
    return on_sm90 and operands_ok(a, b, block_n)


def stacked_view(b: torch.Tensor) -> torch.Tensor | None:
    """A weight stack ``[G, R, C]`` viewed ``[G * R, C]`` (last axis contiguous), or None when
    its groups do not follow each other in memory."""
    G, R, C = b.shape
    if b.stride(2) != 1 or b.stride(0) != R * b.stride(1):
        return None
    return b.as_strided((G * R, C), (b.stride(1), 1))


def operands_ok(a: torch.Tensor, b: torch.Tensor, block_n: int) -> bool:
    """:func:`supported` without the device: the operands and ``block_n`` alone."""
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    if a.dtype not in fp8 or b.dtype not in fp8 or a.dim() != 2 or b.dim() != 3:
        return False
    G, _, K = b.shape
    return (
        _rows_ok(a)
        and _rows_ok(b)
        and stacked_view(b) is not None
        and KGROUP % block_n == 0
        and 0 < G <= MAX_GROUPS
        and a.shape[1] == K
    )


def grouped_mm_fp8_ws(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    b: torch.Tensor,
    b_scale: torch.Tensor,
    group_lens: torch.Tensor,
    *,
    out_dtype: torch.dtype = torch.bfloat16,
    block_n: int = 128,
    stages: int = 6,
    group_m: int = 8,
    mode: int = 1,
    num_sms: int | None = None,
    tma_store: bool = False,
) -> torch.Tensor:
    """``out[rows of g] = a[rows of g] @ b[g]ᵀ`` with blockwise scales (module docstring of
    :mod:`.fp8_ws`): ``a [T, K]``, scales ``[T, ceil(K/128)]``; ``b [G, N, K]``, scales
    ``[G, ceil(N/128), ceil(K/128)]``. The caller checks :func:`supported` first. Shared
    memory is ``stages * (128 + block_n) * 128`` bytes, and with ``tma_store`` (where
    :func:`tma_storable` allows it; masked stores elsewhere, the same values) two output
    staging buffers of ``64 * block_n`` elements."""
    T, K = a.shape
    G, N, _ = b.shape
    out = torch.empty((T, N), dtype=out_dtype, device=a.device)
    if T == 0 or N == 0:
        return out
    la, lb = _layouts(block_n, a.dtype, b.dtype)
    cuda_context.make_current(a.device)
    a_desc = TensorDescriptor.from_tensor(a, [ROWS, KGROUP], la)
    b_desc = TensorDescriptor.from_tensor(
        stacked_view(b),
        [block_n, KGROUP],
        lb,
    )
    sms = num_sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    store_dtype = out_dtype if tma_store and tma_storable(out) else None
    if store_dtype is not None and a.device.type == "cuda":
        _ensure_tma_allocator()
    _grouped_fp8_ws_kernel[(sms,)](
        a_desc,
        b_desc,
        out,
        a_scale,
        b_scale,
        group_lens,
        G,
        N,
        K,
        out.stride(0),
        a_scale.stride(0),
        a_scale.stride(1),
        b_scale.stride(0),
        b_scale.stride(1),
        b_scale.stride(2),
        **_constexprs(
            max(triton.next_power_of_2(G), 2), block_n, group_m, stages, sms, mode, store_dtype
        ),
        **OPTIONS,
    )
    return out


def compile_offline(
    *,
    groups: int = 128,
    block_n: int = 128,
    stages: int = 6,
    group_m: int = 8,
    mode: int = 1,
    arch: int = 90,
    tma_store: bool = False,
):
    """The kernel compiled for ``sm_<arch>`` without a GPU (Triton's front end and the ptxas it
    ships), as :func:`grouped_mm_fp8_ws` would launch it on E4M3 operands and a bf16 output;
    read its cost with :func:`kernel_ratchet.kernels.offline.resources`."""
    la, lb = _layouts(block_n, torch.float8_e4m3fn, torch.float8_e4m3fn)
    fn = _grouped_fp8_ws_kernel
    store = torch.bfloat16 if tma_store else None
    consts = _constexprs(
        max(triton.next_power_of_2(groups), 2), block_n, group_m, stages, 132, mode, store
    )
    sig = {
        "a_desc": f"tensordesc<fp8e4nv[{ROWS}, {KGROUP}],{la!r}>",
        "b_desc": f"tensordesc<fp8e4nv[{block_n}, {KGROUP}],{lb!r}>",
        "c_ptr": "*bf16",
        "sa_ptr": "*fp32",
        "sb_ptr": "*fp32",
        "lens_ptr": "*i32",
    }
    sig.update(dict.fromkeys(("G", "N", "K", "stride_cm"), "i32"))
    sig.update(
        dict.fromkeys(("stride_sam", "stride_sak", "stride_sbg", "stride_sbn", "stride_sbk"), "i32")
    )
    return compile_gluon(fn, sig, consts, ("c_ptr", "sa_ptr", "sb_ptr"), OPTIONS, arch)
