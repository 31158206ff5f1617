"""Split-K in one launch: each output tile's last K slice stores it from fp32 slots that every
launch leaves zero (:func:`.kernel_tile._finish_split`, :func:`.launch_scratch.split_slots`).
The CPU tests run the kernel in Triton's interpreter (fp16: its bf16 ``tl.dot`` is wrong);
the GPU tests run it on the real hardware, where the slices of a tile race each other."""

from __future__ import annotations

import os

import pytest
import torch

from kernel_ratchet.kernels.gemm import launch, launch_scratch
from kernel_ratchet.kernels.gemm.configs import GemmConfig

interpreter = pytest.mark.skipif(
    torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") != "1",
    reason="interpreter test (CPU machines, TRITON_INTERPRET=1)",
)
SPLIT = GemmConfig(32, 32, 32, num_warps=4, num_stages=2)
LAYOUTS = {"fwd": (True, True), "dgrad": (True, False), "wgrad": (False, False)}


def _cpu_slots() -> tuple[torch.Tensor, torch.Tensor]:
    return launch_scratch._SLOTS[(torch.device("cpu"), 0)]


@interpreter
@pytest.mark.parametrize("persistent", [False, True], ids=["grid", "persistent"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("M,N,K,split", [(40, 24, 256, 4), (33, 70, 300, 3)])
def test_each_tile_is_stored_once_by_its_last_slice_and_the_slots_are_left_zero(
    M, N, K, split, layout, persistent
):
    a_kmajor, b_kmajor = LAYOUTS[layout]
    cfg = SPLIT.with_(split_k=split, persistent=persistent)
    gen = torch.Generator().manual_seed(split)
    for call in range(2):  # the second call runs on the slots the first one left
        a = torch.randn(M, K, generator=gen).half()
        b = torch.randn(N, K, generator=gen).half()
        A = a if a_kmajor else a.t().contiguous()
        B = b if b_kmajor else b.t().contiguous()
        c = launch.matmul(A, B, a_kmajor=a_kmajor, b_kmajor=b_kmajor, config=cfg)
        ref = a.float() @ b.float().t()
        assert c.dtype == torch.float16 and c.shape == (M, N)
        torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=0.05, msg=f"call {call}")
        slots, counts = _cpu_slots()
        assert not slots.any() and not counts.any(), "a launch left partial sums or counts"


@interpreter
def test_a_scaled_split_keeps_the_zeroed_fp32_output_and_its_cast():
    """Scales ride in the pointers the finishing split uses for its slots: an FP8 tensorwise
    split-K adds into a zeroed fp32 output, cast after the launch, as before."""
    a8 = torch.randn(40, 256).to(torch.float8_e4m3fn)
    b8 = torch.randn(24, 256).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor([0.5]), torch.tensor([2.0])
    cfg = GemmConfig(32, 32, 32, num_warps=4, num_stages=2, split_k=4)
    kept_before = dict(launch_scratch._SLOTS)
    c = launch.matmul(a8, b8, scale_mode=1, a_scale=sa, b_scale=sb, config=cfg)
    ref = a8.float() @ b8.float().t()
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=0.1)
    assert dict(launch_scratch._SLOTS) == kept_before  # no slots were asked for


def test_slots_are_kept_per_stream_grown_and_fresh_under_capture(monkeypatch):
    made = []

    def zeros(device, slots, counts):
        made.append((slots, counts))
        return torch.zeros(slots), torch.zeros(counts, dtype=torch.int32)

    state = {"stream": 5, "capturing": False}
    monkeypatch.setattr(launch_scratch, "_zeros", zeros)
    monkeypatch.setattr(launch_scratch, "_capturing", lambda: state["capturing"])
    monkeypatch.setattr(launch_scratch, "_stream", lambda device: state["stream"])
    monkeypatch.setattr(launch_scratch, "_SLOTS", {})
    gpu = torch.device("cuda", 0)
    first = launch_scratch.split_slots(gpu, 4, 100)
    assert launch_scratch.split_slots(gpu, 2, 100) is first  # smaller: the same pair
    state["stream"] = 6
    other = launch_scratch.split_slots(gpu, 4, 100)
    assert other is not first  # another stream runs beside it: its own pair
    grown = launch_scratch.split_slots(gpu, 8, 100)
    assert grown[0].numel() == 800 and grown[1].numel() == 8
    assert launch_scratch.split_slots(gpu, 3, 100) is grown
    state["capturing"] = True
    captured = launch_scratch.split_slots(gpu, 1, 100)
    assert captured is not grown and launch_scratch.split_slots(gpu, 1, 100) is not captured
    assert made == [(400, 4), (400, 4), (800, 8), (100, 1), (100, 1)]


gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _close(got: torch.Tensor, ref: torch.Tensor, k: int, what: str) -> None:
    torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2 * k**0.5, msg=what)


@gpu
@needs_cuda
@pytest.mark.parametrize(
    "M,N,K",
    [(128, 128, 16384), (96, 300, 8200), (1, 24, 20000), (100, 16400, 150), (16384, 120, 136)],
    ids=["fwd-one-tile", "fwd-odd", "fwd-decode", "dgrad", "wgrad"],
)
def test_split_gemms_on_the_gpu_repeated_on_two_streams_and_in_a_graph(M, N, K):
    """The slices of a tile race on the GPU: forward and backward of shapes whose plans split
    K, twenty calls on new values, then two streams at once, then a captured graph replayed
    beside eager calls; every result against fp32 torch, the kept slots zero at the end."""
    from kernel_ratchet.kernels.gemm.launch import gemm, gemm_backward

    gen = torch.Generator(device="cuda").manual_seed(M)

    def operands():
        a = torch.randn(M, K, device="cuda", generator=gen, dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", generator=gen, dtype=torch.bfloat16)
        d = torch.randn(M, N, device="cuda", generator=gen, dtype=torch.bfloat16)
        return a, b, d

    def check(a, b, d, out, da, db, what):
        af, bf, df = a.float(), b.float(), d.float()
        _close(out, af @ bf.T, K, f"{what} out")
        _close(da, df @ bf, N, f"{what} da")
        _close(db, df.T @ af, M, f"{what} db")

    for i in range(20):
        a, b, d = operands()
        check(a, b, d, gemm(a, b), *gemm_backward(d, a, b), f"call {i}")
    side = torch.cuda.Stream()
    x, y = operands(), operands()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got_side = [gemm(x[0], x[1]), *gemm_backward(x[2], x[0], x[1])]
    got_main = [gemm(y[0], y[1]), *gemm_backward(y[2], y[0], y[1])]
    torch.cuda.current_stream().wait_stream(side)
    check(*x, *got_side, "side stream")
    check(*y, *got_main, "main stream beside it")
    a, b, d = operands()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = gemm(a, b)
    a.copy_(torch.randn(M, K, device="cuda", generator=gen))
    eager_a, eager_b, _ = operands()
    graph.replay()
    eager = gemm(eager_a, eager_b)
    torch.cuda.synchronize()
    _close(captured, a.float() @ b.float().T, K, "graph replay")
    _close(eager, eager_a.float() @ eager_b.float().T, K, "eager beside the replay")
    for slots, counts in launch_scratch._SLOTS.values():
        assert not slots.any() and not counts.any(), "a launch left partial sums or counts"
    planned = [p for p in _plans(M, N, K) if p.split_k > 1]
    assert planned and all(p.slots for p in planned), "no GEMM of this shape splits K"


def _plans(M: int, N: int, K: int) -> list:
    """The launch plans of the forward, dgrad and wgrad of an ``M x N x K`` Linear on this GPU."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    geoms = {
        ("bf16", M, N, K): (K, True, True, K, True, True),
        ("bf16_bwd", M, K, N): (N, True, True, K, True, False),
        ("bf16_bwd", N, K, M): (N, True, False, K, True, False),
    }
    return [
        launch._plan(kind, None, m, n, k, geom, 0, sms, False, 0, torch.bfloat16, True)
        for (kind, m, n, k), geom in geoms.items()
    ]


PERSISTENT_SPLIT = GemmConfig(
    128, 128, 64, num_warps=8, num_stages=4, persistent=True, use_tma=True, flatten=True
)


@pytest.mark.parametrize("split", [1, 2, 4])
def test_a_persistent_config_that_splits_k_runs_one_program_per_tile_and_slice(split):
    """The persistent loop over split slices summed tiles wrongly on the GPU (the test below):
    a split plan runs one program per (tile, slice); an unsplit one stays persistent."""
    cfg = PERSISTENT_SPLIT.with_(split_k=split)
    geom = (800, True, False, 800, True, False)  # a weight gradient's layout
    plan = launch._plan("bf16_bwd", cfg, 800, 800, 3000, geom, 0, 132, False, 0, None, False)
    tiles = 7 * 7 * split
    assert plan.split_k == split
    assert plan.kwargs["PERSISTENT"] is (split == 1) and plan.kwargs["FLATTEN"] is (split == 1)
    assert plan.grid == ((min(132, tiles),) if split == 1 else (tiles,))


@pytest.mark.parametrize(
    ("block_m", "block_n", "warps", "b_kmajor"),
    [(128, 256, 8, True), (256, 128, 8, True), (128, 128, 8, True), (128, 128, 8, False),
     (64, 128, 4, True)],
)  # fmt: skip
def test_a_split_of_any_tile_and_warp_count_finishes_its_own_tiles(
    block_m, block_n, warps, b_kmajor
):
    """Wide and eight-warp splits finish their own tiles like the others: the finishing slice's
    read of its slot is ordered before the zeroing (``test_gemm_handoff_order``), which is what
    summed them wrongly on the GPU (the tests below)."""
    cfg = GemmConfig(block_m, block_n, 64, num_warps=warps, num_stages=3, use_tma=True, split_k=4)
    geom = (4096, True, True, 4096 if b_kmajor else 256, True, b_kmajor)
    plan = launch._plan("bf16", cfg, 256, 256, 4096, geom, 0, 132, False, 0, None, False)
    tiles = (256 // block_m) * (256 // block_n)
    assert plan.split_k == 4 and plan.grid == (tiles * 4,)
    assert plan.kwargs["SPLIT_FINISH"] and plan.slots is not None


@gpu
@needs_cuda
@pytest.mark.parametrize("shape", [(256, 4096, 4096), (8192, 256, 4096), (64, 4096, 4096)])
def test_an_explicit_128_x_256_split_config_sums_the_forward_right_on_the_gpu(shape):
    """128 x 256 x 64 tiles with split-K 4 gave 0.08-0.12 relative error on these forwards
    while the finishing slice could zero its slot before all of it was read."""
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn(M, K, device="cuda", generator=gen, dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", generator=gen, dtype=torch.bfloat16)
    cfg = GemmConfig(128, 256, 64, num_warps=8, num_stages=3, use_tma=True, split_k=4)
    _close(launch.matmul(a, b, config=cfg), a.float() @ b.float().T, K, f"{shape}")


@gpu
@needs_cuda
@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("layout", ["fwd", "wgrad"])
def test_a_persistent_config_with_split_k_sums_right_on_the_gpu(layout, split):
    """An explicit persistent 128 x 128 config with split-K (what a search round may try) on an
    800 x 800 output over K = 3000: 0.17 relative error before its plan stopped persisting."""
    gen = torch.Generator(device="cuda").manual_seed(split)
    d = torch.randn(3000, 800, device="cuda", generator=gen, dtype=torch.bfloat16)
    a = torch.randn(3000, 800, device="cuda", generator=gen, dtype=torch.bfloat16)
    cfg = PERSISTENT_SPLIT.with_(split_k=split)
    if layout == "wgrad":
        got = launch.matmul(d, a, a_kmajor=False, b_kmajor=False, kind="bf16_bwd", config=cfg)
    else:
        got = launch.matmul(d.t().contiguous(), a.t().contiguous(), config=cfg)
    _close(got, d.float().T @ a.float(), 3000, f"{layout} split {split}")


@gpu
@needs_cuda
@pytest.mark.parametrize("block_n", [128, 256])
@pytest.mark.parametrize("shape", [(256, 4096, 4096), (8192, 256, 4096)])
def test_eight_warp_split_forwards_sum_right_on_the_gpu(shape, block_n):
    """Eight-warp tiles whose last K slice finished them read 0.04 (128 x 128) and 0.08
    (128 x 256) relative error on these forwards, rows wrong here and there, while the slot's
    zeroing was not ordered after its read; five calls each, as a race gets more than one
    chance."""
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(block_n)
    a = torch.randn(M, K, device="cuda", generator=gen, dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", generator=gen, dtype=torch.bfloat16)
    cfg = GemmConfig(128, block_n, 64, num_warps=8, num_stages=3, use_tma=True, split_k=4)
    ref = a.float() @ b.float().T
    for i in range(5):
        got = launch.matmul(a, b, config=cfg)
        _close(got, ref, K, f"{shape} 128 x {block_n}, call {i}")
