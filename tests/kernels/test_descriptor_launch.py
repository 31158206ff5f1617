"""Direct launches of a Gluon kernel with TMA operands (:mod:`.descriptor_launch`): Triton's
launcher wrapper is read for its C launcher and descriptor metadata, each operand's descriptor
is encoded once per address, shape and strides, pointers pass as they are. Fake compiled
kernels and a recording encoder stand in for Triton's here; the GPU tests of the launchers
that use it run the real ones."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import triton
from triton import knobs
from triton.backends.nvidia.driver import wrap_handle_tensordesc

from kernel_ratchet.kernels.gemm import descriptor_launch as dl
from kernel_ratchet.kernels.gemm import fast_launch
from tests.kernels.test_gemm_fast_launch import FakeKernel, FakeLauncher, device_stream  # noqa: F401 - a fixture used below

_META = {"swizzle": 3, "elem_size": 2, "elem_type": 9, "block_size": [64, 64], "fp4_padded": False}
_DESC = "tensordesc<bf16[64, 64],x>"


def _wrapped(run: FakeLauncher, signature: list[str], metas: list[dict]) -> FakeLauncher:
    """``run`` whose launch is Triton's wrapper over its recording launch, as a CudaLauncher
    of a kernel with that signature holds it."""
    run.launch = wrap_handle_tensordesc(run.launch, dict(enumerate(signature)), metas)
    return run


@pytest.fixture
def fills(monkeypatch, request):
    """Triton's descriptor encoder replaced by one that records and numbers its encodings
    (stream 77 of device 0, scratch buffers on the CPU: ``device_stream``)."""
    request.getfixturevalue("device_stream")
    calls: list[tuple] = []

    def fill(*args):
        calls.append(args)
        return f"map{len(calls)}"

    active = SimpleNamespace(utils=SimpleNamespace(fill_tma_descriptor=fill))
    fake = SimpleNamespace(
        runtime=SimpleNamespace(driver=SimpleNamespace(active=active)),
        set_allocator=triton.set_allocator,
    )
    monkeypatch.setattr(dl, "triton", fake)
    return calls


def _runner(run: FakeLauncher, bound: tuple, tensors: int) -> dl.Runner:
    direct = fast_launch.Direct(FakeKernel(run), bound, tensors)
    raw, encoders = dl._descriptor_launch(run.launch, tensors)
    direct.c_launch = raw
    return dl.Runner(direct, encoders)


def test_descriptors_are_encoded_once_per_address_shape_and_strides(fills):
    run = _wrapped(FakeLauncher(), [_DESC, "*fp32", _DESC, "i32"], [_META, _META])
    runner = _runner(run, ("a-desc", "ptr", "c-desc", 7), 3)
    x, scales, y = torch.zeros(4, 8), torch.zeros(3), torch.zeros(2, 8)
    runner(3, (x, scales, y))
    runner(3, (x, scales, y))  # same tensors: both encodings kept
    z = x[1:3]  # another address with y's shape and strides: encoded
    runner(3, (x, scales, z))
    passed = [c[13:] for c in run.calls]  # after the C launcher's 13 fixed arguments
    assert passed[0] == ("map1", 4, 8, 8, 1, scales, "map2", 2, 8, 8, 1, 7)
    assert passed[1] == passed[0] and passed[2][6] == "map3" and len(fills) == 3
    host_bf16 = 8  # Triton's host enum of the device's bf16 (9)
    assert fills[0] == (x.data_ptr(), 3, 2, host_bf16, [64, 64], (4, 8), (8, 1), 0)
    assert fills[2][0] == z.data_ptr()


def test_kept_encodings_start_over_at_their_limit(fills, monkeypatch):
    monkeypatch.setattr(dl, "KEPT", 2)
    runner = _runner(_wrapped(FakeLauncher(), [_DESC], [_META]), ("desc",), 1)
    base = torch.zeros(16, 8)
    for i in range(3):
        runner(1, (base[i : i + 2],))
    assert len(runner.encoders[0].kept) == 1 and len(fills) == 3


@pytest.mark.parametrize(
    ("signature", "metas", "tensors"),
    [
        (["*fp32", "i32"], [], 1),  # no descriptor: the C launcher itself, not the wrapper
        (["*fp32", _DESC], [_META], 1),  # a descriptor past the call's tensors
        ([_DESC], [{**_META, "fp4_padded": True}], 1),
        ([_DESC], [None], 1),  # lowered without TMA: pointer, shape and strides
    ],
    ids=["no-descriptor", "outside", "fp4-padded", "not-tma"],
)
def test_launches_it_cannot_encode_keep_tritons(signature, metas, tensors):
    run = FakeLauncher()
    if metas:
        _wrapped(run, signature, metas)
    with pytest.raises(TypeError):
        dl._descriptor_launch(run.launch, tensors)


def test_a_hook_gets_descriptor_stand_ins_and_pointers_as_they_are(fills):
    run = _wrapped(FakeLauncher(), [_DESC, "*fp32"], [_META])
    runner = _runner(run, ("desc", "ptr", 5), 2)
    hook = lambda metadata: None  # noqa: E731 - a profiler's hook
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        x, s = torch.zeros(4, 8), torch.zeros(3)
        runner(2, (x, s))
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    ((grid, (operand, ptr, tail)),) = runner.direct.kernel.own
    assert grid == (2, 1, 1) and ptr is s and tail == 5 and not run.calls and not fills
    assert (operand.base, operand.strides, operand.padding) == (x, (8, 1), "zero")


def test_the_first_call_of_a_key_goes_through_triton_and_later_ones_direct(fills, monkeypatch):
    run = _wrapped(FakeLauncher(), [_DESC, "*fp32", "i32"], [_META])
    kernel = FakeKernel(run)
    built: list = []

    class Jit:  # Triton's JIT function: its launch returns the compiled kernel
        def __getitem__(self, grid):
            return lambda *args, **kw: built.append((grid, args, kw)) or kernel

    monkeypatch.setattr(dl, "described", lambda t, b: ("desc-of", t) if b else t)
    monkeypatch.setattr(
        fast_launch, "_bound", lambda fn, k, args, kw, n: fast_launch.Direct(k, args, n)
    )
    runners: dict = {}
    x, s = torch.zeros(4, 8), torch.zeros(3)
    for _ in range(3):
        dl.launch(Jit(), runners, (6,), (x, s), [("block", "layout"), None], (9,), {"C": 1}, "k")
    assert len(built) == 1 and built[0][1] == (("desc-of", x), s, 9) and built[0][2] == {"C": 1}
    assert [c[13:] for c in run.calls] == [("map1", 4, 8, 8, 1, s, 9)] * 2
    for _ in range(2):  # no table: Triton's launch every call
        dl.launch(Jit(), None, (6,), (x, s), [("block", "layout"), None], (9,), {"C": 1}, "k")
    assert len(built) == 3 and len(run.calls) == 2


def test_the_runner_table_starts_over_at_its_limit(fills, monkeypatch):
    monkeypatch.setattr(dl, "RUNNERS", 2)
    monkeypatch.setattr(dl, "_runner", lambda *a: False)  # a Triton the runner cannot bind

    class Jit:
        def __getitem__(self, grid):
            return lambda *args, **kw: None

    runners: dict = {}
    for key in range(3):
        dl.launch(Jit(), runners, (1,), (torch.zeros(1),), [None], (), {}, key)
    assert runners == {2: False}
