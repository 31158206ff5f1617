"""Which tile of ``configs.WS16_FITTED`` the plan gives the warp-specialized 16-bit kernel: the
one that fills its waves' output slots best, where that fill is enough (CPU)."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.gemm import configs, launch_plan
from kernel_ratchet.kernels.gemm.configs import GemmConfig
from kernel_ratchet.kernels.gemm.kernel import SCALE_NONE
from kernel_ratchet.kernels.gemm.launch_plan import ws16_config, ws16_fill

N256 = GemmConfig(128, 256, 64, num_stages=3)
N128 = GemmConfig(128, 128, 64, num_stages=4)
N64 = GemmConfig(128, 64, 64, num_stages=6)


@pytest.fixture
def fitted(monkeypatch):
    """The skinny bucket fitted from three tiles, widest first, in both 16-bit kinds."""
    table = {kind: {"skinny": (N256, N128, N64)} for kind in ("bf16", "bf16_bwd")}
    monkeypatch.setattr(configs, "WS16_FITTED", table)
    launch_plan._plan.cache_clear()
    yield
    launch_plan._plan.cache_clear()


def test_the_fill_counts_partial_tiles_and_the_last_waves_idle_sms():
    assert ws16_fill(256, 4096, 64, 132) == pytest.approx(128 / 132)  # 128 full tiles, one wave
    assert ws16_fill(200, 4096, 64, 132) == pytest.approx(200 / 256 * 128 / 132)  # half-empty rows
    assert ws16_fill(256, 8192, 256, 132) == pytest.approx(64 / 132)
    assert ws16_fill(256, 8192, 64, 132) == pytest.approx(256 / 264)  # two waves, 8 SMs idle


@pytest.mark.parametrize(
    ("M", "N", "K", "want"),
    [
        (256, 4096, 4096, N64),  # 128 tiles of 64 columns fill one wave; 128 wide: 64 tiles
        (256, 14336, 4096, N256),  # 112, 224 or 448 tiles fill alike: the widest
        (256, 8192, 8192, N128),  # 128 of 128 columns or 256 of 64: the wider
        (8192, 256, 4096, N128),  # a narrow output: 64 rows of tiles 128 wide
        (64, 4096, 4096, None),  # a 128-row tile half empty on few tiles
        (4096, 64, 7168, None),  # 32 tiles at best: split-K's Triton tile serves it
        (200, 5000, 3000, None),  # 80 tiles of 128 x 128 with 56 rows empty each
    ],
)
def test_the_fitted_tile_is_the_one_that_fills_the_gpu_best(fitted, M, N, K, want):
    assert configs.bucket_for(M, N, K) == "skinny"
    assert ws16_config("bf16", M, N, K, 132) == want


def test_a_bucket_with_a_fixed_entry_keeps_it_and_no_table_fits_nothing(fitted, monkeypatch):
    assert ws16_config("bf16", 4096, 6144, 4096, 132) == configs.WS16_CONFIGS["bf16"]["large"]
    assert ws16_config("fp8", 256, 4096, 4096, 132) is None  # a kind without fitted tiles
    monkeypatch.setattr(configs, "WS16_FITTED", {})
    assert ws16_config("bf16", 256, 4096, 4096, 132) is None


def test_fitted_tiles_are_among_the_gluon_launches_a_round_compiles(fitted):
    """The same-code check compiles each shipped Gluon launch offline: fitted tiles too."""
    from kernel_ratchet.kernels import same_code

    ws16 = [dict(x.constexprs) for x in same_code.gluon_launches() if "bf16_ws" in x.kernel]
    for b_kmajor in (True, False):  # the forward's and the dgrad's
        assert {
            "block_n": 64,
            "block_k": 64,
            "stages": 6,
            "group_m": 8,
            "b_kmajor": b_kmajor,
        } in ws16


def test_the_plan_runs_the_fitted_tile_where_the_kernel_takes_the_operands(fitted):
    geom = (4096, True, True, 4096, True, True)  # row stride, TMA-readable, K-major: A, then B

    def plan(kind, M, N, K, geom=geom, ws16=True):
        args = (SCALE_NONE, 132, False, 0, torch.bfloat16, ws16)
        return launch_plan._plan(kind, None, M, N, K, geom, *args)

    assert plan("bf16", 256, 4096, 4096).ws16 == N64
    dgrad = (14336, True, True, 4096, True, False)  # dout [256, 14336] @ w [14336, 4096]
    assert plan("bf16_bwd", 256, 4096, 14336, dgrad).ws16 == N64
    assert plan("bf16", 256, 4096, 4096, ws16=False).ws16 is None  # not a 16-bit sm_90 GEMM
    unaligned = (4100, False, True, 4096, True, True)  # A's rows not TMA-readable
    assert plan("bf16", 256, 4096, 4100, unaligned).ws16 is None
    assert plan("bf16", 64, 4096, 4096).ws16 is None  # too little of the GPU filled


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("M", "N", "K"), [(256, 4096, 4096), (200, 8192, 8192), (8192, 256, 512)])
def test_fitted_tiles_run_the_forward_and_dgrad_right_on_the_gpu(fitted, monkeypatch, M, N, K):
    """The forward and the dgrad of skinny Linears through the launcher on the fitted tiles
    (rows past M in a partial 128-row tile, 64- and 128-column tiles) against fp32."""
    from kernel_ratchet.kernels.gemm import bf16_ws_launch, launch, quick_path

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the warp-specialized kernel runs on sm_90")
    ran = []
    real = bf16_ws_launch.run
    monkeypatch.setattr(launch.bf16_ws, "run", lambda *a, **k: ran.append(a[3]) or real(*a, **k))
    quick_path.forget()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(M)
    x = torch.randn(M, K, device="cuda", generator=gen, dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", generator=gen, dtype=torch.bfloat16)
    d = torch.randn(M, N, device="cuda", generator=gen, dtype=torch.bfloat16)
    out = launch.gemm(x, w)
    da = launch.matmul(d, w, b_kmajor=False, kind="bf16_bwd")
    torch.cuda.synchronize()
    quick_path.forget()
    want = [ws16_config("bf16", M, N, K, sms), ws16_config("bf16_bwd", M, K, N, sms)]
    assert ran == [c for c in want if c is not None] and ran
    for got, ref, k in ((out, x.float() @ w.float().T, K), (da, d.float() @ w.float(), N)):
        torch.testing.assert_close(got.float(), ref, rtol=2e-2, atol=2e-2 * k**0.5)
