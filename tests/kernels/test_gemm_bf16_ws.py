"""The warp-specialized 16-bit GEMM (Gluon, sm_90): offline compiles and routing on any machine,
results on the GPU against torch's product (``pytest -m gpu``)."""

from __future__ import annotations

import re

import pytest
import torch

from kernel_ratchet.kernels.gemm import bf16_ws_launch as ws16
from kernel_ratchet.kernels.gemm import configs, launch
from kernel_ratchet.kernels.gemm.configs import CONFIGS, GemmConfig
from kernel_ratchet.kernels.offline import SM90_SHARED_BYTES
from tests.kernels.ws_helpers import assert_unspilled_and_pipelined, compiled_in_a_fresh_process

LAUNCHER = "kernel_ratchet.kernels.gemm.bf16_ws_launch"
TILE = GemmConfig(128, 256, 64, num_stages=3, group_m=8)


def _shipped() -> list[tuple[str, GemmConfig]]:
    return [(kind, c) for kind, buckets in configs.WS16_CONFIGS.items() for c in buckets.values()]


def test_every_shipped_entry_is_a_launch_the_kernel_takes():
    """An entry the kernel would refuse (tile, stages) fails at launch: caught here instead."""
    assert _shipped()  # the large bucket's forward and dgrad ship on the WS kernel
    for kind, cfg in _shipped():
        assert kind in ("bf16", "bf16_bwd") and cfg.block_m == 2 * ws16.ROWS, (kind, cfg)
        ws16.check_config(cfg.block_n, cfg.block_k, cfg.num_stages)


@pytest.mark.slow
def test_every_shipped_entry_compiles_for_sm90_unspilled_and_pipelined():
    """The consumers' accumulator chain keeps one wgmma in flight: ptxas must neither spill
    (232 registers a consumer thread) nor serialize it, and the ring must fit an SM."""
    calls = [
        dict(block_n=c.block_n, block_k=c.block_k, stages=c.num_stages, group_m=c.group_m,
             b_kmajor=kind == "bf16")
        for kind, c in _shipped()
    ]  # fmt: skip
    for call, res in zip(calls, compiled_in_a_fresh_process(LAUNCHER, calls), strict=True):
        assert_unspilled_and_pipelined(res, call)
        assert res.shared_bytes >= ws16.smem_bytes(call["block_n"], call["block_k"], call["stages"])


@pytest.mark.slow
@pytest.mark.parametrize("b_kmajor", [True, False], ids=["fwd", "dgrad"])
def test_the_128_by_128_tile_with_six_stages_compiles_unspilled_and_pipelined(b_kmajor):
    """The medium outputs' candidate (it fills more SMs than 128 x 256 tiles)."""
    (res,) = compiled_in_a_fresh_process(LAUNCHER, [dict(block_n=128, stages=6, b_kmajor=b_kmajor)])
    assert_unspilled_and_pipelined(res)


@pytest.mark.parametrize(
    "kw",
    [
        dict(block_n=96),
        dict(block_n=192),  # a wgmma width, but not a power of two: does not compile
        dict(block_k=48),
        dict(stages=1),
        dict(block_n=256, stages=4),
    ],
    ids=["block_n", "block_n-192", "block_k", "one-stage", "too-many-stages"],
)
def test_a_config_the_kernel_does_not_take_is_refused_with_what_to_do(kw):
    args = dict(block_n=128, block_k=64, stages=4) | kw
    with pytest.raises(ValueError, match="use fewer|must be|at least 2 stages"):
        ws16.check_config(**args)


