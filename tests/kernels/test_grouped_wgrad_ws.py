"""The warp-specialized grouped weight gradient (Gluon, sm_90): an offline compile on any
machine, the launch's arguments against the kernel's signature, which operands it takes, the
routing, and results on the H200 against an fp32 reference (``pytest -m gpu``)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from kernel_ratchet.kernels.gemm import wgrad_ws_launch as ws
from kernel_ratchet.kernels.gemm.launch import _ensure_tma_allocator
from kernel_ratchet.kernels.gemm.wgrad_ws import _grouped_wgrad_ws_kernel
from kernel_ratchet.kernels.grouped_gemm import configs
from kernel_ratchet.kernels.grouped_gemm.launch import grouped_wgrad
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES, Resources
from tests.kernels.ws_helpers import (
    LaunchRecorder,
    assert_unspilled_and_pipelined,
    compiled_in_a_fresh_process,
)

BF16 = torch.bfloat16
#: A config that asks for the kernel (the shipped one, or one like it where none ships).
WS = configs.WGRAD_WS or configs.TileConfig(64, 128, 256, 32, 8, 3, gluon_ws=True)


@functools.lru_cache(maxsize=1)
def _resources() -> list[Resources]:
    calls = [
        {"block_k": 256, "stages": 3},
        {"block_k": 128, "stages": 5},
        {"block_k": 256, "stages": 3, "group_n": 16, "longest_first": True},
    ]
    return compiled_in_a_fresh_process("kernel_ratchet.kernels.gemm.wgrad_ws_launch", calls)


@pytest.mark.slow
@pytest.mark.parametrize("which", [0, 1, 2], ids=["128x256_s3", "128x128_s5", "longest_first"])
def test_the_kernel_compiles_for_sm90_unspilled_and_pipelined(which):
    res = _resources()[which]
    stages, block_k = ((3, 256), (5, 128), (3, 256))[which]
    assert res.shared_bytes >= stages * (128 + block_k) * 64 * 2 + 2 * 64 * block_k * 2
    assert_unspilled_and_pipelined(res)
    assert SM90_SHARED_BYTES - res.shared_bytes > 0, res.line()


def test_a_launch_passes_every_parameter_of_the_kernel(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_wgrad_ws_kernel", rec)
    T, G, N, K = 300, 5, 384, 520
    dy, x = torch.zeros(T, N, dtype=BF16), torch.zeros(T, K, dtype=BF16)
    lens = torch.tensor([0, 100, 1, 0, 199], dtype=torch.int32)
    dw = ws.grouped_wgrad_ws(dy, x, lens, block_k=128, group_n=2, stages=5, num_sms=7)
    assert dw.shape == (G, N, K) and dw.dtype == BF16
    ((grid, args, kw),) = rec.calls
    assert grid == (7,)  # min(SMs, 5 groups x 3 n tiles x 5 k tiles)
    assert args[0] is dy and args[1] is x and args[3] is lens
    assert args[4:] == (G, N, K, N, K)
    assert kw == {**ws._constexprs(G, 128, 2, False, 5, 7, BF16, BF16), **ws.OPTIONS}
    assert kw["G_POW2"] == 8
    names = _grouped_wgrad_ws_kernel.arg_names
    assert sorted(set(kw) - set(ws.OPTIONS)) == sorted(names[len(args) :])


def test_longest_first_passes_the_groups_by_decreasing_rows(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_wgrad_ws_kernel", rec)
    dy, x = torch.zeros(300, 128, dtype=BF16), torch.zeros(300, 256, dtype=BF16)
    lens = torch.tensor([0, 100, 1, 0, 199], dtype=torch.int32)
    ws.grouped_wgrad_ws(dy, x, lens, longest_first=True, num_sms=4)
    ((_, args, kw),) = rec.calls
    assert kw["ORDERED"] is True and args[4] == 5  # G: the order starts at lens_ptr + G
    # the lengths, then the groups by decreasing length, ties by index
    assert args[3].dtype == torch.int32
    assert args[3].tolist() == [0, 100, 1, 0, 199] + [4, 1, 2, 0, 3]


def test_a_grid_never_exceeds_the_tiles(monkeypatch):
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_wgrad_ws_kernel", rec)
    dy, x = torch.zeros(10, 128, dtype=BF16), torch.zeros(10, 256, dtype=BF16)
    ws.grouped_wgrad_ws(dy, x, torch.tensor([4, 6], dtype=torch.int32), num_sms=132)
    assert rec.calls[0][0] == (2,)  # two groups of one 128 x 256 tile


def test_a_block_k_no_wgmma_has_is_refused():
    dy, x = torch.zeros(8, 128, dtype=BF16), torch.zeros(8, 512, dtype=BF16)
    with pytest.raises(ValueError, match="block_k must be one of"):
        ws.grouped_wgrad_ws(dy, x, torch.tensor([8], dtype=torch.int32), block_k=512)


def _z(rows: int, cols: int, dtype: torch.dtype = BF16) -> torch.Tensor:
    return torch.zeros(rows, cols, dtype=dtype)


@pytest.mark.parametrize(
    ("why", "make", "ok"),
    [
        ("aligned bf16", lambda: (_z(64, 256), _z(64, 72)), True),
        ("fp16", lambda: (_z(64, 256, torch.half), _z(64, 72, torch.half)), True),
        ("N not a multiple of 128", lambda: (_z(64, 192), _z(64, 72)), False),
        ("K rows not 16 bytes", lambda: (_z(64, 256), _z(64, 70)), False),
        ("mixed dtypes", lambda: (_z(64, 256), _z(64, 72, torch.half)), False),
        ("fp32", lambda: (_z(64, 256, torch.float32), _z(64, 72, torch.float32)), False),
        ("dY columns strided", lambda: (_z(256, 64).t(), _z(64, 72)), False),
        ("X a column slice, aligned rows", lambda: (_z(64, 256), _z(64, 80)[:, :72]), True),
        ("X misaligned base", lambda: (_z(64, 256), _z(64, 80)[:, 1:73]), False),
    ],
)
def test_the_operands_the_kernel_takes(why, make, ok):
    dy, x = make()
    assert ws.operands_ok(dy, x, 4, dy.dtype) is ok, why
    assert not ws.supported(dy, x, 4, dy.dtype)  # CPU tensors: never on this machine


def test_group_counts_and_output_dtypes_outside_the_kernel():
    dy, x = _z(64, 256), _z(64, 72)
    assert not ws.operands_ok(dy, x, 0, BF16)
    assert not ws.operands_ok(dy, x, ws.MAX_GROUPS + 1, BF16)
    assert not ws.operands_ok(dy, x, 4, torch.float32)


def test_a_ws_config_where_the_kernel_does_not_apply_runs_the_triton_kernel(device):
    """On the CPU (and anywhere ``supported`` says no) a config asking for the WS kernel gets
    the Triton kernel with its tile, bit for bit."""
    if device == "cuda":
        pytest.skip("on a GPU the WS kernel applies: see the GPU test")
    g = torch.Generator().manual_seed(3)
    lens = torch.tensor([0, 37, 1, 0, 50], dtype=torch.int32)
    dy, x = torch.randn(88, 128, generator=g), torch.randn(88, 64, generator=g)
    base = configs.INTERP
    same = grouped_wgrad(dy, x, lens, config=dataclasses.replace(base, gluon_ws=True))
    assert torch.equal(same, grouped_wgrad(dy, x, lens, config=base))


def _reference(dy: torch.Tensor, x: torch.Tensor, lens: list[int]) -> torch.Tensor:
    out, r = [], 0
    for n in lens:
        out.append(dy[r : r + n].double().t() @ x[r : r + n].double())
        r += n
    return torch.stack(out)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "lens",
    [[0, 37, 1, 0, 250], [700, 0, 129, 1024, 255, 64, 63], [512] * 8, [1] * 40 + [3000], [0, 0]],
    ids=["tiny-ragged", "ragged", "uniform", "many-small-one-large", "all-empty"],
)
@pytest.mark.parametrize("nk", [(256, 384), (1280, 712), (128, 4096)], ids=str)
@pytest.mark.parametrize(
    "tile",
    [(256, 3, 32, False), (128, 5, 1, False), (256, 3, 3, False), (256, 3, 16, True)],
    ids=["256_s3_g32", "128_s5_g1", "256_s3_g3", "256_s3_g16_longest_first"],
)
def test_matches_an_fp32_reference_on_gpu(lens, nk, tile):
    """Every group's dW, empty groups' zeros included, within bf16 rounding of the exact sum
    (group lengths not multiples of 64, K not a multiple of the tile, bands of n tiles that do
    not divide the n tiles, a group change in most programs' tile lists)."""
    (N, K), (block_k, stages, group_n, longest_first) = nk, tile
    T = sum(lens)
    g = torch.Generator(device="cuda").manual_seed(T + N + K)
    dy = torch.randn(T, N, device="cuda", dtype=BF16, generator=g)
    x = torch.randn(T, K, device="cuda", dtype=BF16, generator=g)
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    assert ws.supported(dy, x, len(lens), BF16)
    _ensure_tma_allocator()  # the kernel builds its load descriptors on the device
    dw = ws.grouped_wgrad_ws(
        dy, x, lens_t, block_k=block_k, group_n=group_n, longest_first=longest_first, stages=stages
    )
    ref = _reference(dy, x, lens)
    assert dw.shape == ref.shape and not dw.isnan().any()
    tol = 1e-2 * ref.abs().amax().clamp_min(1.0).item()
    assert (dw.double() - ref).abs().max().item() <= tol
    for i, n in enumerate(lens):
        if n == 0:
            assert not dw[i].any(), f"group {i} is empty: its gradient is zero"


@pytest.mark.gpu
def test_the_launcher_routes_strided_and_fp16_operands_on_gpu():
    """Through :func:`grouped_wgrad`: a dY whose rows are a column slice of a wider buffer, and
    fp16 operands, give the Triton kernel's result within rounding."""
    g = torch.Generator(device="cuda").manual_seed(7)
    lens = torch.tensor([300, 0, 213, 511], dtype=torch.int32, device="cuda")
    T = int(lens.sum())
    wide = torch.randn(T, 384, device="cuda", dtype=BF16, generator=g)
    dy, x = wide[:, 64:320], torch.randn(T, 200, device="cuda", dtype=BF16, generator=g)
    triton_cfg = dataclasses.replace(configs.BUCKETS["bf16_wgrad"], gluon_ws=False)
    for a, b in ((dy, x), (dy.half(), x.half())):
        assert ws.supported(a, b, 4, a.dtype)
        out = grouped_wgrad(a, b, lens, config=WS)
        ref = grouped_wgrad(a, b, lens, config=triton_cfg)
        assert out.dtype == a.dtype
        assert torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=0.5)
