"""Static transfer audit: the forms a cache takes in a candidate (weak keys, dataclass fields,
module state, mutable defaults, attributes, memoizing calls) and the names that make a layout
specialization, each classified as SPEC section 8 says."""

from __future__ import annotations

import ast

import pytest

from kernel_ratchet.guard.static_audit import ALLOW, REJECT, audit_change
from tests.guard import planted as P
from tests.guard.test_static_audit import audit

WEAK_W1 = """

_W_Q = weakref.WeakKeyDictionary()


def quant_weight_weak(w: torch.Tensor):
    hit = _W_Q.get(w)
    if hit is not None and hit[0] == w._version:
        return hit[1]
    q = quant_rowwise(w)
    _W_Q[w] = (w._version, q)
    return q
"""


def test_weak_key_weight_cache_validated_by_version_is_w1() -> None:
    result = audit(
        P.INCUMBENT.replace("import functools", "import functools\nimport weakref") + WEAK_W1
    )
    assert (result.bucket, result.verdict) == ("W1", ALLOW), result
    stale = audit(
        P.INCUMBENT
        + WEAK_W1.replace(" and hit[0] == w._version", "").replace("(w._version, q)", "(0, q)")
    )
    assert (stale.bucket, stale.verdict) == ("W1", REJECT)


_PLAN_FIELD = """

@dataclasses.dataclass
class _Plan:
    grid: tuple
    runners: dict = dataclasses.field(default_factory=dict)


def launch(plan: _Plan, a: torch.Tensor, b: torch.Tensor):
    key = (a.dtype, b.dtype, a.data_ptr() % 16)
    key += ({EXTRA},)
    hit = plan.runners.get(key)
    if hit is not None:
        return hit
    plan.runners[key] = _describe(a.dtype)
    return plan.runners[key]
"""


@pytest.mark.parametrize(
    ("extra", "verdict", "bucket"),
    [
        # alignment and dtype: a launch-plan key, whatever the lookup feeds back into the store
        ("b.device.index", ALLOW, "K1"),
        # the activation's address slipped in through `key += ...`: a cache that never hits
        ("a.data_ptr()", REJECT, "W2"),
        ("id(a)", REJECT, "W2"),
    ],
)
def test_a_dataclass_field_cache_and_an_extended_key_are_audited(
    extra: str, verdict: str, bucket: str
) -> None:
    result = audit(P.INCUMBENT + _PLAN_FIELD.replace("{EXTRA}", extra), declared=None)
    assert (result.verdict, result.bucket) == (verdict, bucket), result
    found = [e for e in result.evidence if "plan.runners in launch" in e]
    assert found, result.evidence  # the field is a container the audit sees
    if verdict == ALLOW:
        assert "a.data_ptr() % 16 [geometry of" in found[0]
        assert "no cache" not in result.reason and "caches it adds" in result.reason


_OUTPUT_CACHE = """

{DECL}


def fp8_gemm_cached(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    hit = _OUT.get(a.data_ptr())
    if hit is not None:
        return hit
    out = fp8_gemm(a, b)
    _OUT[a.data_ptr()] = out
    return out
"""


@pytest.mark.parametrize(
    "decl",
    [
        "_OUT = cachetools.LRUCache(maxsize=64)",
        "_OUT = dict.fromkeys(())",
        "_OUT = _shared() or {}",
        "_OUT = OutputCache()",
    ],
)
def test_module_state_stored_into_by_key_is_a_cache_whatever_made_it(decl: str) -> None:
    """An output memoized on the activation's address, in a container the audit cannot name
    from its constructor: stored into by key inside a function, it is a cache all the same."""
    result = audit(P.INCUMBENT + _OUTPUT_CACHE.replace("{DECL}", decl), declared=None)
    assert result.verdict == REJECT and result.bucket in ("W2", "W3"), result
    assert any("_OUT" in e and "a.data_ptr()" in e for e in result.evidence), result.evidence


def test_module_state_only_read_is_not_a_cache() -> None:
    extra = """

_TILES = load_tiles()


def pick(a: torch.Tensor):
    return _TILES.get(a.shape[0], (64, 64))
"""
    result = audit(P.INCUMBENT + extra, declared=None)
    assert result.verdict == ALLOW and not result.cache_keys, result


def test_a_mutable_default_argument_is_a_cache() -> None:
    extra = """

def fp8_gemm_cached(a: torch.Tensor, b: torch.Tensor, *, _memo={}) -> torch.Tensor:
    k = a.data_ptr()
    if k not in _memo:
        _memo[k] = fp8_gemm(a, b)
    return _memo[k]
"""
    result = audit(P.INCUMBENT + extra, declared=None)
    assert result.verdict == REJECT and result.bucket == "W3", result


