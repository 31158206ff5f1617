"""The dense GEMM's host path on repeated calls: the compiled kernel launched through its C
launcher (:mod:`.fast_launch`), the global scratch kept per stream (:mod:`.launch_scratch`) and
repeated geometries launched from their first call's decisions (:mod:`.quick_path`). Fake
compiled kernels stand in for Triton's here; ``tests/kernels/test_gemm_gpu.py`` runs the real
ones on the GPU."""

from __future__ import annotations

import pytest
import torch
from triton import knobs

from kernel_ratchet.kernels.gemm import fast_launch, launch, launch_scratch, quick_path
from kernel_ratchet.kernels.gemm.configs import GemmConfig


class FakeLauncher:
    """Triton's CudaLauncher as :class:`.fast_launch.Direct` reads it."""

    def __init__(self, scratch: int = 0, profile: int = 0, align: int = 128):
        self.calls: list[tuple] = []
        self.global_scratch_size, self.global_scratch_align = scratch, align
        self.profile_scratch_size, self.num_ctas = profile, 1
        self.launch_cooperative_grid, self.launch_pdl = False, False

    def launch(self, *args):
        self.calls.append(args)


class FakeKernel:
    """A compiled kernel: its launcher, handle, packed metadata and Triton's own runner."""

    def __init__(self, run: FakeLauncher):
        self.run, self.function, self.packed_metadata = run, "fn-handle", (4, 1, 0)
        self.own: list[tuple] = []

    def __getitem__(self, grid):
        return lambda *args: self.own.append((grid, args))


@pytest.fixture
def device_stream(monkeypatch):
    """Stream 77 of device 0, not capturing, scratch buffers made on the CPU."""
    state = {"stream": 77, "capturing": False}
    monkeypatch.setattr(launch_scratch, "current", lambda: (0, state["stream"]))
    monkeypatch.setattr(launch_scratch, "_capturing", lambda: state["capturing"])
    monkeypatch.setattr(launch_scratch, "_new", lambda n, d: torch.empty(n, dtype=torch.int8))
    monkeypatch.setattr(launch_scratch, "_KEPT", {})
    return state


def test_direct_passes_triton_launchers_arguments_in_its_order(device_stream):
    run = FakeLauncher()
    direct = fast_launch.Direct(FakeKernel(run), ("a", "b", "c", 5, 6, "K"), 3)
    direct(12, ("x", "y", "z"))
    assert run.calls == [
        (12, 1, 1, 77, "fn-handle", False, False, None, None, (4, 1, 0), None, None, None,
         "x", "y", "z", 5, 6, "K")
    ]  # fmt: skip


def test_scratch_is_kept_per_stream_and_grown_and_fresh_under_capture(device_stream):
    run = FakeLauncher(scratch=256)
    direct = fast_launch.Direct(FakeKernel(run), ("t", 1), 1)
    direct(4, ("t",))
    direct(2, ("t",))
    first, second = run.calls[0][7], run.calls[1][7]
    assert first is second and first.numel() >= 4 * 256
    direct(40, ("t",))  # a larger grid: a larger buffer
    assert run.calls[2][7].numel() >= 40 * 256 and run.calls[2][7] is not first
    device_stream["stream"] = 78  # another stream: its own buffer
    direct(4, ("t",))
    assert run.calls[3][7] is not run.calls[2][7]
    device_stream["capturing"] = True  # a graph's launches: a new buffer each, none kept
    direct(4, ("t",))
    direct(4, ("t",))
    assert run.calls[4][7] is not run.calls[5][7]
    assert all(run.calls[i][7] is not run.calls[3][7] for i in (4, 5))


def test_an_installed_launch_hook_gets_tritons_own_launch(device_stream):
    run = FakeLauncher(scratch=128)
    kernel = FakeKernel(run)
    direct = fast_launch.Direct(kernel, ("t", 9), 1)
    hook = lambda metadata: None  # noqa: E731 - a profiler's hook
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        direct(3, ("u",))
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert kernel.own == [((3, 1, 1), ("u", 9))] and not run.calls
    direct(3, ("u",))
    assert len(run.calls) == 1


@pytest.mark.parametrize("launcher", [FakeLauncher(profile=64), FakeLauncher(align=1024)])
def test_kernels_the_direct_launch_cannot_serve_keep_tritons(launcher):
    with pytest.raises(TypeError):
        fast_launch.Direct(FakeKernel(launcher), ("t",), 1)


def test_a_triton_whose_internals_differ_keeps_fn_grid_on_every_call():
    launched = []

    class Jit:  # no device_caches: the binder cannot be found
        def __getitem__(self, grid):
            return lambda *args, **kw: launched.append(grid) or object()

    runners: dict = {}
    t = torch.zeros(4)
    for _ in range(3):
        fast_launch.launch(Jit(), runners, (5,), (t, 1), {}, 1)
    assert launched == [(5,)] * 3 and list(runners.values()) == [False]


