"""The dynamic backend census: which vendor-class ATen operations a call runs, however it
spelled them, and what a candidate adds to the incumbent's."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from kernel_ratchet.harness import op_census
from kernel_ratchet.harness.paired_checks import checked


def test_a_call_by_a_computed_name_is_counted_by_its_operation():
    a, b = torch.randn(8, 4), torch.randn(4, 8)
    with op_census.counting() as seen:
        getattr(torch, "".join(("m", "m")))(a, b)
        torch.ops.aten.mm.default(a, b)
        F.softmax(a, dim=-1)
        (a + 1).sum()  # elementwise and reductions are not of the vendor class
    assert dict(seen) == {"aten::mm": 2, "aten::_softmax": 1}


def test_backward_operations_are_counted_and_the_mode_is_left():
    x = torch.randn(4, 4, requires_grad=True)
    with op_census.counting() as seen:
        F.gelu(x @ x).sum().backward()
    assert seen["aten::gelu"] == 1 and seen["aten::gelu_backward"] == 1
    assert seen["aten::mm"] >= 3  # the forward's and the two gradients'
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None


def test_vendor_class_names():
    assert op_census.is_vendor("aten::relu_") and op_census.is_vendor("aten.addmm")
    assert op_census.is_vendor("aten::_scaled_dot_product_flash_attention")
    assert not op_census.is_vendor("aten::add") and not op_census.is_vendor("aten::cumsum")


def test_only_what_the_candidate_runs_more_often_is_added():
    inc = {"aten::mm": 2}  # e.g. a backward written with torch ops
    assert op_census.added(inc, {"aten::mm": 2}) == {}
    assert op_census.added(inc, {"aten::mm": 1}) == {}
    assert op_census.added(inc, {"aten::mm": 3, "aten::_softmax": 1}) == {
        "aten::_softmax": 1,
        "aten::mm": 1,
    }


def _res(ok=True, category="ok", vendor=None):
    return SimpleNamespace(ok=ok, category=category, detail="d", payload={"vendor_ops": vendor})


LOGS = {"incumbent": "inc.log", "candidate": "cand.log"}


def test_checked_judges_failures_first_then_added_operations():
    both_bad = {"incumbent": (_res(False, "crash"), 1.0), "candidate": (_res(False, "nan"), 1.0)}
    f = checked(both_bad, "s1", LOGS, True)
    assert (f.side, f.category) == ("incumbent", "crash")
    swap = {"incumbent": (_res(vendor={}), 1.0), "candidate": (_res(vendor={"aten::mm": 1}), 1.0)}
    f = checked(swap, "s1", LOGS, True)
    assert (f.side, f.stage, f.category) == ("candidate", "check", "backend")
    assert "aten::mm x1" in f.detail and "s1" in f.detail
    assert checked(swap, "s1", LOGS, False) is None  # another backend: not refused
    same = {"incumbent": (_res(vendor={"aten::mm": 1}), 1.0), "candidate": swap["candidate"]}
    assert checked(same, "s1", LOGS, True) is None


def test_what_the_source_does_not_show_the_call_does(tmp_path):
    """The red team's computed-name swap: the static audit cannot read it; its call shows it."""
    import importlib.util

    from kernel_ratchet.guard.backend import backend_audit
    from tests.redteam import sources as S

    before, after = {S.PATH: S.INCUMBENT}, {S.PATH: S.VENDOR_COMPUTED_NAME}
    assert not backend_audit(before, after, "TRITON").flagged
    path = tmp_path / "swapped_kernel.py"  # a file: compiling @triton.jit reads its source
    path.write_text(S.VENDOR_COMPUTED_NAME)
    spec = importlib.util.spec_from_file_location("swapped_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with op_census.counting() as seen:
        module.matmul_nt(torch.randn(4, 8), torch.randn(3, 8))
    assert op_census.added({}, seen) == {"aten::mm": 1}


def test_work_done_inside_one_operation_is_counted_by_that_operation():
    """``_trilinear`` and the slow convolutions run a GEMM inside their own kernel, and a
    custom operation runs code the dispatch mode cannot see into: each counts as itself."""
    a, b = torch.randn(8, 4), torch.randn(6, 4)

    @torch.library.custom_op("kr_census_test::gemm", mutates_args=())
    def gemm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x @ y.t()

    with op_census.counting() as seen:
        torch._trilinear(a, b, a.new_ones(4), [1], [0], [1, 0], [2])
        torch._C._nn.thnn_conv2d(torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), [3, 3])
        torch.conv_tbc(a.view(8, 1, 4), b.t().contiguous().view(1, 4, 6), torch.zeros(6), 0)
        gemm(a, b)
        with torch.profiler.record_function("a named range"):  # not work
            pass
    assert dict(seen) == {
        "aten::_trilinear": 1,
        "aten::_slow_conv2d_forward": 1,
        "aten::conv_tbc": 1,
        "kr_census_test::gemm": 1,
    }


def test_the_census_costs_no_dynamo_import_and_still_sees_a_compiled_call():
    """Counting imports no torch._dynamo (seconds of CPU in every worker); a candidate's
    torch.compile'd function run inside the census still has its operations counted."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from kernel_ratchet.harness import op_census\n"
        "a = torch.randn(4, 4)\n"
        "with op_census.counting() as seen:\n"
        "    a @ a\n"
        "assert seen['aten::mm'] == 1, seen\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr
    compiled = torch.compile(lambda x: torch.mm(x, x).relu(), backend="eager")
    x = torch.randn(4, 4)
    with op_census.counting() as seen:
        compiled(x)
    assert seen["aten::mm"] == 1, seen
