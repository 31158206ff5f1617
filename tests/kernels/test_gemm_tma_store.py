"""The dense GEMM's TMA-stored epilogue and flattened persistent loop.

The kernel runs in the Triton interpreter here (fp16: the interpreter's bf16 dots are wrong),
launched directly because the launcher keeps the interpreter on pointer loads; the launcher's
choice of epilogue is checked on its plan, decided as on a GPU. ``test_gemm_gpu.py`` runs the
same configs compiled, in bf16.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.kernel import SCALE_NONE, _gemm_kernel

#: Output rows and columns that leave partial 32-wide tiles; all strides 16-byte aligned.
M, N, K = 72, 88, 80
SENTINEL = 7.0
LAYOUTS = {"fwd": (True, True), "dgrad": (True, False), "wgrad": (False, False)}


def _run(a_kmajor: bool, b_kmajor: bool, tma_store: int, persistent: bool):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(N, K, generator=g).half()
    ref = a.float() @ b.float().t()
    A = a if a_kmajor else a.t().contiguous()
    B = b if b_kmajor else b.t().contiguous()
    buf = torch.full((M * N + 64,), SENTINEL, dtype=torch.float16)  # guard band after C
    c = buf[: M * N].view(M, N)
    am, ak = (K, 1) if a_kmajor else (1, M)
    bn, bk = (K, 1) if b_kmajor else (1, N)
    tiles = -(-M // 32) * -(-N // 32)
    _gemm_kernel[(3,) if persistent else (tiles,)](
        A, B, c, c, c, M, N, K, am, ak, bn, bk, N, 1, 0, 0, 0, 0,
        SCALE_MODE=SCALE_NONE, SB_GROUP_N=128, A_KMAJOR=a_kmajor, B_KMAJOR=b_kmajor,
        BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, SPLIT_K=1, USE_TMA=True,
        PERSISTENT=persistent, NUM_SMS=3, K_UNROLL=1, WARP_SPECIALIZE=False, A_ALIGN=1,
        B_ALIGN=1, FLATTEN=persistent, TMA_STORE=tma_store,
    )  # fmt: skip
    return c, ref, buf[M * N :]


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter test (CPU machines)")
@pytest.mark.parametrize("persistent", [False, True], ids=["grid", "persistent-flat"])
@pytest.mark.parametrize("tma_store", [1, 2], ids=["tile", "halves"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_tma_stored_tiles_are_the_product_and_nothing_past_the_output(
    layout, tma_store, persistent
):
    c, ref, guard = _run(*LAYOUTS[layout], tma_store, persistent)
    assert torch.allclose(c.float(), ref, atol=0.05, rtol=0.01), (c.float() - ref).abs().max()
    assert torch.all(guard == SENTINEL), "a partial tile's store wrote past the output"


def _plan(cfg: GemmConfig, N: int, *, split: int = 1, dtype=torch.bfloat16):
    launch._plan.cache_clear()
    geom = (4096, True, True, 4096, True, True)
    return launch._plan(
        "bf16", cfg.with_(split_k=split), 4096, N, 4096, geom, SCALE_NONE, 132, False, 0, dtype
    )


FLAT = GemmConfig(128, 256, 64, persistent=True, use_tma=True, flatten=True, tma_store=2)


def test_the_launcher_keeps_the_tma_store_where_tma_can_write_the_output():
    assert _plan(FLAT, 4096).kwargs["TMA_STORE"] == 2
    assert _plan(FLAT, 4104).kwargs["TMA_STORE"] == 2  # 8208-byte rows
    assert _plan(FLAT, 4100, dtype=torch.float32).kwargs["TMA_STORE"] == 2  # 16400 bytes
    # rows of 8200 bytes, pointer loads, or split-K's fp32 atomics: masked pointer stores
    assert _plan(FLAT, 4100).kwargs["TMA_STORE"] == 0
    assert _plan(FLAT.with_(use_tma=False), 4096).kwargs["TMA_STORE"] == 0
    assert _plan(FLAT.with_(persistent=False, block_n=128), 64, split=4).kwargs["TMA_STORE"] == 0
    assert _plan(FLAT.with_(tma_store=0), 4096).kwargs["TMA_STORE"] == 0


def test_flatten_applies_to_persistent_programs_only():
    assert _plan(FLAT, 4096).kwargs["FLATTEN"] is True
    assert _plan(FLAT.with_(persistent=False), 4096).kwargs["FLATTEN"] is False


GPU_CONFIGS = {
    "flat-halves": FLAT,
    "flat-tile-128": FLAT.with_(block_n=128, tma_store=1),
    "grid-halves": FLAT.with_(persistent=False, flatten=False, num_stages=3),
}


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", list(GPU_CONFIGS))
@pytest.mark.parametrize("M,N,K", [(257, 4608, 3584), (1000, 1000, 2000), (4097, 3000, 2000),
                                   (383, 1001, 1000), (8, 4104, 4096)])  # fmt: skip
def test_tma_stored_epilogues_compute_the_linear_on_the_gpu(M, N, K, cfg):
    """bf16 forward, dgrad and wgrad under each config against fp32 torch, on partial tiles
    and on an output whose rows TMA cannot write (N = 1001: the launcher's pointer stores)."""
    from kernel_ratchet.kernels.gemm.launch import matmul

    g = torch.Generator(device="cuda").manual_seed(0)
    a, b, d = (
        torch.randn(*s, device="cuda", generator=g).bfloat16() for s in ((M, K), (N, K), (M, N))
    )
    c = GPU_CONFIGS[cfg]
    for got, ref, k in (
        (matmul(a, b, config=c), a.float() @ b.float().T, K),
        (matmul(d, b, b_kmajor=False, config=c), d.float() @ b.float(), N),
        (matmul(d, a, a_kmajor=False, b_kmajor=False, config=c), d.float().T @ a.float(), M),
    ):
        torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2 * k**0.5)
