"""Structural changes of the grouped GEMM step keep its numbers bit for bit (interpreter, FP8).

Each test pins one change: the new path against the one it replaced, on odd sizes (N, K not
multiples of 128, empty and ragged groups), and the census shows the structure it claims.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernel_ratchet.kernels.grouped_gemm import census as gc
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm import fp8 as F
from kernel_ratchet.kernels.grouped_gemm import shapes as S
from kernel_ratchet.kernels.grouped_gemm.fp8_kernel import (
    _grouped_mm_fp8_kernel,
    _grouped_wgrad_fp8_kernel,
)
from kernel_ratchet.kernels.grouped_gemm.kernel import _grouped_mm_kernel
from kernel_ratchet.kernels.grouped_gemm.launch import (
    grouped_mm,
    grouped_wgrad,
    tma_readable,
    wgrad_tma_readable,
)
from kernel_ratchet.kernels.grouped_gemm.wgrad_kernel import _grouped_wgrad_kernel
from kernel_ratchet.kernels.offline import resources_by_kernel, resources_of
from kernel_ratchet.kernels.quant.dual_grouped import quant_fp8_dual_1x128_grouped
from kernel_ratchet.kernels.quant.launch import Fp8Quantized, quant_fp8_blockwise_1x128

LENS = [0, 37, 1, 0, 50]


@pytest.fixture
def operands(device):
    g = torch.Generator().manual_seed(3)
    N, K = 160, 48
    w = (torch.randn(len(LENS), N, K, generator=g) * 3).to(torch.bfloat16).to(device)
    dout = torch.randn(sum(LENS), N, generator=g).to(torch.bfloat16).to(device)
    lens = torch.tensor(LENS, dtype=torch.int32, device=device)
    return w, dout, lens


def test_transposed_weight_copy_gives_the_same_dgrad(operands):
    w, dout, lens = operands
    q = F.quant_weight_128x128(w, transpose=True)
    assert torch.equal(q.data_t.view(torch.uint8), q.data.transpose(1, 2).view(torch.uint8))
    assert torch.equal(q.scale_t, q.scale.transpose(1, 2))
    dr = quant_fp8_blockwise_1x128(dout)
    old = F.grouped_mm_fp8(dr, Fp8Quantized(q.data, q.scale), lens, b_is_nk=False)
    new = F.grouped_mm_fp8(dr, Fp8Quantized(q.data_t, q.scale_t), lens, b_is_nk=True)
    assert torch.equal(old, new)


def test_fp8_dgrad_reads_the_weight_k_major():
    shape = next(s for s in S.moe_offlist() if s.label == "qwen15_moe_a27b_down_zipf1.2")
    fwd, dgrad = gc.census_step("fp8", shape, gluon=False).of("_grouped_mm_fp8_kernel")
    assert fwd.get("B_N_CONTIG") is False and dgrad.get("B_N_CONTIG") is False


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_more_programs_per_sm_compute_every_tile_the_same(operands, kind):
    """The persistent forward/dgrad grid spreads the same tiles over more programs: results
    bit for bit, ragged and empty groups included."""

    w, dout, lens = operands
    base = configs.INTERP_FP8 if kind == "fp8" else configs.INTERP
    more = dataclasses.replace(base, programs_per_sm=3)
    if kind == "fp8":
        q = F.quant_weight_128x128(w)
        x = quant_fp8_blockwise_1x128(torch.randn(dout.shape[0], w.shape[2]).to(dout))
        one = F.grouped_mm_fp8(x, q, lens, config=base)
        three = F.grouped_mm_fp8(x, q, lens, config=more)
    else:
        a = dout.to(torch.float16)
        b = w.to(torch.float16)
        one = grouped_mm(a, b, lens, b_is_nk=False, config=base)
        three = grouped_mm(a, b, lens, b_is_nk=False, config=more)
    assert torch.equal(one, three)
    with pytest.raises(ValueError, match="programs_per_sm"):
        dataclasses.replace(base, programs_per_sm=0)


@pytest.mark.parametrize("b_is_nk", [True, False], ids=["forward", "dgrad"])
@pytest.mark.parametrize("K", [128, 48], ids=["k128", "k48"])
@pytest.mark.parametrize("N", [160, 192], ids=["n160", "n192"])
def test_tma_loads_give_the_pointer_loads_results(device, b_is_nk, K, N):
    """The bf16 grouped GEMM with TMA descriptors (interpreter: fp16) against pointer loads, bit
    for bit: rows past a group and columns past N are read but never stored, K tails are
    zeros either way; a dgrad whose K is not a tile multiple keeps pointer loads."""

    g = torch.Generator().manual_seed(11)
    dtype = torch.float16 if device == "cpu" else torch.bfloat16
    lens = torch.tensor(LENS, dtype=torch.int32, device=device)
    a = torch.randn(sum(LENS), K if b_is_nk else N, generator=g).to(dtype).to(device)
    b = torch.randn(len(LENS), N, K, generator=g).to(dtype).to(device)
    pointer = dataclasses.replace(configs.BUCKETS["bf16_mm_large"], use_tma=False)
    base = configs.INTERP if device == "cpu" else pointer
    tma = dataclasses.replace(base, use_tma=True)
    assert tma_readable(a, b, b_is_nk, base.BLOCK_K) == (b_is_nk or N % base.BLOCK_K == 0)
    one = grouped_mm(a, b, lens, b_is_nk=b_is_nk, config=base)
    two = grouped_mm(a, b, lens, b_is_nk=b_is_nk, config=tma)
    if device == "cpu":
        assert torch.equal(one, two)
    else:
        assert torch.allclose(one.float(), two.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("change", [{"flatten": True}, {"tma_store": 1}, {"tma_store": 2}], ids=str)
@pytest.mark.parametrize("b_is_nk", [True, False], ids=["forward", "dgrad"])
@pytest.mark.parametrize("N", [160, 192], ids=["n160", "n192"])
def test_flattened_pipeline_and_tma_stores_keep_the_results(device, change, b_is_nk, N):
    """One pipeline over a program's (tile, k-block)s, or full tiles stored by TMA (whole or
    halves), against the per-tile pipeline with masked stores, bit for bit: a group of 129 rows
    has full tiles and a partial last one (masked, since its next rows belong to the next
    group), N = 160 has a column tail the TMA unit drops; empty and short groups write nothing
    of theirs."""

    g = torch.Generator().manual_seed(23)
    dtype = torch.float16 if device == "cpu" else torch.bfloat16
    lens = torch.tensor(LENS + [129, 2], dtype=torch.int32, device=device)
    K = 128
    a = torch.randn(int(lens.sum()), K if b_is_nk else N, generator=g).to(dtype).to(device)
    b = torch.randn(len(lens), N, K, generator=g).to(dtype).to(device)
    base = configs.INTERP if device == "cpu" else configs.BUCKETS["bf16_mm_large"]
    base = dataclasses.replace(base, use_tma=True, split_tail=False, flatten=False, tma_store=0)
    if change.get("tma_store") == 1 and device != "cpu":  # a whole 128x256 tile's staging
        base = dataclasses.replace(base, num_stages=3)
    one = grouped_mm(a, b, lens, b_is_nk=b_is_nk, config=base)
    two = grouped_mm(a, b, lens, b_is_nk=b_is_nk, config=dataclasses.replace(base, **change))
    assert torch.equal(one, two)
    with pytest.raises(ValueError, match="tma_store"):
        dataclasses.replace(base, tma_store=4)
    with pytest.raises(ValueError, match="flatten or tma_store, not both"):
        grouped_mm(a, b, lens, config=dataclasses.replace(base, flatten=True, tma_store=2))


@pytest.mark.parametrize("N, K", [(160, 200), (192, 48), (40, 136)], ids=str)
def test_wgrad_tma_loads_give_the_pointer_loads_results(device, N, K):
    """The bf16 weight gradient through per-group TMA descriptors (interpreter: fp16) against
    pointer loads, bit for bit: each descriptor ends at its group's last row, so the next
    group's rows come back as zeros, as the mask made them; an empty group gives zeros."""

    g = torch.Generator().manual_seed(17)
    dtype = torch.float16 if device == "cpu" else torch.bfloat16
    lens = torch.tensor(LENS + [129], dtype=torch.int32, device=device)
    T = int(lens.sum())
    dy = torch.randn(T, N, generator=g).to(dtype).to(device)
    x = torch.randn(T, K, generator=g).to(dtype).to(device)
    pointer = configs.INTERP if device == "cpu" else configs.BUCKETS["bf16_wgrad"]
    pointer = dataclasses.replace(pointer, use_tma=False)
    assert wgrad_tma_readable(dy, x)
    one = grouped_wgrad(dy, x, lens, config=pointer)
    two = grouped_wgrad(dy, x, lens, config=dataclasses.replace(pointer, use_tma=True))
    assert not one[0].any() and not one[3].any()  # empty groups
    if device == "cpu":
        assert torch.equal(one, two)
    else:
        assert torch.allclose(one.float(), two.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "change",
    [
        {"persistent": True},
        {"persistent": True, "flatten": True},
        {"persistent": True, "flatten": True, "tma_store": 2},
        {"tma_store": 1},
    ],
    ids=str,
)
@pytest.mark.parametrize("N", [160, 192], ids=["n160", "n192"])
def test_wgrad_persistent_flattened_and_tma_stored_keep_the_results(device, change, N):
    """The bf16 weight gradient walked by persistent programs (flattened or not) and stored by
    TMA, against one program per tile with masked stores, bit for bit: empty groups give
    zeros, a ragged long group and N = 160 (not a tile multiple: masked stores) included."""

    g = torch.Generator().manual_seed(29)
    dtype = torch.float16 if device == "cpu" else torch.bfloat16
    lens = torch.tensor(LENS + [129], dtype=torch.int32, device=device)
    T, K = int(lens.sum()), 136
    dy = torch.randn(T, N, generator=g).to(dtype).to(device)
    x = torch.randn(T, K, generator=g).to(dtype).to(device)
    base = configs.INTERP if device == "cpu" else configs.BUCKETS["bf16_wgrad_small"]
    base = dataclasses.replace(base, use_tma=True, split_tail=False)
    one = grouped_wgrad(dy, x, lens, config=base)
    two = grouped_wgrad(dy, x, lens, config=dataclasses.replace(base, **change))
    assert not two[0].any() and not two[3].any()  # empty groups
    assert torch.equal(one, two)