@pytest.fixture
def quick_calls(monkeypatch):
    """matmul on the compiled path (interpreter off), its launches recorded by a fake that
    binds a recording runner per plan and operand signature, as fast_launch does."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    quick_path.forget()
    log: list[tuple] = []

    def fake_launch(fn, runners, grid, args, kwargs, tensors):
        log.append(("full", grid[0], args[5:8]))
        key = fast_launch.signature(args[:tensors])
        runners.setdefault(key, lambda g, ts: log.append(("quick", g, ts)))

    monkeypatch.setattr(launch.fast_launch, "launch", fake_launch)
    launch._plan.cache_clear()
    yield log
    launch._plan.cache_clear()
    quick_path.forget()


def _pair(M, N, K, dtype=torch.float16, offset=0):
    a = torch.randn(M * K + offset, dtype=dtype)[offset:].view(M, K)
    return a, torch.randn(N, K, dtype=dtype)


def test_a_repeated_geometry_is_launched_from_its_first_calls_decisions(quick_calls):
    a, b = _pair(64, 96, 128)
    out = launch.matmul(a, b)
    assert [e[0] for e in quick_calls] == ["full"] and quick_calls[0][2] == (64, 96, 128)
    a2, b2 = _pair(64, 96, 128)  # new operands of the same geometry
    out2 = launch.matmul(a2, b2)
    kind, grid, tensors = quick_calls[1]
    assert kind == "quick" and grid == quick_calls[0][1]
    assert tensors[0] is a2 and tensors[1] is b2 and tensors[2] is out2
    assert tensors[3] is out2 and tensors[4] is out2
    assert out2.shape == out.shape == (64, 96) and out2.dtype == torch.float16


@pytest.mark.parametrize(
    "other",
    [
        lambda: _pair(64, 96, 128, offset=1),  # 2-byte aligned: not TMA-readable
        lambda: _pair(64, 96, 120),  # another K
        lambda: _pair(64, 96, 128, torch.bfloat16),  # another dtype
        lambda: (torch.randn(128, 64, dtype=torch.float16).t(), _pair(64, 96, 128)[1]),
    ],
    ids=["alignment", "shape", "dtype", "strides"],
)
def test_a_call_differing_in_what_the_plan_reads_takes_the_full_path(quick_calls, other):
    launch.matmul(*_pair(64, 96, 128))
    a, b = other()
    launch.matmul(a, b)
    assert [e[0] for e in quick_calls] == ["full", "full"]


def test_configs_scales_and_split_k_never_take_the_quick_path(quick_calls):
    a, b = _pair(64, 96, 128)
    cfg = GemmConfig(32, 32, 32, num_warps=4, num_stages=2)
    for _ in range(2):
        launch.matmul(a, b, config=cfg)
        with launch.forced_config(cfg):
            launch.matmul(a, b)
    split = GemmConfig(32, 32, 32, num_warps=4, num_stages=2, split_k=2)
    for _ in range(2):
        launch.matmul(a, b, config=split)
    assert [e[0] for e in quick_calls] == ["full"] * 6 and not quick_path._QUICK


def test_the_table_starts_over_at_its_limit(quick_calls, monkeypatch):
    monkeypatch.setattr(quick_path, "LIMIT", 3)
    for k in (16, 32, 48, 64):
        launch.matmul(*_pair(8, 16, k))
    assert len(quick_path._QUICK) == 1


def test_a_split_k_geometry_is_launched_from_its_first_calls_decisions(quick_calls, monkeypatch):
    """A bucket that splits K (one output tile over a long K on a GPU of 132 SMs) keeps a quick
    entry too: later calls launch on the first call's grid into a new output, with the slots
    and counts kept for the stream, and return the output itself."""
    monkeypatch.setattr(launch, "_num_sms", lambda device: 132)
    M, N, K = 128, 128, 16384
    geom = (K, True, True, K, True, True)
    plan = launch._plan("bf16", None, M, N, K, geom, 0, 132, False, 0, torch.float16, False)
    assert plan.split_k > 1
    launch.matmul(*_pair(M, N, K))
    a, b = _pair(M, N, K)
    out = launch.matmul(a, b)
    assert [e[0] for e in quick_calls] == ["full", "quick"]
    _, grid, tensors = quick_calls[1]
    assert grid == quick_calls[0][1] and tensors[0] is a and tensors[1] is b
    slots, counts = launch_scratch.split_slots(a.device, *plan.slots)
    assert tensors[2] is out and out.dtype == torch.float16 and out.shape == (M, N)
    assert tensors[3] is slots and tensors[4] is counts
    assert slots.dtype == torch.float32 and slots.numel() >= plan.slots[0] * plan.slots[1]
    assert counts.dtype == torch.int32 and counts.numel() >= plan.slots[0]
