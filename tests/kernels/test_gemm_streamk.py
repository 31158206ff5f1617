"""The stream-K dense GEMM (:mod:`kernel_ratchet.kernels.gemm.kernel_streamk`).

In the interpreter (fp16: its bf16 dots are wrong) the launcher plans for 4 SMs, so the ranges
of the 4 programs start and end inside tiles: partial sums cross programs, a tile can be split
four ways, and a finisher adds several partials. ``pytest -m gpu`` runs it in bf16 on the H200.
"""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.harness.adapter import SNR_BF16, Shape
from kernel_ratchet.harness.correctness import assert_close
from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.gemm.adapter import GemmFp16
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.kernel_streamk import _gemm_streamk_kernel
from kernel_ratchet.kernels.gemm.launch import forced_config, gemm, gemm_backward, matmul

SK = GemmConfig(32, 32, 16, group_m=2, num_warps=4, num_stages=2, stream_k=True)
#: (M, N, K): tiles split mid-way over the 4 programs; one tile over all four (K = 500 on a
#: 20 x 20 output); ranges ending on tile boundaries; a single k-iteration per program.
SHAPES = [(70, 90, 100), (20, 20, 500), (64, 64, 64), (33, 20, 16)]


@pytest.mark.parametrize("mnk", SHAPES, ids=lambda s: "m{}.n{}.k{}".format(*s))
def test_stream_k_computes_the_linear_forward_and_backward(mnk, device):
    M, N, K = mnk
    ad = GemmFp16()
    case = ad.make_case(Shape(f"m{M}", M=M, N=N, K=K), seed=2, device=device)
    with forced_config(SK):
        out = gemm(case.a, case.b)
        da, db = gemm_backward(case.dout, case.a, case.b)
    assert_close({"out": out, "da": da, "db": db}, ad.reference(case), SNR_BF16)


def test_the_workspace_and_flags_are_kept_per_stream_and_left_zero(device):
    """A launch's finishers reset the flags they consumed, so the next launch on the stream
    reuses the same workspace and flags without zeroing them again."""
    from kernel_ratchet.kernels.gemm import streamk_launch

    ad = GemmFp16()
    case = ad.make_case(Shape("m70", M=70, N=90, K=100), seed=3, device=device)
    streamk_launch._BUFFERS.clear()
    with forced_config(SK):
        first = gemm(case.a, case.b)
        ((ws, flags),) = streamk_launch._BUFFERS.values()
        assert flags.numel() >= 4 and not flags.any()
        second = gemm(case.a, case.b)
    ((ws2, flags2),) = streamk_launch._BUFFERS.values()
    assert ws2 is ws and flags2 is flags and not flags.any()
    assert torch.equal(first, second)
    assert_close({"out": second}, {"out": ad.reference(case)["out"]}, SNR_BF16)


def test_a_call_under_graph_capture_takes_its_own_buffers_and_keeps_none(device, monkeypatch):
    """A captured graph owns its workspace and flags: nothing cached is handed to it, and what
    it got is not cached for later eager calls (the capture itself runs on the GPU below)."""
    from kernel_ratchet.kernels.gemm import streamk_launch

    ad = GemmFp16()
    case = ad.make_case(Shape("m70", M=70, N=90, K=100), seed=3, device=device)
    streamk_launch._BUFFERS.clear()
    with forced_config(SK):
        gemm(case.a, case.b)
        ids = {k: tuple(map(id, v)) for k, v in streamk_launch._BUFFERS.items()}
        kept = list(streamk_launch._BUFFERS.values())
        monkeypatch.setattr(streamk_launch, "_capturing", lambda dev: True)
        ws, flags = streamk_launch.buffers(case.a.device, 4, 32 * 32)
        assert all(ws is not w and flags is not f for w, f in kept)
        assert not flags.any() and ids == {
            k: tuple(map(id, v)) for k, v in streamk_launch._BUFFERS.items()
        }
        out = gemm(case.a, case.b)
    assert ids == {k: tuple(map(id, v)) for k, v in streamk_launch._BUFFERS.items()}
    assert_close({"out": out}, {"out": ad.reference(case)["out"]}, SNR_BF16)