@pytest.mark.slow
def test_every_tile_the_config_check_takes_compiles_for_sm90():
    """The check and the kernel agree: each block_n and block_k it accepts (at the fewest
    stages that fit) compiles offline, unspilled, in both operand layouts."""
    calls = []
    for block_n in (32, 64, 96, 128, 192, 256):
        for block_k in (16, 32, 64, 128):
            try:
                ws16.check_config(block_n, block_k, 2)
            except ValueError:
                continue
            calls += [dict(block_n=block_n, block_k=block_k, stages=2, b_kmajor=kmaj)
                      for kmaj in (True, False)]  # fmt: skip
    assert {(c["block_n"], c["block_k"]) for c in calls} >= {(64, 64), (128, 64), (256, 64)}
    for call, res in zip(calls, compiled_in_a_fresh_process(LAUNCHER, calls), strict=True):
        assert res.fits() and res.spill_bytes == 0, (call, res.line())


def test_shared_memory_of_a_config_counts_the_ring_and_the_output_staging():
    assert ws16.smem_bytes(128, 64, 4) == 4 * (128 + 128) * 64 * 2 + 2 * 64 * 128 * 2
    ws16.check_config(256, 64, 3)  # 208 KiB: fits
    assert ws16.smem_bytes(256, 64, 4) > SM90_SHARED_BYTES


def _plan(**kw):
    args = dict(
        kind="bf16",
        explicit=None,
        M=4096,
        N=6144,
        K=4096,
        geom=(4096, True, True, 4096, True, True),
        interp=False,
        ws16=True,
    )
    args.update(kw)
    return launch._plan(
        args["kind"],
        args["explicit"],
        args["M"],
        args["N"],
        args["K"],
        args["geom"],
        0,
        132,
        args["interp"],
        0,
        torch.bfloat16,
        args["ws16"],
    )


@pytest.fixture
def routed(monkeypatch):
    """The 16-bit kinds' large bucket routed to the WS kernel (the shipped table may be empty)."""
    table = {"bf16": {"large": TILE}, "bf16_bwd": {"large": TILE.with_(num_stages=3)}}
    monkeypatch.setattr(configs, "WS16_CONFIGS", table)
    launch._plan.cache_clear()
    yield table
    launch._plan.cache_clear()


def test_plan_sends_a_large_16_bit_forward_and_dgrad_to_the_ws_kernel(routed):
    assert _plan().ws16 == TILE
    dgrad = _plan(kind="bf16_bwd", geom=(6144, True, True, 4096, True, False))
    assert dgrad.ws16 == routed["bf16_bwd"]["large"]


@pytest.mark.parametrize(
    "change",
    [
        dict(interp=True),
        dict(explicit=CONFIGS["bf16"]["large"]),
        dict(ws16=False),  # not 16-bit of one dtype, or not an sm_90 GPU
        dict(geom=(4096, False, True, 4096, True, True)),  # A not TMA-readable
        dict(geom=(4096, True, False, 4096, True, False)),  # the weight gradient: A M-major
        dict(N=6148),  # output rows of 12296 bytes
        dict(M=1000, N=5120, K=1000),  # the medium bucket: no entry
        dict(kind="fp8"),  # a kind without an entry
    ],
    ids=["interp", "explicit", "off", "a-pointer", "wgrad", "n-off-8", "medium", "kind"],
)
def test_plan_keeps_the_triton_kernel_where_the_ws_kernel_does_not_apply(routed, change):
    plan = _plan(**change)
    assert plan.ws16 is None
    assert plan.kwargs  # a Triton launch


def test_only_one_16_bit_dtype_on_an_sm90_gpu_qualifies():
    a = torch.zeros(8, 8, dtype=torch.bfloat16)
    assert not ws16.supported_dtypes(a, a, torch.bfloat16)  # a CPU tensor
    assert not ws16.supported(a, a, True)


@pytest.mark.parametrize("on", [False, True], ids=["triton-launch", "direct"])
def test_the_direct_switch_decides_whether_a_plans_runners_launch(monkeypatch, on):
    """Off, every call goes through Triton's launch (no runner cache); on, the plan's cache."""
    seen: dict = {}
    monkeypatch.setattr(ws16, "matmul_bf16_ws", lambda a, b, **kw: seen.update(kw))
    monkeypatch.setattr(ws16, "DIRECT", on)
    runners: dict = {}
    ws16.run(None, None, True, TILE, 132, runners)
    assert seen["runners"] is (runners if on else None)
    assert (seen["block_n"], seen["stages"]) == (TILE.block_n, TILE.num_stages)