def test_a_wgrad_grid_size_compiles_no_variant_of_its_own():
    """NUM_PROGS is a constexpr: the shipped wgrad (one program per tile) passes 1 whatever its
    grid, so shapes of different tile counts share one compiled kernel."""
    shapes = [s for s in S.moe_campaign() if "qwen3_30b" in s.label or "olmoe" in s.label]
    census = [gc.census_step("bf16", s, gluon=False) for s in shapes]
    launches = [x for c in census for x in c.of("_grouped_wgrad_kernel")]
    assert len({x.grid for x in launches}) > 1
    assert {x.get("NUM_PROGS") for x in launches} == {1}
    assert {x.get("PERSISTENT") for x in launches} == {False}


def test_wgrad_tma_needs_aligned_rows():
    dy, x = torch.zeros(8, 16, dtype=torch.bfloat16), torch.zeros(8, 24, dtype=torch.bfloat16)
    assert wgrad_tma_readable(dy, x)
    assert not wgrad_tma_readable(dy, torch.zeros(8, 20, dtype=torch.bfloat16))  # 40-byte rows
    assert not wgrad_tma_readable(dy, torch.zeros(24, 8, dtype=torch.bfloat16).t())
    assert not wgrad_tma_readable(torch.zeros(8 * 16 + 1, dtype=torch.bfloat16)[1:].view(8, 16), x)


