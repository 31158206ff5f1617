"""The census of a grouped GEMM step (:mod:`kernel_ratchet.kernels.grouped_gemm.census`).

Dry runs go through the launchers on meta tensors at full model size; one real run goes through
the interpreter on a tiny shape; the schedule model is checked against hand-computed cases.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernel_ratchet.kernels import census as common
from kernel_ratchet.kernels.grouped_gemm import census as gc
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm import schedule as sc
from kernel_ratchet.kernels.grouped_gemm import shapes as S


@pytest.fixture(scope="module")
def olmoe_skewed():
    return next(s for s in S.moe_offlist() if s.label == "olmoe_1b_7b_gate_up_onehot_heavy")


def test_dry_fp8_step_launches_and_quant_bytes(olmoe_skewed):
    s = olmoe_skewed
    c = gc.census_step("fp8", s)
    names = [x.kernel for x in c.launches]
    # x and dout: the shared-chunk dual pass, or the per-group one where the wgrad bucket
    # walks each group's own chunks
    grouped = configs.BUCKETS["fp8_wgrad"].group_chunks
    assert names.count("_dual_quant_grouped_kernel" if grouped else "_dual_quant_kernel") == 2
    assert names.count("_weight_quant_kernel") == 1
    assert len(c.of(*gc.GEMM_KERNELS)) == 3
    # the weight gradient the GPU runs: the warp-specialized kernel where it is shipped
    ws = configs.WGRAD_FP8_WS is not None and grouped
    assert len(c.of("_wgrad_fp8_ws_kernel")) == ws and len(c.of(*gc.WGRAD_KERNELS)) == (not ws)
    summ = gc.summarize(c, S.lens_of(s), 132)
    if ws:  # 128 x BLOCK_N tiles, each walking its group's own 128-token chunks
        (x,) = c.of("_wgrad_fp8_ws_kernel")
        tiling = dict(N=s.N, K=s.K, BN=128, BK=x.get("BLOCK_N"), step=128, aligned=False)
        model = sc.wgrad_fill(S.lens_of(s), **tiling, sms=132, round_robin=True)
        assert dict(summ.fills)["wgrad"].fill == pytest.approx(model.fill)
    # bf16 weight read + fp8 written twice (the dgrad's transposed copy); x and dout each
    # read (bf16) and written twice (fp8)
    floor = 4 * s.B * s.N * s.K + 4 * s.M * s.K + 4 * s.M * s.N
    assert floor <= summ.quant_bytes < 1.05 * floor
    assert summ.syncs == 0 and [n for n, _ in summ.fills] == ["fwd", "dgrad", "wgrad"]
    assert all(0 < f.fill <= 1 and f.waste >= 1 for _, f in summ.fills)


def test_dry_bf16_step_is_three_gemms_without_quantization(olmoe_skewed):
    c = gc.census_step("bf16", olmoe_skewed, gluon=False)
    assert [x.kernel for x in c.launches] == [
        "_grouped_mm_kernel",
        "_grouped_mm_kernel",
        "_grouped_wgrad_kernel",
    ]
    assert c.launches[0].grid == (132,) and c.syncs == {}


def test_the_census_takes_the_gluon_kernels_where_an_h200_would(olmoe_skewed):
    """The launchers decide as on an sm_90 GPU: the shipped warp-specialized weight gradient
    where its operands qualify (N a multiple of 128), its Triton fallback where not; the
    Gluon launches get a fill from the schedule they run."""
    ws = configs.WGRAD_WS is not None and configs.WGRAD_WS.gluon_ws
    wgrad = "_grouped_wgrad_ws_kernel" if ws else "_grouped_wgrad_kernel"
    c = gc.census_step("bf16", olmoe_skewed)
    assert [x.kernel for x in c.launches][2] == wgrad
    if ws:
        (x,) = c.of(wgrad)
        assert x.grid == (132,) and x.get("NUM_SMS") == 132
        fill = dict(gc.summarize(c, S.lens_of(olmoe_skewed), 132).fills)["wgrad"]
        steps = dict(N=olmoe_skewed.N, K=olmoe_skewed.K, BN=128, BK=x.get("BLOCK_K"), step=64)
        rr = sc.wgrad_fill(
            S.lens_of(olmoe_skewed), **steps, aligned=False, sms=132, round_robin=True
        )
        assert fill.fill == pytest.approx(rr.fill)
    odd = dataclasses.replace(olmoe_skewed, N=olmoe_skewed.N + 8)  # not a multiple of 128
    assert gc.census_step("bf16", odd).launches[2].kernel == "_grouped_wgrad_kernel"


def test_a_longest_first_weight_gradient_gets_the_fill_of_its_order(monkeypatch, olmoe_skewed):
    ordered = configs.TileConfig(64, 128, 256, 16, 8, 3, gluon_ws=True, longest_first=True)
    monkeypatch.setattr(configs, "WGRAD_WS", ordered)
    c = gc.census_step("bf16", olmoe_skewed)
    (x,) = c.of("_grouped_wgrad_ws_kernel")
    assert x.get("ORDERED") is True
    lens = S.lens_of(olmoe_skewed)
    tiling = dict(N=olmoe_skewed.N, K=olmoe_skewed.K, BN=128, BK=256, step=64, aligned=False)
    model = sc.wgrad_fill(lens, **tiling, sms=132, round_robin=True, order=sc.longest_first(lens))
    fill = dict(gc.summarize(c, lens, 132).fills)["wgrad"]
    assert fill.fill == pytest.approx(model.fill)


def test_real_run_records_the_same_kernels_as_the_dry_one(monkeypatch, device):
    """The dry census records the GPU buckets' launches. In the interpreter the tile is given
    the wgrad bucket's chunk layout so that both runs launch the same kernels (the Triton ones:
    the Gluon kernels need an sm_90 device); on a GPU the dry run decides for its SMs, Gluon
    kernels included."""
    shape = next(s for s in S.tiny_cpu() if s.label == "tiny_skewed")
    if device == "cpu":
        layout = configs.BUCKETS["fp8_wgrad"].group_chunks
        interp = dataclasses.replace(configs.INTERP_FP8, group_chunks=layout)
        monkeypatch.setattr(configs, "INTERP_FP8", interp)
        dry = gc.census_step("fp8", shape, gluon=False)
    else:
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        dry = gc.census_step("fp8", shape, sms=sms)
    real = common.Census()
    with real.instrument(gc.PATCHES):
        out, dx, dw = gc.step_fn("fp8", shape, device=device)()
    assert [x.kernel for x in real.launches] == [x.kernel for x in dry.launches]
    assert torch.isfinite(dx).all() and dw.shape == (shape.B, shape.N, shape.K)


def test_host_reads_of_device_data_are_counted():
    c = common.Census()
    t = torch.arange(4)
    with c.instrument([]):
        int(t.sum().item())
        t.nonzero()
    assert c.syncs == {"_local_scalar_dense": 1, "nonzero": 1}


def test_mm_fill_counts_tiles_and_partial_rows():
    # 3 groups: 2 + 1 + 0 row tiles of 128, 4 column tiles: 12 tiles on 8 programs = 2 rounds
    f = sc.mm_fill([200, 1, 0], N=512, BM=128, BN=128, programs=8)
    assert f.fill == pytest.approx(12 / 16) and f.waste == pytest.approx(3 * 128 / 201)


def test_aligned_wgrad_chunks_count_straddled_blocks():
    # rows [0,100) [100,300) [300,300) [300,301): blocks of 128 touched 1, 2 (0..2), 0, 1
    assert sc.wgrad_steps([100, 200, 0, 1], 128, aligned=True) == [1, 3, 0, 1]
    assert sc.wgrad_steps([100, 200, 0, 1], 128, aligned=False) == [1, 2, 0, 1]


def test_longest_first_shortens_a_late_hot_group():
    """One hot group launched last leaves the SMs idle while its CTAs finish."""
    lens = [100] * 7 + [1000]  # 2 CTAs a group (work 11, hot 101) on 4 SMs
    args = dict(N=256, K=128, BN=128, BK=128, step=10, aligned=False, sms=4)
    late = sc.wgrad_fill(lens, **args)
    first = sc.wgrad_fill(lens, **args, order=sc.longest_first(lens))
    assert sc.longest_first(lens)[0] == 7
    # late: the hot CTAs start at 33 and end at 134; first: they end at 101 with the rest
    assert late.fill == pytest.approx(356 / (4 * 134))
    assert first.fill == pytest.approx(356 / (4 * 101))


def test_a_round_robin_schedule_stacks_the_hot_groups_tiles_on_the_same_programs():
    """Persistent programs taking every sms-th tile: with 2 tiles a group on 4 programs,
    every hot group's tiles land on programs 0 and 1, every empty group's on 2 and 3; the
    hardware's dispatch to the SM that frees first spreads them."""
    args = dict(N=256, K=128, BN=128, BK=128, step=10, aligned=False, sms=4)  # 2 tiles a group
    lens = [90, 0] * 4  # work per tile 10, 1, 10, 1, ...
    rr = sc.wgrad_fill(lens, **args, round_robin=True)
    # programs 0 and 1: 4 x 10; programs 2 and 3: 4 x 1; 88 units in all
    assert rr.fill == pytest.approx(88 / (4 * 40))
    assert sc.wgrad_fill(lens, **args).fill == pytest.approx(1.0)
    assert sc.wgrad_fill([0, 0], **args, round_robin=True).fill == pytest.approx(4 / (4 * 1))


def test_stress_distributions_respect_top_k():
    for s in S.moe_offlist():
        k = next(m.top_k for key, m in S.OFFLIST_MODELS.items() if s.label.startswith(key))
        lens = S.lens_of(s)
        tokens = int(s.params["rows"]) // k
        assert sum(lens) == s.M == int(s.params["rows"]) and max(lens) <= tokens
        if s.params["dist"] == "onehot_heavy":
            assert max(lens) == tokens
    assert all("top_k" not in s.params for s in S.moe_target())


def test_cli_prints_one_line_per_shape_and_path(capsys):
    assert gc.main(["--only", "dbrx_tp4_down_zipf", "--kind", "fp8"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "launches 6" in out[0] and "syncs 0" in out[0]
    with pytest.raises(SystemExit) as exc:
        gc.main(["--kind", "fp16"])
    assert exc.value.code == 2
