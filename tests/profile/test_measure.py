"""``measure`` in ratchet.yaml: the project default, the per-op setting, and their problems."""

from __future__ import annotations

import pytest

from kernel_ratchet.campaign.create import timing_params
from kernel_ratchet.errors import ProfileError
from kernel_ratchet.harness.timing.quantity import Measure
from kernel_ratchet.profile.loader import load_profile


def test_ops_inherit_the_project_default_and_override_it(tiny_project):
    p = tiny_project()
    assert load_profile(p.write()).op("gemm_bf16").measure == Measure("step_time", "warm")
    p.data["measure"] = {"quantity": "kernel_time", "l2": "cold"}
    prof = load_profile(p.write())
    assert prof.measure == prof.op("gemm_bf16").measure == Measure("kernel_time", "cold")
    p.op["measure"] = {"l2": "warm"}
    op = load_profile(p.write()).op("gemm_bf16")
    assert op.measure == Measure("kernel_time", "warm")
    params = timing_params("cuda_events", op)
    assert (params["quantity"], params["l2"]) == ("kernel_time", "warm")
    assert "quantity" not in timing_params("perf_counter", op)


@pytest.mark.parametrize(
    ("where", "raw", "key", "problem"),
    [
        ("op", {"quantity": "wall"}, "ops.gemm_bf16.measure.quantity", "'wall' is not allowed"),
        ("op", {"l2": "lukewarm"}, "ops.gemm_bf16.measure.l2", "'lukewarm' is not allowed"),
        ("top", ["kernel_time"], "measure", "expected a mapping"),
        ("top", {"quantity": "step_time", "l2": "cold"}, "measure", "not a measurable quantity"),
        ("op", {"cold": True}, "ops.gemm_bf16.measure.cold", "unknown key"),
    ],
)
def test_bad_measure_names_the_key_and_the_fix(tiny_project, where, raw, key, problem):
    p = tiny_project()
    (p.op if where == "op" else p.data)["measure"] = raw
    with pytest.raises(ProfileError) as err:
        load_profile(p.write())
    line = next(ln for ln in str(err.value).splitlines() if f": {key}: " in ln)
    assert problem in line and "Fix:" in line