@pytest.mark.slow
def test_tma_tiles_compile_for_sm90_unspilled(monkeypatch):
    """The shipped forward/dgrad and weight-gradient tiles of both dtypes with TMA loads, as the
    dry census records the launches, compiled for sm_90 without a GPU (the four kernels in one
    process): each fits, does not spill, keeps its wgmma pipeline."""

    for bucket, cfg in list(configs.BUCKETS.items()):  # whichever the census shape selects
        if bucket.startswith(("bf16_mm", "bf16_wgrad", "fp8_mm", "fp8_wgrad")):
            monkeypatch.setitem(configs.BUCKETS, bucket, dataclasses.replace(cfg, use_tma=True))
    shape = next(s for s in S.moe_offlist() if s.label == "qwen15_moe_a27b_down_zipf1.2")
    kernels = {
        ("bf16", "mm"): _grouped_mm_kernel,
        ("fp8", "mm"): _grouped_mm_fp8_kernel,
        ("bf16", "wgrad"): _grouped_wgrad_kernel,
        ("fp8", "wgrad"): _grouped_wgrad_fp8_kernel,
    }
    launches, fns = [], {}
    for (kind, which), fn in kernels.items():
        found = gc.census_step(kind, shape, gluon=False).of(fn.fn.__name__)
        expected = [True, True] if which == "mm" else [True]  # forward and dgrad; the wgrad
        assert [x.get("USE_TMA") for x in found] == expected, (kind, which)
        launches += found
        fns[fn.fn.__name__] = fn
    for x, res in zip(launches, resources_by_kernel(launches, fns), strict=True):
        assert res.fits() and res.spill_bytes == 0 and not res.serialized, (x.kernel, res.line())


