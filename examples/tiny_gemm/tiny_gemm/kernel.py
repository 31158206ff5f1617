"""out = a @ b.T in float32 with a Triton kernel (a Linear layer's layout).

This is the file a campaign changes. The block sizes below are the knobs; in the Triton
interpreter (CPU) the cost is dominated by the number of programs, so larger blocks run faster
there -- which makes this a good rehearsal target, not a tuning result for a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_N = 16
BLOCK_K = 16

#: What the built-in search may try (``ratchet.yaml: tunables`` names this file; convention in
#: kernel_ratchet/knobs/tunables.py): one block size per round.
SEARCH_SPACE = {"*": {"BLOCK_M": [16, 32, 64], "BLOCK_N": [16, 32, 64], "BLOCK_K": [16, 32]}}


@triton.jit
def _matmul_nt(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * K + kk[None, :],
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + rn[None, :] * K + kk[:, None],
            mask=(rn[None, :] < N) & (kk[:, None] < K),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a: [M, K] float32, b: [N, K] float32 -> [M, N] float32 (= a @ b.T)."""
    M, K = a.shape
    N, K2 = b.shape
    assert K == K2, f"inner dimensions differ: {K} vs {K2}"
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _matmul_nt[grid](a, b, c, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)
    return c
