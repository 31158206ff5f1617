"""A shape may carry a flag (``causal: true``) for a ``"${...}"`` constant: not a size."""

from __future__ import annotations

import torch
import yaml

from kernel_ratchet.harness.adapter import load_adapter, load_shapes
from kernel_ratchet.profile.device_check import work_check
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.rehearsal import shape_work

KERNEL = """
def op(x, causal):
    return x.tril() if causal else x.clone()


def ref(x, causal):
    return x.tril() if causal else x
"""


def test_a_flag_reaches_the_call_and_counts_as_no_size(module_project):
    root = module_project("flagged", KERNEL)
    op = {
        "kernel_source": ["flagged.py"],
        "backend": "TRITON",
        "lang": "triton",
        "campaign_type": "memory",
        "test": "true",
        "function": "flagged:op",
        "reference": "flagged:ref",
        "inputs": {"x": "[M, N] dtype"},
        "kwargs": {"causal": "${causal}"},
        "reference_kwargs": {"causal": "${causal}"},
        "outputs": ["y"],
        "bytes": "io",
        "shapes": [
            {"label": "causal", "M": 6, "N": 6, "dtype": "float32", "causal": True},
            {"label": "full", "M": 6, "N": 6, "dtype": "float32", "causal": False},
        ],
    }
    data = {"project": "f", "package": "flagged", "install": "true", "full_test": "true"}
    data |= {"campaign_root": ".ratchet/campaigns", "tips_root": "tips", "ops": {"f": op}}
    (root / "ratchet.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    profile = load_profile(root / "ratchet.yaml")
    o = profile.op("f")
    adapter = load_adapter(o.adapter)
    for shape in load_shapes(o.shapes):
        assert shape_work(shape, True) == 36  # the flag multiplies nothing
        case = adapter.make_case(shape, 0, "cpu")
        y = adapter.outputs(case)["y"]
        assert torch.equal(y, adapter.reference(case)["y"])
        assert torch.equal(y, y.tril()) is shape.params["causal"]
    assert work_check(profile, "f").ok
