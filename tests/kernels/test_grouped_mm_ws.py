"""The warp-specialized grouped bf16 forward and dgrad (Gluon, sm_90): offline compiles on any
machine, the launch's arguments against the kernel's signature, which operands it takes, the
routing, and results on the H200 against an fp64 reference (``pytest -m gpu``)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from kernel_ratchet.kernels.gemm.launch import _ensure_tma_allocator
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm import mm_ws_launch as ws
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_mm
from kernel_ratchet.kernels.grouped_gemm.mm_ws import _grouped_mm_ws_kernel
from kernel_ratchet.kernels.offline import Resources
from tests.kernels.ws_helpers import (
    LaunchRecorder,
    assert_unspilled_and_pipelined,
    compiled_in_a_fresh_process,
)

BF16, HALF = torch.bfloat16, torch.half
#: A config that asks for the kernel (the shipped one, or one like it where none ships).
WS = configs.MM_WS or configs.TileConfig(128, 256, 64, 8, 8, 3, gluon_ws=True)
CALLS = [
    {"block_n": 256, "stages": 4},
    {"block_n": 256, "stages": 3, "b_is_nk": False},
    {"block_n": 128, "stages": 5},
]


@functools.lru_cache(maxsize=1)
def _resources() -> list[Resources]:
    return compiled_in_a_fresh_process("kernel_ratchet.kernels.grouped_gemm.mm_ws_launch", CALLS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "which", range(len(CALLS)), ids=["fwd_256_s3", "dgrad_256_s3", "fwd_128_s5"]
)
def test_the_kernel_compiles_for_sm90_unspilled_and_pipelined(which):
    res, call = _resources()[which], CALLS[which]
    block_n, stages = call["block_n"], call["stages"]
    staging = (1 if ws.shares_staging(block_n, stages) else 2) * 64 * block_n * 2
    assert res.shared_bytes >= stages * (128 + block_n) * 64 * 2 + staging
    assert_unspilled_and_pipelined(res)


@pytest.mark.parametrize("b_is_nk", [True, False], ids=["forward", "dgrad"])
def test_a_launch_passes_every_parameter_of_the_kernel(monkeypatch, b_is_nk):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_mm_ws_kernel", rec)
    T, G, N, Kr = 300, 5, 200, 192
    a = torch.zeros(T, Kr, dtype=BF16)
    b = torch.zeros(G, N, Kr, dtype=BF16) if b_is_nk else torch.zeros(G, Kr, N, dtype=BF16)
    lens = torch.tensor([0, 100, 1, 0, 199], dtype=torch.int32)
    out = ws.grouped_mm_ws(a, b, lens, b_is_nk=b_is_nk, block_n=128, group_m=4, stages=5, num_sms=7)
    assert out.shape == (T, N) and out.dtype == BF16
    ((grid, args, kw),) = rec.calls
    assert grid == (7,)
    assert args[2] is out and args[3] is lens and args[4:] == (G, N, Kr, N)
    assert kw == {**ws._constexprs(G, 128, 4, 5, 7, BF16, b_is_nk), **ws.OPTIONS}
    assert kw["B_KMAJOR"] is b_is_nk
    names = _grouped_mm_ws_kernel.arg_names
    assert sorted(set(kw) - set(ws.OPTIONS)) == sorted(names[len(args) :])
    b_desc = args[1]
    assert list(b_desc.shape) == ([G * N, Kr] if b_is_nk else [G * Kr, N])


def test_four_stages_of_the_widest_tile_share_one_output_staging_buffer():
    assert ws.shares_staging(256, 4)  # 192 KiB of ring + 64 KiB of staging is over 227 KiB
    assert not ws.shares_staging(256, 3) and not ws.shares_staging(128, 5)


def test_a_block_n_no_wgmma_has_is_refused():
    a, b = torch.zeros(8, 64, dtype=BF16), torch.zeros(1, 512, 64, dtype=BF16)
    with pytest.raises(ValueError, match="block_n must be one of"):
        ws.grouped_mm_ws(a, b, torch.tensor([8], dtype=torch.int32), block_n=512)


def _z(*shape: int, dtype: torch.dtype = BF16, device: str = "cpu") -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype, device=device)


@pytest.mark.parametrize(
    ("why", "make", "b_is_nk", "ok"),
    [
        ("forward", lambda: (_z(64, 200), _z(4, 136, 200)), True, True),
        ("dgrad", lambda: (_z(64, 192), _z(4, 192, 136)), False, True),
        ("dgrad, Kr not a multiple of 64", lambda: (_z(64, 200), _z(4, 200, 136)), False, False),
        ("N not a multiple of 8", lambda: (_z(64, 200), _z(4, 132, 200)), True, False),
        ("A rows not 16 bytes", lambda: (_z(64, 203), _z(4, 136, 203)), True, False),
        ("fp16", lambda: (_z(64, 200, dtype=HALF), _z(4, 136, 200, dtype=HALF)), True, True),
        ("mixed dtypes", lambda: (_z(64, 200), _z(4, 136, 200, dtype=torch.half)), True, False),
        ("weight not one stack", lambda: (_z(64, 200), _z(8, 136, 200)[::2]), True, False),
        ("weight transposed", lambda: (_z(64, 200), _z(4, 200, 136).transpose(1, 2)), True, False),
        ("contraction mismatch", lambda: (_z(64, 200), _z(4, 136, 192)), True, False),
    ],
)  # fmt: skip
def test_the_operands_the_kernel_takes(why, make, b_is_nk, ok):
    a, b = make()
    assert ws.operands_ok(a, b, b_is_nk) is ok, why
    assert not ws.supported(a, b, b_is_nk)  # CPU tensors: never on this machine


def test_a_ws_config_where_the_kernel_does_not_apply_runs_the_triton_kernel(device):
    """On the CPU (and anywhere ``supported`` says no) a config asking for the WS kernel gets
    the Triton kernel with its tile, bit for bit."""
    if device == "cuda":
        pytest.skip("on a GPU the WS kernel applies: see the GPU test")
    g = torch.Generator().manual_seed(4)
    lens = torch.tensor([0, 37, 1, 0, 50], dtype=torch.int32)
    x, w = torch.randn(88, 64, generator=g), torch.randn(5, 72, 64, generator=g)
    base = configs.INTERP
    same = grouped_mm(x, w, lens, config=dataclasses.replace(base, gluon_ws=True))
    assert torch.equal(same, grouped_mm(x, w, lens, config=base))


@pytest.mark.parametrize("b_is_nk", [True, False], ids=["forward", "dgrad"])
def test_each_kind_takes_its_own_shipped_config(monkeypatch, b_is_nk, device):
    """The forward runs MM_WS and the dgrad DGRAD_WS where the kernel applies (here made to),
    for groups above SMALL_GROUP_ROWS rows on average; smaller groups keep the Triton path."""
    fwd = configs.TileConfig(128, 256, 64, 8, 8, 3, gluon_ws=True)
    dgrad = configs.TileConfig(128, 128, 64, 4, 8, 5, gluon_ws=True)
    monkeypatch.setattr(configs, "MM_WS", fwd)
    monkeypatch.setattr(configs, "DGRAD_WS", dgrad)
    monkeypatch.setattr(ws, "supported", lambda a, b, nk: True)
    calls = []
    monkeypatch.setattr(ws, "grouped_mm_ws", lambda *a, **kw: calls.append(kw) or "ws")
    G, Kr, N = 4, 128, 136
    b = _z(G, N, Kr, device=device) if b_is_nk else _z(G, Kr, N, device=device)
    rows = configs.SMALL_GROUP_ROWS * G + G  # just above the small bucket's average
    lens = torch.full((G,), rows // G, dtype=torch.int32, device=device)
    assert grouped_mm(_z(rows, Kr, device=device), b, lens, b_is_nk=b_is_nk) == "ws"
    want = fwd if b_is_nk else dgrad
    (kw,) = calls
    assert (kw["block_n"], kw["group_m"]) == (want.BLOCK_N, want.GROUP_M)
    assert kw["stages"] == want.num_stages and kw["b_is_nk"] is b_is_nk
    small = torch.full((G,), configs.SMALL_GROUP_ROWS // 4, dtype=torch.int32, device=device)
    out = grouped_mm(_z(int(small.sum()), Kr, device=device), b, small, b_is_nk=b_is_nk)
    assert len(calls) == 1 and out.shape == (int(small.sum()), N)  # the Triton kernel ran


def _reference(a: torch.Tensor, b: torch.Tensor, lens: list[int], b_is_nk: bool) -> torch.Tensor:
    out, r = [], 0
    for g, n in enumerate(lens):
        bg = b[g].double()
        out.append(a[r : r + n].double() @ (bg.t() if b_is_nk else bg))
        r += n
    return torch.cat(out)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "lens",
    [[0, 37, 1, 0, 250], [700, 0, 129, 1024, 255, 64, 63], [512] * 8, [1] * 40 + [3000], [0, 0]],
    ids=["tiny-ragged", "ragged", "uniform", "many-small-one-large", "all-empty"],
)
@pytest.mark.parametrize("nk", [(256, 384), (1288, 704), (136, 4096)], ids=str)
@pytest.mark.parametrize("b_is_nk", [True, False], ids=["forward", "dgrad"])
@pytest.mark.parametrize(
    "tile", [(256, 3, 8), (256, 4, 8), (128, 5, 1)], ids=["256_s3_g8", "256_s4_g8", "128_s5_g1"]
)
def test_matches_an_fp64_reference_on_gpu(lens, nk, b_is_nk, tile):
    """Every group's rows within bf16 rounding of the exact product: group lengths not
    multiples of 128, N not a multiple of the tile, the forward's K not a multiple of 64,
    empty groups (no rows to write), a group change in most programs' tile lists."""
    (N, K), (block_n, stages, group_m) = nk, tile
    if not b_is_nk:
        K = K // 64 * 64  # the dgrad's contraction: a multiple of 64
    T = sum(lens)
    g = torch.Generator(device="cuda").manual_seed(T + N + K)
    a = torch.randn(T, K, device="cuda", dtype=BF16, generator=g)
    shape = (len(lens), N, K) if b_is_nk else (len(lens), K, N)
    b = torch.randn(*shape, device="cuda", dtype=BF16, generator=g) / K**0.5
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    assert ws.supported(a, b, b_is_nk)
    _ensure_tma_allocator()  # the kernel builds its store descriptors on the device
    out = ws.grouped_mm_ws(
        a, b, lens_t, b_is_nk=b_is_nk, block_n=block_n, group_m=group_m, stages=stages
    )
    assert out.shape == (T, N) and not out.isnan().any()
    if T:
        ref = _reference(a, b, lens, b_is_nk)
        assert (out.double() - ref).abs().max().item() <= 2e-2 * ref.abs().amax().item()


