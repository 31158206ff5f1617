"""Which GEMMs the launcher's plan sends to the warp-specialized blockwise FP8 kernel (CPU),
and the vendor comparison that weighs WS configs against the shipped plan."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.gemm import launch
from kernel_ratchet.kernels.gemm.configs import CONFIGS, WS_CONFIGS
from kernel_ratchet.kernels.gemm.kernel import SCALE_BLOCK

_GEOM = (4096, True, True, 4096, True, True)  # row stride, TMA-readable, K-major; A then B


def _plan(M=4096, N=6144, K=4096, geom=_GEOM, ws_group=128, out=torch.bfloat16, **kw):
    launch._plan.cache_clear()
    args = dict(kind="fp8_block", explicit=None, scale_mode=SCALE_BLOCK, num_sms=132, interp=False)
    args.update(kw)
    return launch._plan(
        args["kind"],
        args["explicit"],
        M,
        N,
        K,
        geom,
        args["scale_mode"],
        args["num_sms"],
        args["interp"],
        ws_group,
        out,
    )


def test_plan_sends_a_large_blockwise_gemm_to_the_ws_kernel():
    assert _plan().ws == WS_CONFIGS["fp8_block"]["large"]


def test_plan_sends_column_scales_only_to_an_entry_of_their_own(monkeypatch):
    """1x128 B scales (the weight gradient) run the WS kernel only where ``<kind>_cols`` has the
    bucket: the entry for 128x128 weight blocks does not apply to them."""
    cols = WS_CONFIGS["fp8_block"]["large"].with_(num_stages=5)
    monkeypatch.delitem(WS_CONFIGS, "fp8_block_cols", raising=False)
    assert _plan(ws_group=1).ws is None
    monkeypatch.setitem(WS_CONFIGS, "fp8_block_cols", {"large": cols})
    assert _plan(ws_group=1).ws == cols
    assert _plan(ws_group=128).ws == WS_CONFIGS["fp8_block"]["large"]


@pytest.mark.parametrize(
    "change",
    [
        dict(interp=True),
        dict(explicit=CONFIGS["fp8_block"]["large"]),
        dict(ws_group=0),  # not blockwise, or not an sm_90 GPU
        dict(geom=(4096, False, True, 4096, True, True)),  # A not TMA-readable
        dict(geom=(4096, True, True, 4096, True, False)),  # B not K-major
        dict(N=6148),  # output rows of 12296 bytes
        dict(out=torch.float32),
        dict(M=1000, N=5120, K=1000),  # the medium bucket: no WS config
    ],
    ids=[
        "interpreter",
        "explicit",
        "no-group",
        "a-pointer",
        "b-not-kmajor",
        "n-off-8",
        "fp32-out",
        "medium",
    ],
)
def test_plan_keeps_the_triton_kernel_where_the_ws_kernel_does_not_apply(change):
    plan = _plan(**change)
    assert plan.ws is None
    assert plan.kwargs  # a Triton launch


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["fwd", "wgrad"])
def test_the_vendor_comparison_checks_and_times_both_sides_on_gpu(layout):
    from kernel_ratchet.kernels.gemm.blockwise_vs_vendor import row

    ours, vendor, snr, ws_cols = row(1024, 1024, 1024, layout, ({"stages": 4, "mode": 0},))
    assert ours > 0 and vendor > 0 and len(ws_cols) == 1 and ws_cols[0] > 0
    assert snr > 40.0  # the same quantized operands: only accumulation order differs


def test_the_vendor_comparison_takes_ws_configs_as_key_value_pairs():
    from kernel_ratchet.kernels.gemm.blockwise_vs_vendor import ws_config

    assert ws_config("block_n=128,stages=6,mode=1") == {"block_n": 128, "stages": 6, "mode": 1}
    with pytest.raises(SystemExit, match="block_n/stages/mode/group_m/consumer_regs"):
        ws_config("stage=4")
    with pytest.raises(SystemExit, match="INT"):
        ws_config("stages=four")


@pytest.mark.parametrize(("parts", "routed"), [(1, False), (4, True)])
def test_a_wide_ws_tile_is_routed_where_one_b_scale_covers_each_column_part(
    monkeypatch, parts, routed
):
    """A 256-column tile over 128 x 128 weight blocks: whole, one B scale would not cover its
    columns (the Triton kernel runs); in quarters each has its own."""
    wide = WS_CONFIGS["fp8_block"]["large"].with_(block_n=256, num_stages=4, col_parts=parts)
    monkeypatch.setitem(WS_CONFIGS["fp8_block"], "large", wide)
    assert (_plan().ws == wide) is routed


def test_the_ws_mode_of_a_config_follows_its_column_parts_then_its_k_unroll():
    from kernel_ratchet.kernels.gemm.configs import GemmConfig, ws_mode

    assert [ws_mode(GemmConfig(k_unroll=u)) for u in (1, 2)] == [0, 1]
    assert [ws_mode(GemmConfig(k_unroll=u, col_parts=4)) for u in (2, 1)] == [2, 3]


def test_the_vendor_comparison_says_how_each_ws_config_compares_with_the_shipped_plan():
    import math

    from kernel_ratchet.kernels.gemm.blockwise_vs_vendor import against_ours

    # per shape: ours, vendor, then two ws columns (TFLOP/s)
    rows = [(1000, 1100, 900, 1200), (800, 1100, 1000, 800), (1000, 1100, 1100, 1000)]
    logs = [[math.log(x) for x in r] for r in rows]
    first, second = against_ours(["mode=2", "mode=3"], logs)
    geo = (0.9 * 1.25 * 1.1) ** (1 / 3)
    assert f"ws mode=2: {geo:.3f}x the shipped plan" in first
    assert "0.90-1.25 per shape, faster on 2 of 3" in first
    assert "ws mode=3: " in second and "faster on 1 of 3" in second
