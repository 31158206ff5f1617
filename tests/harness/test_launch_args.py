"""The launch recording keeps each launch's scalar arguments, so a round can say which changed
kernel lines no measured launch reached."""

import json

import pytest
import torch

from kernel_ratchet.harness import launches
from kernel_ratchet.harness.interpreter import install
from tests.harness import launch_arg_kernels as k


@pytest.fixture
def x(device):
    if device == "cpu":
        install()
    return torch.arange(100, dtype=torch.float32, device=device)


def test_a_launch_keeps_its_scalars_and_defaults_and_not_its_tensors(x):
    with launches.recording() as got:
        y = k.scaled_copy(x, 2.0)
        k.scaled_copy(x, 2.0, flip=True)
        k.scaled_copy(x, 2.0, flip=True)  # the same arguments again: kept once
    assert torch.equal(y, x * 2)
    assert got == {"_scaled_copy"}
    sets = got.arg_sets()["_scaled_copy"]
    assert sets == [
        {"BLOCK": 64, "FLIP": False, "n": 100, "scale": 2.0},
        {"BLOCK": 64, "FLIP": True, "n": 100, "scale": 2.0},
    ]


def test_an_autotuned_launch_keeps_the_config_it_ran(x):
    with launches.recording() as got:
        k.tuned_copy(x)
    assert got.arg_sets() == {"_tuned_copy": [{"BLOCK": 32, "n": 100}]}


def test_the_argument_sets_round_trip_through_their_file_merged_over_shapes(tmp_path):
    path = tmp_path / launches.ARGS_FILE
    launches.write_args(
        path,
        {
            "s1": {"_k": [{"A": True}], "_other": [{}]},
            "s2": {"_k": [{"A": True}, {"A": False}]},
        },
    )
    assert json.loads(path.read_text())["s2"]["_k"][1] == {"A": False}
    assert launches.read_args(path) == {"_k": [{"A": True}, {"A": False}], "_other": [{}]}
    assert launches.read_args(tmp_path / "missing.json") is None
    full = tmp_path / "full.json"  # an escalated round's full level: merged with its quick one
    launches.write_args(full, {"s3": {"_k": [{"A": True}, {"A": 2}]}})
    merged = launches.read_args(path, tmp_path / "missing.json", full)
    assert merged == {"_k": [{"A": True}, {"A": False}, {"A": 2}], "_other": [{}]}
    (tmp_path / "bad.json").write_text("[1, 2")
    assert launches.read_args(tmp_path / "bad.json") is None


def test_a_kernel_launched_with_ever_new_arguments_keeps_a_bounded_number():
    got = launches.Launched()
    for i in range(launches.MAX_ARG_SETS + 10):
        got.add_launch("_k", {"n": i})
    assert len(got.arg_sets()["_k"]) == launches.MAX_ARG_SETS


def test_what_a_kernel_cannot_branch_on_is_left_out():
    def fn(a, b, c, d, e):
        pass

    class Box:  # a tl.constexpr-like wrapper of a value
        value = 3

    got = launches.arguments(fn, (torch.zeros(2), torch.float16, Box()), {"d": None, "e": [1]})
    assert got == {"b": "torch.float16", "c": 3, "d": None}


def _compiled_double(ran: list) -> object:
    """A CompiledKernel as Triton builds one for ``_scaled_copy`` with BLOCK=64, its handles and
    C launcher replaced (no GPU): what ``compiled[grid](...)`` goes through."""
    from triton.compiler.compiler import CompiledKernel

    kernel = CompiledKernel.__new__(CompiledKernel)
    kernel.name = "_scaled_copy"
    kernel.src = type("Src", (), {"fn": k._scaled_copy, "constants": {(4,): 64}})()
    kernel._init_handles = lambda: None
    kernel.function = kernel.packed_metadata = None
    kernel.launch_metadata = lambda grid, stream, *args: None
    kernel._run = lambda *a: ran.append(a[9:])
    return kernel


def test_a_launch_through_a_compiled_kernels_runner_is_recorded_with_its_constexprs():
    ran: list = []
    compiled = _compiled_double(ran)
    with launches.recording() as got:
        compiled[(2, 1, 1)](torch.zeros(4), torch.zeros(4), 100, 3.0, 64, True, stream=0)
    assert len(ran) == 1  # the runner still launched
    assert got.arg_sets() == {"_scaled_copy": [{"BLOCK": 64, "FLIP": True, "n": 100, "scale": 3.0}]}
    compiled[(2, 1, 1)](torch.zeros(4), torch.zeros(4), 100, 3.0, 64, True, stream=0)
    assert len(got.arg_sets()["_scaled_copy"]) == 1 and len(ran) == 2  # unpatched after


def test_a_launch_only_the_launch_hook_sees_is_recorded_by_name_alone():
    from triton import knobs

    class Metadata:  # what Triton's C launcher hands its enter hook
        data = {"name": "_from_elsewhere"}

    with launches.recording() as got:
        assert knobs.runtime.launch_enter_hook.calls  # hook-aware launchers go through Triton
        knobs.runtime.launch_enter_hook(Metadata())
        got.add_launch("_seen", {"A": 1})
        knobs.runtime.launch_enter_hook(type("M", (), {"data": {"name": "_seen"}})())
    assert got.arg_sets() == {"_from_elsewhere": [{}], "_seen": [{"A": 1}]}
    assert not knobs.runtime.launch_enter_hook.calls


@pytest.mark.gpu
def test_a_compiled_kernel_launched_again_by_its_runner_is_recorded(x):
    y = torch.empty_like(x)
    compiled = k._scaled_copy[(2,)](x, y, x.numel(), 3.0, BLOCK=64, FLIP=True)
    with launches.recording() as got:
        compiled[(2, 1, 1)](x, y, x.numel(), 3.0, 64, True)
    torch.cuda.synchronize()
    assert torch.equal(y, -x * 3)
    assert got.arg_sets() == {"_scaled_copy": [{"BLOCK": 64, "FLIP": True, "n": 100, "scale": 3.0}]}


@pytest.mark.gpu
def test_a_cached_fast_launch_is_recorded_with_its_arguments():
    """The bundled GEMM's repeated geometry skips Triton's launch; while the check call is
    recorded it goes through Triton and is recorded like a first call."""
    from kernel_ratchet.kernels.gemm.launch import gemm

    a = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(5120, 1000, device="cuda", dtype=torch.bfloat16)
    with launches.recording() as first:
        gemm(a, b)
    gemm(a, b)  # the geometry's runner is cached now
    with launches.recording() as again:
        out = gemm(a, b)
    torch.testing.assert_close(out.float(), a.float() @ b.float().T, rtol=2e-2, atol=1.0)
    assert set(again) == set(first) and again.arg_sets() == first.arg_sets()
