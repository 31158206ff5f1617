"""Stream-K dense GEMM (Triton) for 16-bit operands: the k-iterations of all output tiles split
evenly over one wave of programs.

A grid of whole tiles leaves SMs idle in its last wave (160 tiles on 132 SMs run as two waves
of which the second is a fifth full) and a grid of few tiles leaves most SMs idle (a long K
with 64 output tiles). Here the iteration space ``tiles x k_tiles`` (tile-major) is cut into
``P`` contiguous ranges, one per program, ``P`` at most the SM count, so every SM does the same
number of k-iterations. A range starts and ends anywhere inside a tile; the tiles it overlaps
are its segments.

Each program walks its segments from the last to the first. Only its last segment can stop
short of its tile's final k-iteration: that partial sum goes to the program's slot of an fp32
workspace, then the program raises its flag (release). The segment that holds a tile's final
k-iteration finishes the tile: it adds the partials of the programs before it that cover the
tile's earlier k-iterations (each flag awaited with acquire), and stores. Walking backwards
makes the finisher of a tile the program that reaches it last: its contributors, lower program
ids, computed their partials at their start. The waits need the contributors resident or done:
the grid is at most one program per SM, and a lower program id never waits on a higher one
(which also makes the sequential interpreter run it without deadlock).

A finisher resets each flag it consumed (every program hands on at most one partial), so a
launch leaves the flags zero and the launcher (:mod:`.streamk_launch`) keeps the workspace and
flags per stream instead of allocating and zeroing them per call. It runs this kernel for a
config with ``stream_k`` (16-bit, no scales).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernel_ratchet.kernels.gemm.kernel_tile import (
    _load_ab,
    _output,
    _sources,
    _store_tile,
    _tile_coords,
)


@triton.jit
def _gemm_streamk_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    ws_ptr,
    flags_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bn,
    stride_bk,
    stride_cm,
    stride_cn,
    A_KMAJOR: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    USE_TMA: tl.constexpr,
    PROGRAMS: tl.constexpr,
    TMA_STORE: tl.constexpr,
):
    """Grid: ``PROGRAMS`` programs, at most the SM count and at most ``tiles x k_tiles``."""
    a_src, b_src = _sources(
        a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk,
        A_KMAJOR, B_KMAJOR, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA,
    )  # fmt: skip
    c_dst = _output(c_ptr, M, N, stride_cm, BLOCK_M, BLOCK_N, TMA_STORE)
    pid = tl.program_id(0).to(tl.int64)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K).to(tl.int64)
    total = num_pid_m * num_pid_n * k_tiles
    start = pid * total // PROGRAMS
    it = (pid + 1) * total // PROGRAMS  # this program's range is [start, it)
    offs_k = tl.arange(0, BLOCK_K)
    slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    while it > start:
        tile = (it - 1) // k_tiles
        t0 = tile * k_tiles
        kt0 = tl.maximum(start, t0) - t0
        kt1 = it - t0
        pid_m, pid_n = _tile_coords(tile.to(tl.int32), num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        offs_m = off_m + tl.arange(0, BLOCK_M)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        offs_am = tl.where(offs_m < M, offs_m, 0)
        offs_bn = tl.where(offs_n < N, offs_n, 0)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(kt0.to(tl.int32), kt1.to(tl.int32)):
            a, b = _load_ab(
                a_src, b_src, kt, off_m, off_n, offs_am, offs_bn, offs_k, K,
                stride_am, stride_ak, stride_bn, stride_bk, A_KMAJOR, B_KMAJOR, BLOCK_K, USE_TMA,
            )  # fmt: skip
            acc = tl.dot(a, b, acc)
        if kt1 < k_tiles:  # the tile's earlier part: hand the partial sum to its finisher
            tl.store(ws_ptr + pid * (BLOCK_M * BLOCK_N) + slot, acc)
            tl.debug_barrier()  # every thread's stores precede the one thread's release
            tl.atomic_xchg(flags_ptr + pid, 1, sem="release")
        else:
            if kt0 > 0:  # programs q0 .. pid-1 hold the tile's k-iterations before kt0
                q0 = ((t0 + 1) * PROGRAMS - 1) // total
                for q in range(q0.to(tl.int32), pid.to(tl.int32)):
                    while tl.atomic_add(flags_ptr + q, 0, sem="acquire") == 0:
                        pass
                    acc += tl.load(ws_ptr + q * (BLOCK_M * BLOCK_N) + slot)
                    tl.atomic_xchg(flags_ptr + q, 0, sem="relaxed")  # consumed: ready for reuse
            _store_tile(
                acc, c_ptr, c_dst, off_m, off_n, offs_m, offs_n, M, N, stride_cm, stride_cn,
                BLOCK_M, BLOCK_N, 1, TMA_STORE,
            )  # fmt: skip
        it = t0 + kt0
