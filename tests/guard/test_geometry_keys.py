"""Launch-plan caches keyed on geometry transfer; identity, content or cached tensors do not."""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.dynamic_transfer import OVERFIT, DynamicResult
from kernel_ratchet.guard.static_audit import ALLOW, REJECT, audit_change
from kernel_ratchet.guard.transfer import estimate_real_gain

_BEFORE = """
import functools

import torch


def matmul(a, b):
    return a @ b.T
"""

# The launch-plan pattern: split-K, TMA use and grid decided once per operand geometry.
_PLAN_CACHE = """
import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class _Plan:
    split_k: int
    use_tma: bool
    grid: tuple[int]


def _tma_ok(t):
    es = t.element_size()
    return t.data_ptr() % 16 == 0 and (t.stride(0) * es) % 16 == 0 and t.stride(1) == 1


@functools.lru_cache(maxsize=1024)
def _plan(M: int, N: int, K: int, geom: tuple) -> _Plan:
    a_ok, b_ok = geom
    split = 4 if M * N < 4096 else 1
    return _Plan(split, a_ok and b_ok, (M * N // 128,))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[0]
    plan = _plan(M, N, K, (_tma_ok(a), _tma_ok(b)))
    return a @ b.T
"""

_KEY = "(_tma_ok(a), _tma_ok(b))"
_DICT_CACHE = """
_CACHE = {}


def matmul(a, b):
    key = (a.shape, b.shape, _tma_ok(a), a.data_ptr() % 16 == 0)
    if key not in _CACHE:
        _CACHE[key] = VALUE
    return a @ b.T
"""


def _audit(after: str):  # noqa: ANN202
    return audit_change({"k.py": _BEFORE}, {"k.py": after})


def test_a_launch_plan_cached_on_geometry_transfers() -> None:
    r = _audit(_PLAN_CACHE)
    assert r.verdict == ALLOW, r
    lines = [e for e in r.evidence if "_plan in matmul" in e]
    assert lines and "launch-plan cache keyed on geometry: transfers" in lines[0], r.evidence
    assert "_tma_ok(a) [geometry of activation a: stable]" in lines[0], lines


def test_an_inline_alignment_test_is_geometry() -> None:
    r = _audit(_PLAN_CACHE.replace(_KEY, "(a.data_ptr() % 16 == 0, b.stride(0) % 8 == 0)"))
    assert r.verdict == ALLOW, r
    assert any("launch-plan cache keyed on geometry" in e for e in r.evidence), r.evidence


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("(_tma_ok(a), a.data_ptr())", "address of activation a"),
        ("(_tma_ok(a), id(a))", "identity of activation a"),
        ("(_tma_ok(a), a)", "identity of activation a"),
        ("(a.data_ptr() % 65536, _tma_ok(b))", "address of activation a"),
        ("(_tma_ok(a) if M else a, 1)", "identity of activation a"),
    ],
    ids=["raw-data-ptr", "id", "tensor-itself", "coarse-modulus", "tensor-in-conditional"],
)
def test_identity_sneaked_into_a_geometry_key_is_rejected(key: str, said: str) -> None:
    r = _audit(_PLAN_CACHE.replace(_KEY, key))
    assert r.verdict == REJECT and r.bucket == "W3", r
    assert said in r.reason, r.reason


def test_a_tensor_returned_from_a_geometry_keyed_memo_is_rejected() -> None:
    after = _PLAN_CACHE.replace(
        "return _Plan(split, a_ok and b_ok, (M * N // 128,))", "return torch.empty(M, N)"
    )
    r = _audit(after)
    assert r.verdict == REJECT and r.bucket == "W3", r
    assert "identity of activation a" in r.reason, r.reason


def test_a_helper_that_reads_values_is_not_geometry() -> None:
    after = _PLAN_CACHE.replace("and t.stride(1) == 1", "and t[0, 0].item() > 0")
    r = _audit(after)
    assert r.verdict == REJECT and r.bucket == "W3", r


def test_a_helper_that_reads_a_cache_is_not_geometry() -> None:
    after = _PLAN_CACHE.replace("es = t.element_size()", "es = _SEEN.get(id(t), 1)")
    r = _audit(after + "\n_SEEN = {}\n")
    assert r.verdict == REJECT, r


def test_a_geometry_keyed_dict_of_outputs_is_rejected() -> None:
    after = _PLAN_CACHE.split("\ndef matmul")[0] + _DICT_CACHE.replace("VALUE", "a @ b.T")
    r = _audit(after)
    assert r.verdict == REJECT, r


def test_a_geometry_keyed_dict_of_plans_transfers() -> None:
    after = _PLAN_CACHE.split("\ndef matmul")[0] + _DICT_CACHE.replace(
        "VALUE", "_Plan(4, True, (a.shape[0] // 128,))"
    )
    r = _audit(after)
    assert r.verdict == ALLOW, r
    assert any("launch-plan cache keyed on geometry" in e for e in r.evidence), r.evidence


def test_a_value_the_audit_cannot_read_is_left_to_the_dynamic_check() -> None:
    after = _PLAN_CACHE.split("\ndef matmul")[0] + _DICT_CACHE.replace(
        "VALUE", "config_for(a.shape[0], b.shape[0])"
    )
    static = _audit(after)
    assert static.verdict == ALLOW, static
    assert any("the dynamic transfer check judges" in e for e in static.evidence), static
    dynamic = DynamicResult("4096x4096x4096", 8, 5, 1.0, 1.5, 0.5, 0.03, OVERFIT, "hit on a")
    assert estimate_real_gain(static, dynamic, 0.1).decision == REJECT


# The geometry helper lives in another kernel file of the change, imported three common ways.
_UTIL = """
def tma_ok(t):
    es = t.element_size()
    return t.data_ptr() % 16 == 0 and (t.stride(0) * es) % 16 == 0 and t.stride(1) == 1


def handle(t):
    return id(t)
"""
_IMPORTED = """
import functools

{imp}


@functools.lru_cache(maxsize=1024)
def _plan(M: int, N: int, K: int, geom: tuple) -> int:
    return 4 if M * N < 4096 and all(geom) else 1


def matmul(a, b):
    M, K = a.shape
    N = b.shape[0]
    split = _plan(M, N, K, ({call}(a), {call}(b)))
    return a @ b.T
"""


@pytest.mark.parametrize(
    ("imp", "call"),
    [
        ("from pkg.util import tma_ok", "tma_ok"),
        ("from pkg import util", "util.tma_ok"),
        ("import pkg.util as u", "u.tma_ok"),
        ("from .util import tma_ok as ok", "ok"),
    ],
    ids=["from-module", "module-attribute", "import-as", "relative-alias"],
)
def test_a_geometry_helper_imported_from_another_kernel_file_is_geometry(imp, call) -> None:
    after = _IMPORTED.format(imp=imp, call=call)
    r = audit_change(
        {"pkg/k.py": _BEFORE, "pkg/util.py": _UTIL}, {"pkg/k.py": after, "pkg/util.py": _UTIL}
    )
    assert r.verdict == ALLOW, r
    line = next(e for e in r.evidence if "_plan in matmul" in e)
    assert f"{call}(a) [geometry of activation a: stable]" in line, line


def test_an_imported_helper_that_returns_identity_is_still_identity() -> None:
    after = _IMPORTED.format(imp="from pkg.util import handle", call="handle")
    r = audit_change(
        {"pkg/k.py": _BEFORE, "pkg/util.py": _UTIL}, {"pkg/k.py": after, "pkg/util.py": _UTIL}
    )
    assert r.verdict == REJECT, r
