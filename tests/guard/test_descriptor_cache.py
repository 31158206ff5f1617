"""A cache of TMA descriptors keyed on where each tensor lives (address, shape, strides) holds
no values of a tensor: a hit on a reused address serves what a new encode would, so the static
audit allows it. Anything else keyed on an activation's address stays a W2 rejection."""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.static_audit import ALLOW, REJECT, StaticAudit, audit_change
from tests.guard import planted as P

ENCODE = (
    "triton.runtime.driver.active.utils.fill_tma_descriptor("
    "ptr, 3, 2, 8, [64, 64], shape, strides, 0)"
)


def _launcher(key: str, value: str, helper: str = "") -> str:
    return f"""
import triton

_KEPT = {{}}
{helper}

def launch_act(x: torch.Tensor):
    ptr = x.data_ptr()
    shape = x.shape
    strides = x.stride()
    key = {key}
    desc = _KEPT.get(key)
    if desc is None:
        desc = {value}
        _KEPT[key] = desc
    return desc
"""


def audit(after: str) -> StaticAudit:
    return audit_change({P.PATH: P.INCUMBENT}, {P.PATH: P.INCUMBENT + after}, declared_bucket="K1")


def test_a_descriptor_cache_keyed_on_address_shape_and_strides_is_allowed() -> None:
    result = audit(_launcher("(ptr, shape, strides)", ENCODE))
    assert (result.bucket, result.verdict) == ("K1", ALLOW)
    assert any("TMA descriptor cache" in e for e in result.evidence)


@pytest.mark.parametrize(
    ("key", "value", "helper"),
    [
        ("(ptr, shape)", ENCODE, ""),  # strides missing: two layouts would share one
        ("ptr", ENCODE, ""),
        ("(ptr, shape, strides)", "run_gemm(x)", ""),  # a result, not a descriptor
        (
            "(ptr, shape, strides)",
            "fill_tma_descriptor(ptr, shape, strides)",  # a look-alike of the project's own
            "def fill_tma_descriptor(p, s, t):\n    return torch.ones(s)\n",
        ),
    ],
    ids=["no-strides", "address-only", "a-result", "look-alike"],
)
def test_other_caches_keyed_on_an_activations_address_stay_rejected(key, value, helper) -> None:
    result = audit(_launcher(key, value, helper))
    assert (result.bucket, result.verdict) == ("W2", REJECT)


def test_values_stored_beside_a_descriptor_stay_rejected() -> None:
    stored = f"""
import triton

_KEPT = {{}}

def launch_act(x: torch.Tensor):
    ptr = x.data_ptr()
    shape = x.shape
    strides = x.stride()
    key = (ptr, shape, strides)
    _KEPT[key] = ({ENCODE}, x[0])
    return _KEPT[key]
"""
    result = audit(stored)
    assert (result.bucket, result.verdict) == ("W2", REJECT)