def test_a_routed_geometry_is_launched_from_its_first_calls_decisions(routed, monkeypatch):
    """A call the plan sends to the warp-specialized kernel leaves a quick-path entry: later
    calls of the geometry launch the plan's direct runner with ``(a, b, c)`` (and whatever
    buffers the kernel takes after them) on the first call's grid, without the plan or the
    launch's checks (recorded on the CPU)."""
    from kernel_ratchet.kernels.gemm import quick_path

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(ws16, "supported_dtypes", lambda a, b, out: True)  # as on an sm_90 GPU
    monkeypatch.setattr(ws16, "DIRECT", True)
    monkeypatch.setattr(ws16.cuda_context, "make_current", lambda device: None)
    monkeypatch.setattr(launch, "_tma_ok", lambda t, st: True)
    log: list[tuple] = []

    def first_call(fn, runners, grid, tensors, blocks, rest, kwargs, key):
        log.append(("full", grid[0], rest))
        runners.setdefault(key, lambda g, ts: log.append(("quick", g, ts)))

    monkeypatch.setattr(ws16.descriptor_launch, "launch", first_call)
    quick_path.forget()
    try:
        M, N, K = 4096, 6144, 4096
        launch.matmul(torch.randn(M, K, dtype=torch.bfloat16), torch.randn(N, K).bfloat16())
        a, b = torch.randn(M, K, dtype=torch.bfloat16), torch.randn(N, K, dtype=torch.bfloat16)
        out = launch.matmul(a, b)
        assert len(quick_path._QUICK) == 1
    finally:
        quick_path.forget()
    grid = ws16.grid_size(M, N, TILE.block_n, launch._num_sms(a.device))
    assert log[0][:2] == ("full", grid) and log[0][2][:3] == (M, N, K)
    kind, grid, tensors = log[1]
    assert (kind, grid) == ("quick", log[0][1]) and len(log) == 2
    assert tensors[0] is a and tensors[1] is b and tensors[2] is out


_SHAPES = [
    (128, 128, 64),
    (300, 264, 1000),
    (1000, 5120, 1000),
    (4097, 3000, 2000),
    (4096, 6144, 4096),
]