@pytest.mark.gpu
@pytest.mark.parametrize("b_is_nk", [True, False], ids=["forward", "dgrad"])
def test_repeated_bf16_calls_of_one_geometry_compute_each_calls_product_on_gpu(b_is_nk):
    """Whatever the launcher keeps from a geometry's first call, later calls compute their own
    product: a new routing of the same tokens, new values in the same tensors, new values at
    new addresses."""
    N, K, T = 1288, 704, 2235
    g = torch.Generator(device="cuda").manual_seed(3)
    shape = (7, N, K) if b_is_nk else (7, K, N)
    a = torch.randn(T, K, device="cuda", dtype=BF16, generator=g)
    b = torch.randn(*shape, device="cuda", dtype=BF16, generator=g) / K**0.5
    _ensure_tma_allocator()
    routings = [
        [700, 0, 129, 1024, 255, 64, 63],
        [63, 64, 255, 1024, 129, 0, 700],
        [320] * 6 + [315],
    ]
    for i, lens in enumerate(routings + routings[:1]):
        if i == 2:
            a.copy_(torch.randn(T, K, device="cuda", dtype=BF16, generator=g))
        elif i == 3:
            a, b = torch.randn_like(a), torch.randn_like(b) / K**0.5
        lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
        out = ws.grouped_mm_ws(a, b, lens_t, b_is_nk=b_is_nk)
        ref = _reference(a, b, lens, b_is_nk)
        err = (out.double() - ref).abs().max().item()
        assert err <= 2e-2 * ref.abs().amax().item(), f"call {i} (routing {lens})"


