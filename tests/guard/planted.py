"""Planted candidates: realistic kernel-wrapper sources, each one round's change.

``INCUMBENT`` is an FP8 Linear wrapper (``out = a @ bᵀ``, ``a`` activations, ``b`` the weight)
in the style of the bundled GEMM; every other constant is the incumbent with one change. The
Triton bodies are abbreviated: the static audit reads the wrapper code, never runs it.
"""

from __future__ import annotations

PATH = "my_kernels/gemm/fp8_linear.py"

_HEADER = '''"""FP8 Linear ``out = a @ bᵀ`` with row-wise scales (forward + backward)."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 64
NUM_STAGES = 3


@triton.jit
def _quant_rowwise_kernel(x_ptr, q_ptr, s_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    s = tl.max(tl.abs(x)) / 448.0
    tl.store(q_ptr + row * N + cols, (x / s).to(tl.float8e4nv), mask=cols < N)
    tl.store(s_ptr + row, s)


@triton.jit
def _fp8_gemm_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    tl.store(c_ptr + pid_m * BM * N + pid_n * BN, acc)


def quant_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.empty_like(x, dtype=torch.float8_e4m3fn)
    s = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    _quant_rowwise_kernel[(x.shape[0],)](x, q, s, x.shape[1], BLOCK=1024)
    return q, s
'''

_GEMM = """

def fp8_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    qa, sa = {quant_a}(a)
    qb, sb = {quant_b}(b)
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _fp8_gemm_kernel[grid](qa, qb, c, sa, sb, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K,
                           num_stages=NUM_STAGES)
    return c


class Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward({saved})
        return {fwd}(a, b)

    @staticmethod
    def backward(ctx, dout):
        a, b = ctx.saved_tensors
        da = fp8_gemm(dout, b.t().contiguous())
        db = fp8_gemm(dout.t().contiguous(), a.t().contiguous())
        return da, db
"""


def _src(
    extra: str = "",
    *,
    quant_a: str = "quant_rowwise",
    quant_b: str = "quant_rowwise",
    saved: str = "a, b",
    fwd: str = "fp8_gemm",
    header: str = _HEADER,
) -> str:
    body = _GEMM.format(quant_a=quant_a, quant_b=quant_b, saved=saved, fwd=fwd)
    return header + extra + body


INCUMBENT = _src()

#: W2: the activation's quantization cached on id(a) -- free in a benchmark, a miss in training.
W2_ID = _src(
    """

_ACT_Q_CACHE: dict = {}


def quant_act_cached(a: torch.Tensor):
    key = id(a)
    hit = _ACT_Q_CACHE.get(key)
    if hit is not None:
        return hit
    q = quant_rowwise(a)
    _ACT_Q_CACHE[key] = q
    return q
""",
    quant_a="quant_act_cached",
)

#: The same cache "made safe" with _version, shape and dtype: still W2.
W2_VERSIONED = W2_ID.replace("key = id(a)", "key = (id(a), a._version, tuple(a.shape), a.dtype)")

#: W2 on grad_out by address: data_ptr() of a fresh tensor (and the allocator reuses it).
W2_DOUT_PTR = _src("""

_DOUT_Q: dict = {}


def quant_grad_cached(dout: torch.Tensor):
    if dout.untyped_storage().data_ptr() in _DOUT_Q:
        return _DOUT_Q[dout.untyped_storage().data_ptr()]
    q = _DOUT_Q[dout.untyped_storage().data_ptr()] = quant_rowwise(dout)
    return q
""")

#: W3: functools.lru_cache over the forward (hash(tensor) is its id).
W3_LRU = _src(
    """

@functools.lru_cache(maxsize=64)
def _cached_forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return fp8_gemm(a, b)
""",
    fwd="_cached_forward",
)

#: W3: remember the last call's inputs and output in module globals (an `is` test).
W3_GLOBAL_LAST = _src(
    """

_LAST = None


def fp8_gemm_last(a, b):
    global _LAST
    if _LAST is not None and _LAST[0] is a and _LAST[1] is b:
        return _LAST[2]
    out = fp8_gemm(a, b)
    _LAST = (a, b, out)
    return out
""",
    fwd="fp8_gemm_last",
)

#: W1 (allowed): the weight's quantization cached on id(weight) + _version + shape.
W1_WEIGHT = _src(
    """

_W_Q_CACHE: dict = {}


def quant_weight_cached(b: torch.Tensor):
    key = (id(b), b._version, tuple(b.shape))
    hit = _W_Q_CACHE.get(key)
    if hit is None:
        _W_Q_CACHE.clear()
        hit = _W_Q_CACHE[key] = quant_rowwise(b)
    return hit
""",
    quant_b="quant_weight_cached",
)