@pytest.mark.gpu
@pytest.mark.parametrize("mnk", _SHAPES, ids=lambda s: "m{}.n{}.k{}".format(*s))
@pytest.mark.parametrize("b_kmajor", [True, False], ids=["fwd", "dgrad"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("block_n,stages", [(128, 4), (256, 3)], ids=["n128", "n256"])
def test_matches_torch_on_gpu(mnk, b_kmajor, dtype, block_n, stages):
    M, N, K = mnk
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    a = torch.randn(M, K, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(*((N, K) if b_kmajor else (K, N)), device="cuda", dtype=dtype, generator=g)
    assert ws16.supported(a, b, b_kmajor)
    out = ws16.matmul_bf16_ws(a, b, b_kmajor=b_kmajor, block_n=block_n, stages=stages)
    ref = a.float() @ (b.float().t() if b_kmajor else b.float())
    assert out.dtype == dtype and out.shape == (M, N)
    err = (out.float() - ref).norm() / ref.norm()
    assert err < 5e-3, f"relative error {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("mnk", [(4097, 3000, 2000), (4096, 6144, 4096)], ids=str)
def test_the_linear_routed_to_the_ws_kernel_matches_torch_on_gpu(routed, mnk):
    """Forward and both gradients through the launcher with the large bucket routed: the
    forward and dgrad run the WS kernel, the weight gradient the Triton kernel."""
    M, N, K = mnk
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
    dout = torch.randn(M, N, device="cuda", dtype=torch.bfloat16, generator=g)
    geom = (K, True, True, K, True, True)
    assert _plan(M=M, N=N, K=K, geom=geom).ws16 is not None
    out = launch.linear_gemm(a, b)
    out.backward(dout)
    a32, b32, d32 = a.detach().float(), b.detach().float(), dout.float()
    for got, ref in ((out, a32 @ b32.t()), (a.grad, d32 @ b32), (b.grad, d32.t() @ a32)):
        err = (got.float() - ref).norm() / ref.norm()
        assert err < 5e-3, f"relative error {err:.2e}"


@pytest.fixture
def direct(routed, monkeypatch):
    """The routed launches of a geometry after its first go through the direct runner."""
    monkeypatch.setattr(ws16, "DIRECT", True)
    return routed


@pytest.mark.gpu
@pytest.mark.parametrize("b_kmajor", [True, False], ids=["fwd", "dgrad"])
def test_direct_launches_of_one_geometry_compute_each_calls_product_on_gpu(
    direct, b_kmajor, monkeypatch
):
    """The second and later calls of a geometry skip Triton's argument binding (they launch
    through the compiled kernel's C launcher with the call's own descriptors) and compute each
    call's product, not the first call's. N = 3072 keeps the N-major operand's rows an even
    multiple of 16 bytes, so both layouts take the warp-specialized path."""
    M, N, K = 4097, 3072, 2000
    kind = "bf16" if b_kmajor else "bf16_bwd"
    shape_b = (N, K) if b_kmajor else (K, N)
    geom = (K, True, True, N if not b_kmajor else K, True, b_kmajor)
    assert _plan(kind=kind, M=M, N=N, K=K, geom=geom).ws16 is not None
    bound = []
    kernel = ws16._bf16_ws_kernel
    monkeypatch.setattr(
        kernel, "run", lambda *a, _run=kernel.run, **kw: bound.append(1) or _run(*a, **kw)
    )
    for seed in range(3):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(*shape_b, device="cuda", dtype=torch.bfloat16, generator=g)
        out = launch.matmul(a, b, b_kmajor=b_kmajor, kind=kind)
        ref = a.float() @ (b.float().t() if b_kmajor else b.float())
        assert ((out.float() - ref).norm() / ref.norm()) < 5e-3
    assert len(bound) <= 1, f"{len(bound)} of 3 calls bound their arguments through Triton"


@pytest.mark.gpu
@pytest.mark.parametrize("b_kmajor", [True, False], ids=["fwd", "dgrad"])
def test_repeated_routed_calls_compute_each_calls_product_wherever_it_lives_on_gpu(
    direct, b_kmajor
):
    """Later calls of one routed geometry, whatever the launcher keeps from the first: new
    values at the same addresses, the same values at new addresses (a view into a larger
    buffer), and fresh tensors, each call's own product."""
    M, N, K = 4097, 3000, 2000
    kind = "bf16" if b_kmajor else "bf16_bwd"
    shape_b = (N, K) if b_kmajor else (K, N)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(*shape_b, device="cuda", dtype=torch.bfloat16)
    big = torch.randn(M + 8, K, device="cuda", dtype=torch.bfloat16)

    def check(a, b):
        out = launch.matmul(a, b, b_kmajor=b_kmajor, kind=kind)
        ref = a.float() @ (b.float().t() if b_kmajor else b.float())
        assert ((out.float() - ref).norm() / ref.norm()) < 5e-3

    check(a, b)
    check(a, b)
    a.copy_(torch.randn_like(a))  # same address, new values
    b.mul_(-0.5)
    check(a, b)
    check(big[8:], b)  # another address, same shape and strides
    check(torch.randn_like(a), torch.randn_like(b))


@pytest.mark.gpu
def test_direct_launches_replay_in_a_cuda_graph_on_new_values_on_gpu(direct):
    M, N, K = 4096, 6144, 4096
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    launch.gemm(a, b)
    launch.gemm(a, b)  # the direct runner exists before the capture
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = launch.gemm(a, b)
    a.copy_(torch.randn_like(a))
    graph.replay()
    torch.cuda.synchronize()
    ref = a.float() @ b.float().t()
    assert ((out.float() - ref).norm() / ref.norm()) < 5e-3


@pytest.mark.parametrize("b_kmajor", [True, False], ids=["fwd", "dgrad"])
def test_an_empty_contraction_or_output_launches_nothing(b_kmajor):
    """K = 0 is a sum of nothing (zeros); M or N = 0 an empty output: no descriptor is built
    (a TMA descriptor takes no empty dimension) and no GPU is needed."""
    b = torch.ones(*((8, 0) if b_kmajor else (0, 8)), dtype=torch.bfloat16)
    out = ws16.matmul_bf16_ws(torch.ones(4, 0, dtype=torch.bfloat16), b, b_kmajor=b_kmajor)
    assert out.shape == (4, 8) and not out.any()
    rows = torch.ones(0, 16, dtype=torch.bfloat16)
    assert ws16.matmul_bf16_ws(rows, torch.ones(8, 16, dtype=torch.bfloat16)).shape == (0, 8)


def test_a_launch_passes_every_argument_the_kernel_takes_as_the_offline_compile_does(
    monkeypatch,
):
    """Recorded on the CPU: the grid (at most one program per SM); one positional argument per
    runtime parameter of the kernel, in the order the offline compile types them, with the
    sizes where the kernel takes them; and the constexprs and options of the offline compile
    of that config (its program count aside)."""
    from kernel_ratchet.kernels.gemm.bf16_ws import _bf16_ws_kernel
    from tests.kernels.ws_helpers import LaunchRecorder

    compiled: dict = {}

    def record_compile(fn, sig, consts, aligned, opts, arch):
        compiled.update(fn=fn, sig=sig, consts=consts, opts=opts, arch=arch)

    monkeypatch.setattr(ws16, "compile_gluon", record_compile)
    ws16.compile_offline(block_n=256, stages=3, group_m=8, b_kmajor=False)
    rec = LaunchRecorder()
    monkeypatch.setattr(ws16, "_bf16_ws_kernel", rec)
    M, N, K = 384, 512, 640
    a, b = torch.zeros(M, K, dtype=torch.bfloat16), torch.zeros(K, N, dtype=torch.bfloat16)
    out = ws16.matmul_bf16_ws(a, b, b_kmajor=False, block_n=256, stages=3, num_sms=4)
    assert out.shape == (M, N) and out.dtype == torch.bfloat16
    ((grid, args, kw),) = rec.calls
    assert grid == (4,)  # min(SMs, 3 x 2 tiles of 128 x 256)
    params = _bf16_ws_kernel.params
    runtime = [p.name for p in params if not p.is_constexpr]
    assert compiled["fn"] is _bf16_ws_kernel and list(compiled["sig"]) == runtime
    assert len(args) == len(runtime)
    assert [args[runtime.index(n)] for n in "MNK"] == [M, N, K]
    # a host-side descriptor's block is the one the offline compile types it with
    blocks = {
        name: [int(d) for d in re.search(r"\[([\d, ]+)\]", t)[1].split(",")]
        for name, t in compiled["sig"].items()
        if t.startswith("tensordesc")
    }
    assert {n: args[runtime.index(n)].block_shape for n in blocks} == blocks
    if blocks:  # A's 64-row blocks, B's and C's 256 columns (B N-major: 64 k-rows)
        assert list(blocks.values()) == [[64, 64], [64, 256], [64, 256]]
    consts = {k: v for k, v in kw.items() if k not in ws16.OPTIONS}
    assert set(consts) == {p.name for p in params if p.is_constexpr}
    assert consts["NUM_SMS"] == 4 and compiled["consts"]["NUM_SMS"] == 132
    assert {**consts, "NUM_SMS": 132} == compiled["consts"]
    assert {k: kw[k] for k in ws16.OPTIONS} == compiled["opts"] == ws16.OPTIONS