@pytest.mark.gpu
def test_the_launcher_routes_both_kinds_and_fp16_on_gpu():
    """Through :func:`grouped_mm`: the forward and the dgrad on bf16 and fp16 give the Triton
    kernel's result within rounding."""
    g = torch.Generator(device="cuda").manual_seed(9)
    lens = torch.tensor([300, 0, 213, 511], dtype=torch.int32, device="cuda")
    T = int(lens.sum())
    triton_cfg = dataclasses.replace(configs.BUCKETS["bf16_mm_large"], gluon_ws=False)
    for dtype in (BF16, torch.half):
        x = torch.randn(T, 320, device="cuda", dtype=dtype, generator=g)
        w = torch.randn(4, 264, 320, device="cuda", dtype=dtype, generator=g) / 18
        dout = torch.randn(T, 264, device="cuda", dtype=dtype, generator=g)
        for a, b, nk in ((x, w, True), (dout, w, False)):
            if not nk:
                b = b[:, :256].contiguous()  # the dgrad's contraction: a multiple of 64
                a = a[:, :256].contiguous()
            assert ws.supported(a, b, nk)
            out = grouped_mm(a, b, lens, b_is_nk=nk, config=WS)
            ref = grouped_mm(a, b, lens, b_is_nk=nk, config=triton_cfg)
            assert out.dtype == dtype
            assert torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