#: A weight cache without _version: stale after the optimizer step.
W1_NO_VERSION = W1_WEIGHT.replace(
    "key = (id(b), b._version, tuple(b.shape))", "key = (id(b), tuple(b.shape))"
)

#: A weight cache whose parameter has an unusual name, made a weight by annotation.
W1_ANNOTATED = (
    W1_WEIGHT.replace("quant_weight_cached(b: torch.Tensor):", "quant_weight_cached(p):")
    .replace("(id(b), b._version, tuple(b.shape))", "(id(p), p._version)")
    .replace("quant_rowwise(b)", "quant_rowwise(p)  # ratchet: weight=p")
)

#: K1: tile and pipeline constants only.
K1_TILES = INCUMBENT.replace("BLOCK_K = 64", "BLOCK_K = 128").replace(
    "NUM_STAGES = 3", "NUM_STAGES = 4"
)

#: K4: forward saves the weight's FP8 copy (produced in the same call) for backward.
K4_SAVED = _src(saved="a, b, *quant_rowwise(b)")

GROUPED_PATH = "my_kernels/moe/grouped.py"

GROUPED_INCUMBENT = '''"""Grouped GEMM: rows of group g times w[g]ᵀ, group_lens at run time."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_M = 64


@triton.jit
def _grouped_kernel(x_ptr, w_ptr, out_ptr, lens_ptr, G, N, K, BLOCK_M: tl.constexpr):
    g = tl.program_id(1)
    rows = tl.load(lens_ptr + g)
    tl.store(out_ptr + g, rows)


def grouped_mm(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
    G, N, K = w.shape
    out = torch.empty((x.shape[0], N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(x.shape[0], BLOCK_M), G)
    _grouped_kernel[grid](x, w, out, group_lens, G, N, K, BLOCK_M=BLOCK_M)
    return out
'''

#: Uniform-only shortcut: rows per expert as a constexpr (M // G); group_lens no longer read.
GROUPED_UNIFORM = '''"""Grouped GEMM: rows of group g times w[g]ᵀ, group_lens at run time."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_M = 64


@triton.jit
def _grouped_kernel(x_ptr, w_ptr, out_ptr, G, N, K, BLOCK_M: tl.constexpr,
                    ROWS_PER_GROUP: tl.constexpr):
    g = tl.program_id(1)
    tl.store(out_ptr + g, ROWS_PER_GROUP)


def grouped_mm(x: torch.Tensor, w: torch.Tensor, group_lens: torch.Tensor) -> torch.Tensor:
    G, N, K = w.shape
    out = torch.empty((x.shape[0], N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(x.shape[0] // G, BLOCK_M), G)
    _grouped_kernel[grid](x, w, out, G, N, K, BLOCK_M=BLOCK_M, ROWS_PER_GROUP=x.shape[0] // G)
    return out
'''

#: Tiny-GEMM output cache keyed on id() of both operands (run by the dynamic test).
TINY_OUT_CACHE = '''"""tiny_gemm's matmul_nt with its output memoized on the operands' identity."""

from __future__ import annotations

import torch

from tiny_gemm.kernel import matmul_nt as _matmul_nt_kernel

_OUT_CACHE: dict = {}


def matmul_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    key = (id(a), id(b))
    hit = _OUT_CACHE.get(key)
    if hit is not None:
        return hit
    out = _matmul_nt_kernel(a, b)
    _OUT_CACHE[key] = out
    return out
'''

#: Tiny-GEMM with a W1 cache: b's contiguous copy kept per (id(b), b._version).
TINY_WEIGHT_CACHE = '''"""tiny_gemm's matmul_nt with the weight's contiguous copy cached (W1)."""

from __future__ import annotations

import torch

from tiny_gemm.kernel import matmul_nt as _matmul_nt_kernel

_W_CACHE: dict = {}


def _weight_copy(b: torch.Tensor) -> torch.Tensor:
    key = (id(b), b._version, tuple(b.shape))
    hit = _W_CACHE.get(key)
    if hit is None:
        _W_CACHE.clear()
        hit = _W_CACHE[key] = b.contiguous().clone()
    return hit


def matmul_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _matmul_nt_kernel(a, _weight_copy(b))
'''
