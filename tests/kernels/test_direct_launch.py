"""The direct launcher: a call signature is bound once, later calls carry only their tensors.

The CPU tests drive :class:`DirectLauncher` with a stand-in for a Triton JIT function (what it
binds, which calls go the ordinary way); the GPU test launches a real Triton kernel through it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernel_ratchet.kernels import direct_launch
from kernel_ratchet.kernels.direct_launch import DirectLauncher


class _Compiled:
    """A compiled kernel's runner: records ``(grid, vals)`` per launch."""

    def __init__(self) -> None:
        self.launches: list[tuple[tuple[int, ...], tuple[Any, ...]]] = []

    def __getitem__(self, grid: tuple[int, ...]):
        return lambda *vals: self.launches.append((grid, vals))


class _Jit:
    """A JIT function of ``(x, y, n, scale, BLOCK)``: ``fn[grid](...)`` is the ordinary launch."""

    arg_names = ["x", "y", "n", "scale", "BLOCK"]

    def __init__(self, bind_fails: bool = False) -> None:
        self.ordinary: list[tuple[Any, ...]] = []
        self.compiled = _Compiled()
        self.bind_fails = bind_fails
        self.pre_run_hooks: list[Any] = []
        self.device_caches = {0: (None, None, None, None, self._binder)}

    def __getitem__(self, grid: tuple[int, ...]):
        def run(*args: Any, **kwargs: Any) -> _Compiled:
            self.ordinary.append((grid, args, kwargs))
            return self.compiled

        return run

    def _binder(self, x, y, n, scale, BLOCK, **options):  # noqa: N803 - a constexpr's name
        if self.bind_fails:
            raise AttributeError("no binder in this Triton")
        return {"x": x, "y": y, "n": n, "scale": scale, "BLOCK": BLOCK}, [], options


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a GPU: not the interpreter, device 0."""
    monkeypatch.setattr(direct_launch, "interpreter_mode", lambda: False)
    monkeypatch.setattr(direct_launch, "current_device", lambda: 0)


def _call(launch: DirectLauncher, x, y, n=64, scale=1.0, grid=(4,)):
    launch(grid, (x, y, n), {"scale": scale, "BLOCK": 32, "num_warps": 4})


def test_second_call_goes_direct_with_its_own_tensors(on_gpu: None) -> None:
    fn = _Jit()
    launch = DirectLauncher(fn)
    x1, y1, x2, y2 = (torch.zeros(64) for _ in range(4))
    _call(launch, x1, y1, scale=1.0)
    _call(launch, x2, y2, scale=2.5, grid=(7, 2))
    assert len(fn.ordinary) == 1 and launch.hits == 1
    (grid, vals) = fn.compiled.launches[0]
    assert grid == (7, 2, 1)
    assert vals[0] is x2 and vals[1] is y2 and vals[2] == 64 and vals[3] == 2.5 and vals[4] == 32


@pytest.mark.parametrize(
    "change",
    ["n", "dtype", "misaligned", "constexpr"],
)
def test_a_different_specialization_goes_the_ordinary_way(on_gpu: None, change: str) -> None:
    fn = _Jit()
    launch = DirectLauncher(fn)
    x, y = torch.zeros(64), torch.zeros(64)
    _call(launch, x, y)
    if change == "n":
        _call(launch, x, y, n=48)
    elif change == "dtype":
        _call(launch, x.double(), y)
    elif change == "misaligned":
        _call(launch, torch.zeros(65)[1:], y)  # 4 bytes off a 16-byte boundary
    else:
        launch((4,), (x, y, 64), {"scale": 1.0, "BLOCK": 64, "num_warps": 4})
    assert len(fn.ordinary) == 2 and launch.hits == 0


def test_unknown_arguments_hooks_and_the_interpreter_go_the_ordinary_way(
    on_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fn = _Jit()
    launch = DirectLauncher(fn)
    x, y = torch.zeros(64), torch.zeros(64)
    for _ in range(2):
        launch((4,), (x, y, [64]), {"scale": 1.0, "BLOCK": 32})  # a list: not keyed
    fn.pre_run_hooks.append(lambda *a, **k: None)
    for _ in range(2):
        _call(launch, x, y)
    fn.pre_run_hooks.clear()
    monkeypatch.setattr(direct_launch, "interpreter_mode", lambda: True)
    for _ in range(2):
        _call(launch, x, y)
    assert len(fn.ordinary) == 6 and launch.hits == 0


def test_triton_debug_mode_is_a_call_signature_of_its_own(
    on_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triton import knobs

    fn = _Jit()
    launch = DirectLauncher(fn)
    x, y = torch.zeros(64), torch.zeros(64)
    _call(launch, x, y)
    monkeypatch.setattr(knobs.runtime, "debug", not knobs.runtime.debug)
    _call(launch, x, y)
    _call(launch, x, y)
    assert len(fn.ordinary) == 2 and launch.hits == 1


def test_a_call_it_cannot_bind_keeps_launching_the_ordinary_way(on_gpu: None) -> None:
    fn = _Jit(bind_fails=True)
    launch = DirectLauncher(fn)
    x, y = torch.zeros(64), torch.zeros(64)
    for _ in range(3):
        _call(launch, x, y)
    assert len(fn.ordinary) == 3 and launch.hits == 0 and not fn.compiled.launches


def test_a_full_cache_starts_over(on_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct_launch, "MAX_ENTRIES", 2)
    fn = _Jit()
    launch = DirectLauncher(fn)
    x, y = torch.zeros(64), torch.zeros(64)
    for n in (16, 32, 48, 48):
        _call(launch, x, y, n=n)
    assert len(fn.ordinary) == 3 and launch.hits == 1 and len(launch._cache) == 1


@pytest.mark.gpu
def test_a_real_kernel_through_the_direct_launcher() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    import triton
    import triton.language as tl

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):  # noqa: N803
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)

    launch = DirectLauncher(axpy)
    for n, offset, alpha in [(1000, 0, 2.0), (1000, 0, -3.0), (1000, 1, 0.5), (1000, 1, 4.0)]:
        x = torch.randn(n + offset, device="cuda")[offset:]
        y = torch.randn(n, device="cuda")
        out = torch.empty(n + offset, device="cuda")[offset:]
        launch((triton.cdiv(n, 256),), (x, y, out, n, alpha), {"BLOCK": 256})
        torch.testing.assert_close(out, alpha * x + y)
    assert launch.hits == 2  # the second call of each alignment
