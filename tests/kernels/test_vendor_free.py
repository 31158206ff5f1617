"""The bundled ops run no vendor-class ATen operation in the call a campaign's check watches
(:mod:`kernel_ratchet.harness.op_census`): a census that counted one of their own launches
would refuse every honest candidate of that op. Run with ``pytest -m gpu``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernel_ratchet.guard.backend import KERNEL_BACKENDS
from kernel_ratchet.harness import inplace as ip
from kernel_ratchet.harness import op_census
from kernel_ratchet.harness.adapter import load_adapter, load_shapes
from kernel_ratchet.profile.loader import load_profile

pytestmark = pytest.mark.gpu

_PROFILE = load_profile(Path(__file__).resolve().parents[2] / "ratchet.yaml")
#: One op of a kernel backend per adapter class and shape set: the others run the same
#: launches (an op of another backend, such as the A/A subject on torch, is not censused).
_OPS = {
    (o.adapter, o.shapes): name
    for name, o in _PROFILE.ops.items()
    if o.backend.upper() in KERNEL_BACKENDS
}


@pytest.mark.parametrize("name", sorted(_OPS.values()))
def test_a_bundled_op_runs_no_vendor_operation(name):
    op = _PROFILE.op(name)
    adapter = load_adapter(op.adapter)
    shapes = load_shapes(op.shapes)
    shape = min(shapes, key=lambda s: math.prod((s.M, s.N, max(s.K, 1), s.B)))
    case = adapter.make_case(shape, 0, "cuda")
    with op_census.counting() as seen:
        ip.first_forward(adapter, case)
        adapter.outputs(case)
    assert dict(seen) == {}, f"{name} on {shape.label}"