@pytest.mark.parametrize("K", [256, 48], ids=["k256", "k48"])
def test_fp8_tma_loads_give_the_pointer_loads_results(device, K):
    """The FP8 grouped GEMM (K-major weight: the forward, and the dgrad on its transposed
    copy) with TMA descriptors against pointer loads, bit for bit in the interpreter."""

    g = torch.Generator().manual_seed(13)
    lens = torch.tensor(LENS, dtype=torch.int32, device=device)
    x = torch.randn(sum(LENS), K, generator=g).to(torch.bfloat16).to(device)
    w = torch.randn(len(LENS), 160, K, generator=g).to(torch.bfloat16).to(device)
    xq, wq = quant_fp8_blockwise_1x128(x), F.quant_weight_128x128(w)
    triton = dataclasses.replace(configs.BUCKETS["fp8_mm_large"], gluon_ws=False, use_tma=False)
    base = configs.INTERP_FP8 if device == "cpu" else triton
    one = F.grouped_mm_fp8(xq, wq, lens, config=base)
    two = F.grouped_mm_fp8(xq, wq, lens, config=dataclasses.replace(base, use_tma=True))
    if device == "cpu":
        assert torch.equal(one, two)
    else:
        assert torch.allclose(one.float(), two.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("N, K", [(96, 200), (64, 136)], ids=str)
def test_fp8_wgrad_tma_loads_give_the_pointer_loads_results(device, N, K):
    """The FP8 weight gradient's chunks through TMA descriptors against pointer loads, bit for
    bit in the interpreter: groups that share a 128-token chunk, empty groups, rows past N
    and K (zeros from the descriptor, clamped re-reads from the pointers, never stored)."""

    g = torch.Generator().manual_seed(19)
    lens = torch.tensor([0, 37, 1, 0, 150, 200], dtype=torch.int32, device=device)
    T = int(lens.sum())
    dy = torch.randn(T, N, generator=g).to(torch.bfloat16).to(device)
    x = torch.randn(T, K, generator=g).to(torch.bfloat16).to(device)
    _, dyt = F.quant_fp8_dual_1x128(dy, F.FP8, pad_t_to=F.GROUP)
    _, xt = F.quant_fp8_dual_1x128(x, F.FP8, pad_t_to=F.GROUP)
    base = configs.INTERP_FP8 if device == "cpu" else configs.BUCKETS["fp8_wgrad"]
    base = dataclasses.replace(base, use_tma=False)
    one = F.grouped_wgrad_fp8(dyt, xt, lens, config=base)
    two = F.grouped_wgrad_fp8(dyt, xt, lens, config=dataclasses.replace(base, use_tma=True))
    assert not one[0].any() and one[4].abs().sum() > 0
    if device == "cpu":
        assert torch.equal(one, two)
    else:
        assert torch.allclose(one.float(), two.float(), rtol=1e-2, atol=1e-2)


LENS_CHUNKS = [0, 37, 1, 0, 150, 200]


def _per_group_wgrad(dy, x, lens, config):
    """Each group's weight gradient alone (one group from token 0: chunks aligned)."""
    out, start = [], 0
    for n in lens:
        one = torch.tensor([n], dtype=torch.int32, device=dy.device)
        _, dyt = F.quant_fp8_dual_1x128(dy[start : start + n], F.FP8, pad_t_to=F.GROUP)
        _, xt = F.quant_fp8_dual_1x128(x[start : start + n], F.FP8, pad_t_to=F.GROUP)
        out.append(F.grouped_wgrad_fp8(dyt, xt, one, config=config)[0])
        start += n
    return torch.stack(out)


@pytest.mark.parametrize("tma", [False, True], ids=["pointer", "tma"])
def test_group_chunks_give_each_group_the_wgrad_of_that_group_alone(device, tma):
    """With each group's own 128-token chunks the weight gradient of group g is, bit for bit
    in the interpreter, that of group g quantized and reduced on its own: no token of a
    neighbour enters its chunks and no mask is needed."""
    g = torch.Generator().manual_seed(23)
    N, K = 96, 136
    lens = torch.tensor(LENS_CHUNKS, dtype=torch.int32, device=device)
    T = int(lens.sum())
    dy = torch.randn(T, N, generator=g).to(torch.bfloat16).to(device)
    x = torch.randn(T, K, generator=g).to(torch.bfloat16).to(device)
    base = configs.INTERP_FP8 if device == "cpu" else configs.BUCKETS["fp8_wgrad"]
    cfg = dataclasses.replace(base, use_tma=tma)
    _, dyt = quant_fp8_dual_1x128_grouped(dy, lens, F.FP8)
    _, xt = quant_fp8_dual_1x128_grouped(x, lens, F.FP8)
    got = F.grouped_wgrad_fp8(dyt, xt, lens, config=cfg, group_chunks=True)
    want = _per_group_wgrad(dy, x, LENS_CHUNKS, cfg)
    if device == "cpu":
        assert torch.equal(got, want)
    else:
        assert torch.allclose(got.float(), want.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.slow
def test_a_group_chunks_bucket_runs_the_step_in_that_layout(monkeypatch, device):
    """The bucket's flag reaches the step: the forward is unchanged (same row copy), and the
    weight gradient is the per-group one, not the global-chunk one. Whatever the shipped
    bucket holds, both layouts are set here explicitly."""
    g = torch.Generator().manual_seed(29)
    lens = torch.tensor(LENS_CHUNKS, dtype=torch.int32, device=device)
    T, N, K = int(lens.sum()), 64, 136
    x = torch.randn(T, K, generator=g).to(torch.bfloat16).to(device)
    w = (torch.randn(len(LENS_CHUNKS), N, K, generator=g) / K**0.5).to(torch.bfloat16)
    w = w.to(device)
    dout = torch.randn(T, N, generator=g).to(torch.bfloat16).to(device)

    def step(group_chunks: bool):
        if device == "cpu":  # the interpreter's tile, whatever the GPU buckets hold
            cfg = dataclasses.replace(configs.INTERP_FP8, group_chunks=group_chunks)
            monkeypatch.setattr(configs, "INTERP_FP8", cfg)
        else:
            cfg = dataclasses.replace(configs.BUCKETS["fp8_wgrad"], group_chunks=group_chunks)
            monkeypatch.setitem(configs.BUCKETS, "fp8_wgrad", cfg)
        xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
        out = F.grouped_gemm_fp8_blockwise(xx, ww, lens)
        out.backward(dout)
        return out.detach(), ww.grad, cfg

    out0, dw0, _ = step(False)
    out1, dw1, cfg = step(True)
    assert torch.equal(out0, out1)
    want = _per_group_wgrad(dout, x, LENS_CHUNKS, cfg)
    if device == "cpu":
        assert torch.equal(dw1, want)
    else:
        assert torch.allclose(dw1.float(), want.float(), rtol=1e-2, atol=1e-2)
    assert not torch.equal(dw0[4:], dw1[4:])  # groups 4 and 5 share a chunk in the old layout


@pytest.mark.slow
def test_group_chunks_step_census_and_sm90_compile(monkeypatch):
    """With the bucket's group_chunks, the dry census sees the grouped dual quantization (x
    and dout) and a masked-free Triton weight gradient (where the warp-specialized one does
    not apply) that walks fewer chunks; it compiles for sm_90 without spilling, with pointer
    and with TMA loads."""
    shape = next(s for s in S.moe_offlist() if s.label == "qwen15_moe_a27b_down_zipf1.2")
    shared = dataclasses.replace(configs.BUCKETS["fp8_wgrad"], group_chunks=False)
    monkeypatch.setitem(configs.BUCKETS, "fp8_wgrad", shared)
    old = gc.summarize(gc.census_step("fp8", shape, gluon=False), S.lens_of(shape), gc.H200_SMS)
    for tma in (False, True):
        cfg = dataclasses.replace(configs.BUCKETS["fp8_wgrad"], group_chunks=True, use_tma=tma)
        monkeypatch.setitem(configs.BUCKETS, "fp8_wgrad", cfg)
        c = gc.census_step("fp8", shape, gluon=False)
        assert len(c.of("_dual_quant_grouped_kernel")) == 2 and not c.of("_dual_quant_kernel")
        launches = c.of("_grouped_wgrad_fp8_kernel")
        assert [x.get("GROUP_CHUNKS") for x in launches] == [True]
        new = gc.summarize(c, S.lens_of(shape), gc.H200_SMS)
        assert dict(new.fills)["wgrad"].waste < dict(old.fills)["wgrad"].waste
        for res in resources_of(_grouped_wgrad_fp8_kernel, launches):
            assert res.fits() and res.spill_bytes == 0 and not res.serialized, res.line()


def test_bf16_weight_gradient_of_small_groups_takes_its_own_bucket() -> None:
    """The short-reduction wgrad tile serves bf16 groups of at most SMALL_WGRAD_ROWS rows on
    average; longer groups and the FP8 wgrad keep theirs; the interpreter its own."""
    small, usual = configs.BUCKETS["bf16_wgrad_small"], configs.BUCKETS["bf16_wgrad"]
    assert small != usual
    limit = configs.SMALL_WGRAD_ROWS
    assert configs.select("wgrad", "bf16", limit, interpret=False) == small
    assert configs.select("wgrad", "bf16", limit + 1, interpret=False) == usual
    fp8 = configs.BUCKETS["fp8_wgrad"]
    assert configs.select("wgrad", "fp8", 64, interpret=False) == fp8
    assert configs.select("wgrad", "bf16", 64, interpret=True) == configs.INTERP