@pytest.mark.parametrize(
    ("key", "verdict"),
    [
        ("a._cdata", REJECT),
        ("a.untyped_storage()._cdata", REJECT),
        ("a.__cuda_array_interface__['data'][0]", REJECT),
        ("(a.dtype, a.__cuda_array_interface__['data'][0] % 16)", ALLOW),  # alignment
    ],
)
def test_an_address_read_through_an_attribute_is_an_address(key: str, verdict: str) -> None:
    extra = f"""

_OUT = {{}}


def tiles_for(a: torch.Tensor):
    k = {key}
    if k not in _OUT:
        _OUT[k] = (64, 64)
    return _OUT[k]
"""
    result = audit(P.INCUMBENT + extra, declared=None)
    assert result.verdict == verdict, result
    (line,) = [e for e in result.evidence if "_OUT in tiles_for" in e]
    assert ("[address of" in line) == (verdict == REJECT), line


def test_state_names_that_can_hold_a_cache() -> None:
    """Containers by constructor whether written or not; other state only once a function
    stores into it (by key, by attribute, through setattr); mutable default arguments."""
    from kernel_ratchet.guard.cache_state import containers

    src = """
_A = 1
_B = {}
_C = []
_D = make()
_E = make()


class S:
    last = None


def f(x, _memo={}, n=3):
    _D[x] = 1
    S.last, y = x, 2
    setattr(mod, "_k", x)
"""
    assert set(containers(ast.parse(src))) == {"_B", "_C", "_D", "last", "_k", "_memo"}


def test_a_last_call_cache_on_a_class_or_through_setattr_is_seen() -> None:
    extra = """

class _State:
    last_key = None
    last_out = None


def fp8_gemm_cached(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if _State.last_key == a.data_ptr() or getattr(mod, "_k", None) == a.data_ptr():
        return _State.last_out
    out = fp8_gemm(a, b)
    _State.last_key, _State.last_out = a.data_ptr(), out
    setattr(mod, "_k", a.data_ptr())
    return out
"""
    result = audit(P.INCUMBENT + extra, declared=None)
    assert result.verdict == REJECT, result
    lines = [e for e in result.evidence if "a.data_ptr()" in e]
    assert any("last_key" in e for e in lines) and any("_k" in e for e in lines), lines


@pytest.mark.parametrize(
    "memo",
    [
        "fp8_gemm_cached = functools.lru_cache(maxsize=None)(_impl)",
        "fp8_gemm_cached = functools.cache(_impl)",
        "from functools import cache as memo\nfp8_gemm_cached = memo(_impl)",
    ],
)
def test_a_function_memoized_by_a_call_is_memoization(memo: str) -> None:
    extra = f"""

def _impl(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return fp8_gemm(a, b)


{memo}
"""
    result = audit(P.INCUMBENT + extra, declared=None)
    assert (result.verdict, result.bucket) == (REJECT, "W3"), result


@pytest.mark.parametrize(
    "decorator", ["memo", "cachetools.cached(cache={})", "cachetools.func.lru_cache(64)"]
)
def test_a_memoizing_decorator_under_another_name_is_memoization(decorator: str) -> None:
    extra = f"""

from functools import cache as memo


@{decorator}
def fp8_gemm_cached(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return fp8_gemm(a, b)
"""
    result = audit(P.INCUMBENT + extra, declared=None)
    assert (result.verdict, result.bucket) == (REJECT, "W3"), result


_KERNEL = """import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_N: tl.constexpr{extra}):
    pass


def mm(a, b, c):
    _mm_kernel[(1,)](a, b, c, 1, 1, 1, BLOCK_N=128{kw})
"""


@pytest.mark.parametrize(
    ("extra", "k2"),
    [
        ("B_KMAJOR", True),  # the operand's layout: a specialization of its own
        ("TRANS_A", True),
        ("A_LAYOUT", False),  # a tile's shared-memory layout: any tile change names one
        ("ACC_LAYOUT", False),
    ],
)
def test_only_operand_layout_names_make_a_layout_specialization(extra: str, k2: bool) -> None:
    path = "k/mm.py"
    before = _KERNEL.format(extra="", kw="")
    after = _KERNEL.format(extra=f", {extra}: tl.constexpr", kw=f", {extra}=1")
    result = audit_change({path: before}, {path: after}, declared_bucket="K1")
    assert (result.bucket == "K2") is k2, result
    assert any("new layout specialization" in e for e in result.evidence) is k2
