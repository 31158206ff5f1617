"""Ops with declared in-place outputs (``inplace_outputs``): checked against a reference on the
inputs they saw, timed from the same values every sample, and still caught when the timed
calls stop writing their result."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.harness import inplace
from kernel_ratchet.harness.adapter import load_adapter, load_shapes
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.described_spec import described_spec, inline_spec
from kernel_ratchet.harness.worker import Worker
from tests.redteam.expect import cpu_spec, expect_rejected, explain

OPS = "tests.harness.inplace_ops"
DESC = {
    "function": f"{OPS}:swiglu_inplace",
    "reference": f"{OPS}:swiglu_ref",
    "inputs": {"a": "[M, N] dtype", "b": "[M, N] dtype"},
    "outputs": ["c"],
    "gradients": ["a", "b"],
    "inplace_outputs": ["a", "b"],
    "bytes": "io",
}
SCALE_INTO_DY = {  # y = x * w * 1e6, whose backward writes dx into the incoming gradient
    "function": f"{OPS}:scale_into_dy",
    "reference": f"{OPS}:scale_ref",
    "inputs": {"x": "[M, N] dtype", "w": "[N] dtype"},
    "outputs": ["y"],
    "gradients": ["x", "w"],
    "inplace_outputs": ["dy"],
    "bytes": "io",
}
(SHAPE,) = load_shapes(inline_spec([{"label": "t", "M": 6, "N": 40, "dtype": "float32"}]))


def _spec(**changes) -> str:
    return described_spec({**DESC, **changes}, "memory")


def test_the_reference_sees_the_inputs_the_op_overwrote():
    adapter = load_adapter(_spec())
    case = adapter.make_case(SHAPE, 3, "cpu")
    kept = inplace.prepared(adapter, case)
    got = adapter.outputs(case)
    assert got["da"].data_ptr() == case.a.data_ptr()  # the result lives in the input
    ref = inplace.reference(adapter, case, kept)
    res = check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})
    assert res.passed, res.reason
    # the plain order (reference on the case after the op) compares with overwritten inputs
    stale = check_outputs(got, adapter.reference(case), {n: 80.0 for n in ref})
    assert not stale.passed


@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_a_declared_inplace_op_passes_the_worker_check_and_is_timed(tmp_path: Path, phase: str):
    with Worker(cpu_spec(_spec()), tmp_path / "w.log") as w:
        r = w.check(SHAPE, 11)
        assert r.ok, explain(r)
        t = w.time(SHAPE, 12, phase)
        assert t.ok, explain(t)


def test_the_same_op_undeclared_is_an_input_modified(tmp_path: Path):
    spec = described_spec({k: v for k, v in DESC.items() if k != "inplace_outputs"}, "memory")
    with Worker(cpu_spec(spec), tmp_path / "w.log") as w:
        expect_rejected(w.check(SHAPE, 11), "cheat", "input modified")


def test_timed_calls_that_stop_writing_their_inplace_result_are_caught(tmp_path: Path):
    spec = _spec(function=f"{OPS}:swiglu_stops_writing")
    with Worker(cpu_spec(spec), tmp_path / "w.log") as w:
        r = w.check(SHAPE, 11)
        assert r.ok, explain(r)  # right for the calls the check makes
        expect_rejected(w.time(SHAPE, 12, "bwd"), "cheat", "did not write")


def test_a_frozen_dataclass_case_lends_its_kept_fields_to_the_reference():
    import dataclasses

    import torch

    @dataclasses.dataclass(frozen=True)
    class Case:
        x: torch.Tensor
        dy: torch.Tensor

    case = Case(torch.ones(3), torch.zeros(3))
    kept = inplace.InPlace(("dy",)).keep(case)
    case.dy.add_(5.0)  # the op writes its result into dy
    with kept.as_kept(case) as c:
        assert torch.equal(c.dy, torch.zeros(3))
    assert torch.equal(case.dy, torch.full((3,), 5.0))  # the result is where the op left it


def test_an_inplace_op_whose_chained_calls_overflow_is_timed_from_its_kept_values(tmp_path):
    """Every timed call starts from the kept values: fed its own results, this backward (dX
    written into dY, as Liger-Kernel's RMSNorm does) overflows to NaN within a sample, which
    the NaN-poison check would call an unwritten output of an honest op."""
    spec = described_spec(SCALE_INTO_DY, "memory")
    batches = cpu_spec(spec, max_batch=20, min_sample_ms=5.0)  # 20 calls a sample: 1e120
    with Worker(batches, tmp_path / "w.log") as w:
        r = w.check(SHAPE, 11)
        assert r.ok, explain(r)
        t = w.time(SHAPE, 12, "bwd")
        assert t.ok, explain(t)
        assert t.payload["median_ms"] > 0


@pytest.mark.parametrize("timed_by", ["harness", "sweep"])
def test_every_timed_inplace_call_starts_from_the_kept_values(timed_by):
    """The harness and the sweep time an in-place op as the workers do: every call, not only
    every sample, starts from the kept values (chained, the incoming gradient grows by 1e6 a
    call and overflows within a sample)."""
    from kernel_ratchet.harness.runtime import run_shape
    from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine
    from kernel_ratchet.optimizers.sweep_measure import measure_config
    from tests.harness import inplace_ops

    adapter = load_adapter(described_spec(SCALE_INTO_DY, "memory"))
    # samples of 5 ms: the op's time is what is left after its preludes' (the kept values'
    # restore), and 1 ms samples of both read negative now and then on a loaded machine
    engine = PerfCounterEngine(warmup=1, samples=3, min_sample_ms=5.0, max_batch=20)
    inplace_ops.PEAK["dy"] = 0.0
    if timed_by == "harness":
        r = run_shape(adapter, SHAPE, engine, seed=5, device="cpu")
        assert r.passed and r.bwd is not None, r.reason
    else:
        got = measure_config(adapter, [SHAPE], engine, "both", "cpu", {})
        assert got[SHAPE.label]["bwd"]["median_ms"] > 0, got
    assert inplace_ops.PEAK["dy"] < 100.0, inplace_ops.PEAK  # randn values, never a result