@pytest.mark.gpu
def test_stream_k_in_a_cuda_graph_beside_eager_calls():
    """A graph captured around a stream-K GEMM replays right after eager calls on the same
    stream grew the cached buffers, and its replay leaves the eager calls' results right."""
    from kernel_ratchet.kernels.gemm import streamk_launch

    cfg = GemmConfig(128, 128, 64, num_warps=8, num_stages=4, use_tma=True, stream_k=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    a, b = (
        torch.randn(*s, device="cuda", generator=g).bfloat16()
        for s in ((500, 30000), (2000, 30000))
    )
    a2, b2 = (
        torch.randn(*s, device="cuda", generator=g).bfloat16() for s in ((1000, 5000), (3000, 5000))
    )
    streamk_launch._BUFFERS.clear()
    matmul(a, b, config=cfg)  # warm up: compile, plan, cache the buffers
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        matmul(a, b, config=cfg)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = matmul(a, b, config=cfg)
    ref = a.float() @ b.float().T
    for _ in range(3):
        eager = matmul(a2, b2, config=cfg)  # grows the cached buffers of this stream
        graph.replay()
        torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2 * 30000**0.5)
        torch.testing.assert_close(
            eager.float(), a2.float() @ b2.float().T, rtol=2e-2, atol=2e-2 * 5000**0.5
        )
    assert all(not f.any() for _, f in streamk_launch._BUFFERS.values())


def test_the_plan_runs_one_wave_of_stream_k_programs_and_drops_split_k():
    launch._plan.cache_clear()
    geom = (4096, True, True, 4096, True, True)
    plan = launch._plan(
        "bf16", SK.with_(split_k=4), 1000, 5120, 1000, geom, 0, 132, False, 0, torch.bfloat16
    )
    assert plan.stream_k and plan.split_k == 1 and plan.grid == (132,)
    assert plan.kwargs["PROGRAMS"] == 132
    few = launch._plan("bf16", SK, 32, 32, 32, geom, 0, 132, False, 0, torch.bfloat16)
    assert few.grid == (2,)  # one tile of two k-iterations: no program without work
    # a split-K bound in the config does not multiply them: a program with an empty range
    # would never hand its partial on, and the tile's finisher would wait for it forever
    split = launch._plan(
        "bf16", SK.with_(split_k=4), 32, 32, 32, geom, 0, 132, False, 0, torch.bfloat16
    )
    assert split.grid == (2,) and split.kwargs["TMA_STORE"] == SK.tma_store
    scaled = launch._plan("fp8", SK.with_(block_k=128), 64, 64, 256, geom, 1, 132, False)
    assert not scaled.stream_k  # scales stay on the tile kernel


def test_the_long_k_bucket_keeps_split_k_where_too_few_tiles_share_the_sms():
    """On the default path a tile shared by more than STREAM_K_MAX_SHARE programs runs the
    bucket's split-K config (a stream-K finisher would add the partials one after another);
    an explicit config is run as given (the sweeps time what they name)."""
    from kernel_ratchet.kernels.gemm import configs

    launch._plan.cache_clear()
    geom = (16384, True, True, 16384, True, True)
    args = (geom, 0, 132, False, 0, torch.bfloat16)
    for kind in ("bf16", "bf16_bwd"):
        assert configs.CONFIGS[kind]["long_k"].stream_k
        assert configs.bucket_for(500, 2000, 30000) == configs.bucket_for(128, 128, 16384)
        wide = launch._plan(kind, None, 500, 2000, 30000, *args)  # 64 tiles: two programs each
        assert wide.stream_k and wide.grid == (132,)
        one = launch._plan(kind, None, 128, 128, 16384, *args)  # one tile
        instead = configs.SPLIT_K_INSTEAD[kind]["long_k"]
        assert not one.stream_k and one.split_k > 1 and one.kwargs["BLOCK_M"] == instead.block_m
        tile = configs.CONFIGS[kind]["long_k"].block_n  # 17 tiles of the stream-K config's
        assert 17 * configs.STREAM_K_MAX_SHARE >= 132 > 16 * configs.STREAM_K_MAX_SHARE
        assert launch._plan(kind, None, 128, 17 * tile, 30000, *args).stream_k
        assert not launch._plan(kind, None, 128, 16 * tile, 30000, *args).stream_k
    forced = launch._plan("bf16", SK, 128, 128, 16384, *args)
    assert forced.stream_k and forced.grid == (132,)
    launch._plan.cache_clear()


@pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter test (CPU machines)")
@pytest.mark.parametrize("tma_store", [0, 2])
def test_tma_loads_and_stores_in_the_interpreter(tma_store):
    M, N, K, P = 72, 88, 200, 5
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(M, K, generator=g).half(), torch.randn(N, K, generator=g).half()
    c = torch.empty(M, N, dtype=torch.float16)
    ws = torch.empty(P * 32 * 32, dtype=torch.float32)
    flags = torch.zeros(P, dtype=torch.int32)
    _gemm_streamk_kernel[(P,)](
        a, b, c, ws, flags, M, N, K, K, 1, K, 1, N, 1,
        A_KMAJOR=True, B_KMAJOR=True, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2,
        USE_TMA=True, PROGRAMS=P, TMA_STORE=tma_store,
    )  # fmt: skip
    ref = a.float() @ b.float().t()
    assert torch.allclose(c.float(), ref, atol=0.05, rtol=0.01)
    assert flags.tolist() == [0] * 5  # each partial's finisher reset its flag: ready for reuse


@pytest.mark.gpu
@pytest.mark.parametrize(
    "mnk", [(1000, 5120, 1000), (500, 2000, 30000), (383, 1001, 12289), (128, 128, 16384)]
)
@pytest.mark.parametrize("tile", [(128, 128, 8), (128, 256, 8), (64, 128, 4)])
def test_stream_k_on_the_gpu(mnk, tile):
    M, N, K = mnk
    bm, bn, w = tile
    cfg = GemmConfig(bm, bn, 64, num_warps=w, num_stages=4, use_tma=True, stream_k=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    a, b, d = (
        torch.randn(*s, device="cuda", generator=g).bfloat16() for s in ((M, K), (N, K), (M, N))
    )
    for got, ref, k in (
        (matmul(a, b, config=cfg), a.float() @ b.float().T, K),
        (matmul(d, b, b_kmajor=False, config=cfg), d.float() @ b.float(), N),
        (matmul(d, a, a_kmajor=False, b_kmajor=False, config=cfg), d.float().T @ a.float(), M),
    ):
        torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2 * k**0.5)


_COMPILE = """
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_ratchet.kernels.gemm.kernel_streamk import _gemm_streamk_kernel as fn
from kernel_ratchet.kernels.offline import resources
consts = dict(A_KMAJOR=True, B_KMAJOR=False, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
              USE_TMA=True, PROGRAMS=132, TMA_STORE=2)
sig = dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*bf16") | {"ws_ptr": "*fp32", "flags_ptr": "*i32"}
sig |= dict.fromkeys(fn.arg_names[5:14], "i32") | dict.fromkeys(consts, "constexpr")
at = {(fn.arg_names.index(k),): v for k, v in consts.items()}
src = ASTSource(fn, sig, at, {(i,): [["tt.divisibility", 16]] for i in range(5)})
r = resources(triton.compile(src, GPUTarget("cuda", 90, 32), {"num_warps": 8, "num_stages": 4}))
print(json.dumps([r.spill_bytes, r.shared_bytes, r.fits()]))
"""


@pytest.mark.slow
def test_a_128_tile_compiles_for_sm90_pipelined_without_spills():
    """The dgrad layout's 128x128 tile for sm_90 (Triton's front end and bundled ptxas, in a
    process without the interpreter): four stages of A and B tiles in shared memory (the k-loop
    inside the segment loop is pipelined), nothing spilled."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, "-c", _COMPILE], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    spill, shared, fits = json.loads(out.stdout.strip().splitlines()[-1])
    assert fits and spill == 0
    assert shared >= 4 * 2 * 128 * 64 * 2  # 4 stages of two bf16 128x64 tiles


def test_the_census_counts_a_stream_k_launch_as_the_gemm_it_is():
    from kernel_ratchet.kernels.gemm.census import census_call, summary

    a, b = torch.zeros(1000, 1000, dtype=torch.bfloat16), torch.zeros(5120, 1000)
    with forced_config(SK.with_(block_m=128, block_n=128, block_k=64)):
        c = census_call(lambda: launch.gemm(a, b.bfloat16()), dry=True)
    (x,) = c.gemms()
    assert x.kernel == "_gemm_streamk_kernel" and x.ctas == 132 and x.get("PROGRAMS") == 132
    assert "gemm 1 " in summary(c, 132) and "split_k sk" in summary(c, 132)
