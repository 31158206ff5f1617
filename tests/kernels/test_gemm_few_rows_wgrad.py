"""A Linear's weight gradient over few rows on the warp-specialized Gluon kernel with one group
(``gemm.launch.few_rows_wgrad``, :data:`gemm.configs.FEW_ROWS_WGRAD`): which problems it takes,
what it launches (CPU, the kernel recorded), and its result on the H200 (``pytest -m gpu``)."""

from __future__ import annotations

import pytest
import torch

from kernel_ratchet.kernels.gemm import configs, launch
from kernel_ratchet.kernels.gemm import wgrad_ws_launch as ws
from tests.kernels.ws_helpers import LaunchRecorder

BF16 = torch.bfloat16
CFG = configs.FewRowsWgrad(block_k=256, group_n=16, stages=3, max_rows=256, min_tiles=132)


@pytest.fixture
def as_on_an_h200(monkeypatch):
    """The route decides as on an sm_90 GPU with 132 SMs; the kernel is recorded, not run."""
    rec = LaunchRecorder()
    monkeypatch.setattr(launch, "interpreter_mode", lambda: False)
    monkeypatch.setattr(launch, "_num_sms", lambda device: 132)
    monkeypatch.setattr(ws, "supported", ws.operands_ok)
    monkeypatch.setattr(ws, "_grouped_wgrad_ws_kernel", rec)
    return rec


