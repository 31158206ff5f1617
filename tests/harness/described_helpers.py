"""The op described in ratchet.yaml that the described-adapter tests (``test_described_*.py``)
start from, an RMS norm over the shapes' dtype, and their helpers: ``_adapter`` builds its
adapter with some keys changed, ``_check`` compares its outputs with the reference on a shape."""

from __future__ import annotations

from kernel_ratchet.harness.adapter import load_adapter
from kernel_ratchet.harness.correctness import check_outputs
from kernel_ratchet.harness.described_spec import described_spec

OPS = "tests.harness.described_ops"
DESC = {
    "function": f"{OPS}:rms_norm",
    "reference": f"{OPS}:rms_norm_ref",
    "inputs": {"x": "[M, N] dtype", "weight": "[N] float32"},
    "outputs": ["y"],
    "gradients": ["x", "weight"],
    "bytes": "io",
    "flops": "4*M*N",
}
SHAPES = [
    {"label": "bf", "M": 5, "N": 33, "dtype": "bfloat16"},
    {"label": "f32", "M": 3, "N": 8, "dtype": "float32"},
]


def _adapter(**changes):
    return load_adapter(described_spec({**DESC, **changes}, "memory"))


def _check(adapter, shape):
    case = adapter.make_case(shape, 7, "cpu")
    got, ref = adapter.outputs(case), adapter.reference(case)
    return got, check_outputs(got, ref, {n: adapter.threshold(n) for n in ref})