def _operands(M: int, N: int, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(M, N, dtype=BF16), torch.zeros(M, K, dtype=BF16)


@pytest.mark.parametrize(
    "M,N,K,taken",
    [
        (256, 14336, 4096, True),  # 112 x 16 tiles
        (1, 4096, 4096, True),
        (257, 14336, 4096, False),  # more rows than the route's bound
        (256, 1024, 1024, False),  # 8 x 4 tiles: under one wave
        (256, 4100, 4096, False),  # N not a multiple of 128: a tile would leave the output
        (256, 4096, 4100, False),  # K not a multiple of 8: the output rows are not 16-byte
    ],
)
def test_the_route_takes_few_rows_over_a_large_aligned_output(as_on_an_h200, M, N, K, taken):
    dout, a = _operands(M, N, K)
    db = launch.few_rows_wgrad(dout, a, CFG)
    assert (db is not None) == taken and len(as_on_an_h200.calls) == taken
    if taken:
        ((grid, args, kw),) = as_on_an_h200.calls
        assert args[0] is dout and args[1] is a and args[3].tolist() == [M]
        assert args[4:] == (1, N, K, N, K)  # one group
        assert grid == (132,) and kw["STAGES"] == 3 and kw["BLOCK_K"] == 256
        assert db.shape == (N, K) and db.dtype == BF16 and db.is_contiguous()


def test_without_a_config_nothing_is_routed(as_on_an_h200, monkeypatch):
    monkeypatch.setattr(configs, "FEW_ROWS_WGRAD", None)
    assert launch.few_rows_wgrad(*_operands(256, 14336, 4096)) is None
    monkeypatch.setattr(configs, "FEW_ROWS_WGRAD", CFG)
    assert launch.few_rows_wgrad(*_operands(256, 14336, 4096)) is not None
    assert len(as_on_an_h200.calls) == 1


def test_the_linear_backward_takes_its_weight_gradient_from_the_route(as_on_an_h200, monkeypatch):
    """With the route set, the backward's weight gradient is the Gluon kernel's output and the
    Triton GEMM runs the input gradient only."""
    monkeypatch.setattr(configs, "FEW_ROWS_WGRAD", CFG)
    kinds = []
    monkeypatch.setattr(launch, "matmul", lambda x, w, **kw: kinds.append(kw) or x.new_empty(1))
    monkeypatch.setattr(launch, "_tma_ready", lambda t, k: t)
    M, N, K = 128, 4096, 4096
    dout, a = _operands(M, N, K)
    da, db = launch.gemm_backward(dout, a, torch.zeros(N, K, dtype=BF16))
    assert kinds == [{"b_kmajor": False, "kind": "bf16_bwd"}]  # the dgrad only
    assert db.shape == (N, K) and len(as_on_an_h200.calls) == 1


def test_one_groups_lengths_are_made_once_per_size():
    cpu = torch.device("cpu")
    assert launch._one_group(200, cpu) is launch._one_group(200, cpu)
    assert launch._one_group(200, cpu).tolist() == [200]


@pytest.mark.gpu
def test_under_graph_capture_the_lengths_belong_to_the_graph():
    """A size first met while a CUDA graph is captured is not kept from the graph's memory pool
    for later eager calls; the route runs inside the graph and replays right."""
    M, N, K = 64, 4096, 4096
    g = torch.Generator(device="cuda").manual_seed(1)
    dout = torch.randn(M, N, device="cuda", dtype=BF16, generator=g)
    a = torch.randn(M, K, device="cuda", dtype=BF16, generator=g)
    launch.few_rows_wgrad(dout, a, CFG)  # compiled before the capture
    launch._one_group_kept.cache_clear()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        db = launch.few_rows_wgrad(dout, a, CFG)
    assert launch._one_group_kept.cache_info().currsize == 0
    dout.copy_(torch.randn(M, N, device="cuda", dtype=BF16, generator=g))
    graph.replay()
    ref = dout.double().t() @ a.double()
    assert (db.double() - ref).abs().max().item() <= 1e-2 * ref.abs().amax().item()


@pytest.mark.gpu
def test_a_geometrys_later_calls_launch_directly_and_agree(monkeypatch):
    """The first call of a geometry launches through Triton and keeps a direct runner; a later
    call on other tensors of that geometry runs it, without Triton's launch, and its gradient
    is its own operands' (the output descriptor encoded for the new output)."""
    monkeypatch.setattr(launch, "_FEW_ROWS_RUNNERS", {})
    M, N, K = 64, 4096, 4096
    g = torch.Generator(device="cuda").manual_seed(7)

    def operands():
        return (
            torch.randn(M, N, device="cuda", dtype=BF16, generator=g),
            torch.randn(M, K, device="cuda", dtype=BF16, generator=g),
        )

    launch.few_rows_wgrad(*operands(), CFG)
    (runner,) = launch._FEW_ROWS_RUNNERS.values()
    assert runner, "this Triton's launcher was not taken apart: every call binds"
    rec = LaunchRecorder()
    monkeypatch.setattr(ws, "_grouped_wgrad_ws_kernel", rec)
    for _ in range(2):
        dout, a = operands()
        db = launch.few_rows_wgrad(dout, a, CFG)
        ref = dout.double().t() @ a.double()
        assert (db.double() - ref).abs().max().item() <= 1e-2 * ref.abs().amax().item()
    assert rec.calls == []


@pytest.mark.gpu
@pytest.mark.parametrize("M", [1, 64, 200, 256])
@pytest.mark.parametrize("NK", [(4096, 4096), (14336, 4096), (1536, 7168)], ids=str)
def test_matches_the_fp32_weight_gradient_on_gpu(M, NK, monkeypatch):
    """Through the Linear's autograd: the route's weight gradient within bf16 rounding of the
    exact one (rows not a multiple of 64 included), the input gradient unchanged."""
    N, K = NK
    monkeypatch.setattr(configs, "FEW_ROWS_WGRAD", CFG)
    g = torch.Generator(device="cuda").manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", dtype=BF16, generator=g).requires_grad_()
    w = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).to(BF16).requires_grad_()
    dout = torch.randn(M, N, device="cuda", dtype=BF16, generator=g)
    assert launch.few_rows_wgrad(dout, a.detach()) is not None  # the route takes it
    launch.linear_gemm(a, w).backward(dout)
    ref = dout.double().t() @ a.detach().double()
    tol = 1e-2 * ref.abs().amax().clamp_min(1.0).item()
    assert (w.grad.double() - ref).abs().max().item() <= tol
    ref_da = dout.double() @ w.detach().double()
    assert (a.grad.double() - ref_da).abs().max().item() <= 1e-2 * ref_da.abs().amax().item()


@pytest.mark.parametrize("route,gluon", [(True, True), (True, False), (False, True)])
def test_the_census_records_the_route_as_a_gpu_takes_it(monkeypatch, route, gluon):
    """The dense census sees the backward's weight gradient on the Gluon kernel where the route
    is set and the operands qualify (or, ``gluon=False``, its Triton fallback, the launches the
    same-code check compiles)."""
    from kernel_ratchet.harness.adapter import Shape
    from kernel_ratchet.kernels.gemm import census

    monkeypatch.setattr(configs, "FEW_ROWS_WGRAD", CFG if route else None)
    a, b, d = census.inputs(Shape("s", 256, 14336, 4096), BF16, "cpu")
    c = census.census_call(census.linear_paths(a, b, d)["16bit.bwd"], dry=True, gluon=gluon)
    taken = route and gluon
    wgrad = [x for x in c.gluon() if x.kernel == "_grouped_wgrad_ws_kernel"]
    assert len(wgrad) == taken and len(c.launches) == 2
    assert gluon or not c.gluon()  # without the Gluon kernels, both GEMMs on Triton's
    if taken:
        (x,) = wgrad
        assert x.ctas == 132 and dict(x.constexprs)["BLOCK_K"] == 256
