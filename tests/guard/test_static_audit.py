"""Static transfer audit: each planted candidate classified and decided as SPEC section 8 says."""

from __future__ import annotations

import ast

import pytest

from kernel_ratchet.guard.cache_scan import scan_source
from kernel_ratchet.guard.keys import KeyReader
from kernel_ratchet.guard.roles import annotations, role_of
from kernel_ratchet.guard.static_audit import ALLOW, REJECT, StaticAudit, audit_change
from tests.guard import planted as P


def audit(after: str, declared: str | None = "K1") -> StaticAudit:
    return audit_change({P.PATH: P.INCUMBENT}, {P.PATH: after}, declared_bucket=declared)


@pytest.mark.parametrize(
    ("name", "bucket", "verdict"),
    [
        ("W2_ID", "W2", REJECT),
        ("W2_VERSIONED", "W2", REJECT),
        ("W2_DOUT_PTR", "W2", REJECT),
        ("W3_LRU", "W3", REJECT),
        ("W3_GLOBAL_LAST", "W3", REJECT),
        ("W1_WEIGHT", "W1", ALLOW),
        ("W1_ANNOTATED", "W1", ALLOW),
        ("W1_NO_VERSION", "W1", REJECT),
        ("K1_TILES", "K1", ALLOW),
        ("K4_SAVED", "K4", ALLOW),
    ],
)
def test_planted_candidates(name: str, bucket: str, verdict: str) -> None:
    result = audit(getattr(P, name))
    assert (result.bucket, result.verdict) == (bucket, verdict), result


def test_an_inferred_bucket_names_what_made_it() -> None:
    result = audit(P.K4_SAVED, declared="K1")
    assert result.reason.startswith("K4 inferred from the syntax tree (declared K1): ")
    assert "saved for backward" in result.reason and P.PATH in result.reason


def test_w2_evidence_names_file_line_and_key() -> None:
    result = audit(P.W2_ID)
    assert result.cache_keys == ("_ACT_Q_CACHE[key = id(a)] -> W2",)
    cache_lines = [e for e in result.evidence if "_ACT_Q_CACHE" in e]
    assert cache_lines and cache_lines[0].startswith(f"{P.PATH}:")
    assert "identity of activation a: fresh every step" in cache_lines[0]
    assert "declared K1 overridden by the cache found: W2" in result.evidence


def test_version_shape_dtype_do_not_make_an_activation_key_transferable() -> None:
    result = audit(P.W2_VERSIONED)
    key = result.cache_keys[0]
    assert "a._version" in key and "a.shape" in key and "a.dtype" in key
    assert result.verdict == REJECT and "never hits in training" in result.reason


def test_w1_reason_carries_the_bound() -> None:
    result = audit(P.W1_WEIGHT)
    assert "quant_time(weight)/step_time" in result.reason
    assert "_version of weight" in " ".join(result.evidence)


def test_stale_weight_cache_is_explained() -> None:
    assert "stale" in audit(P.W1_NO_VERSION).reason


def test_grouped_uniform_shortcut_is_caught_statically() -> None:
    result = audit_change(
        {P.GROUPED_PATH: P.GROUPED_INCUMBENT}, {P.GROUPED_PATH: P.GROUPED_UNIFORM}
    )
    assert result.verdict == REJECT
    text = " ".join(result.evidence)
    assert "constexpr ROWS_PER_GROUP" in text
    assert "no longer receives the tokens-per-expert tensor" in text


def test_incumbent_against_itself_is_clean() -> None:
    result = audit(P.INCUMBENT, declared=None)
    assert (result.bucket, result.verdict, result.cache_keys) == ("K1", ALLOW, ())


def test_existing_caches_are_not_blamed_on_the_change() -> None:
    before = {P.PATH: P.W2_ID}
    after = {P.PATH: P.W2_ID.replace("BLOCK_K = 64", "BLOCK_K = 32")}
    result = audit_change(before, after)
    assert (result.bucket, result.verdict, result.cache_keys) == ("K1", ALLOW, ())


def test_config_cache_on_shapes_is_allowed() -> None:
    extra = """

@functools.lru_cache(maxsize=None)
def _pick_config(M: int, N: int, K: int, dtype: torch.dtype):
    return (BLOCK_M, BLOCK_N, BLOCK_K) if M * N > 4096 else (64, 64, 64)
"""
    result = audit(P.INCUMBENT + extra, declared="K1")
    assert (result.bucket, result.verdict) == ("K1", ALLOW)
    assert result.cache_keys and result.cache_keys[0].endswith("-> config")


def test_attribute_cache_on_an_activation_is_w2() -> None:
    extra = """

def quant_act_attr(x: torch.Tensor):
    if getattr(x, "_fp8", None) is None:
        x._fp8 = quant_rowwise(x)
    return x._fp8
"""
    result = audit(P.INCUMBENT + extra)
    assert (result.bucket, result.verdict) == ("W2", REJECT)


def test_declared_bucket_used_when_the_tree_cannot_tell() -> None:
    after = P.INCUMBENT.replace("    return q, s\n", "    q = q.contiguous()\n    return q, s\n")
    assert audit(after, declared="K3").bucket == "K3"
    assert audit(after, declared=None).bucket == "K1"


def test_not_python_and_unparsable_files() -> None:
    result = audit_change({"k.cu": "x"}, {"k.cu": "y", P.PATH: P.INCUMBENT})
    assert any("not Python" in e for e in result.evidence)
    broken = audit_change({P.PATH: P.INCUMBENT}, {P.PATH: "def f(:\n"})
    assert broken.verdict == REJECT and "does not parse" in broken.reason


def test_bad_declared_bucket_and_record_validation() -> None:
    with pytest.raises(ValueError):
        audit(P.INCUMBENT, declared="K9")
    with pytest.raises(ValueError):
        StaticAudit("W4", (), (), ALLOW, "")


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("w", "weight"),
        ("weight", "weight"),
        ("w_gate", "weight"),
        ("bt", "weight"),
        ("dout", "grad_out"),
        ("grad_output", "grad_out"),
        ("a_scale", "scale"),
        ("group_lens", "routing"),
        ("x", "activation"),
        ("qa", "activation"),
        ("foo", "unknown"),
    ],
)
def test_role_heuristic(name: str, role: str) -> None:
    assert role_of(name, linear_b=True) == role


def test_b_is_a_weight_only_in_the_linear_layout_and_annotations_override() -> None:
    assert role_of("b") == "unknown"
    overrides = annotations("x = 1  # ratchet: weight=p,q activation=b\n")
    assert overrides == {"p": "weight", "q": "weight", "b": "activation"}
    assert role_of("b", linear_b=True, overrides=overrides) == "activation"


def test_key_components_and_stability() -> None:
    fn = ast.parse("key = (id(w), w._version, x.shape, x.data_ptr(), 3)").body[0].value
    reader = KeyReader({}, {"w", "x"}, set(), set(), lambda n: role_of(n))
    parts = reader.read(fn)
    kinds = [(p.kind, p.role, p.stable) for p in parts]
    assert kinds == [
        ("identity", "weight", True),
        ("version", "weight", False),
        ("meta", "activation", True),
        ("address", "activation", False),
        ("value", None, True),
    ]


def test_scan_finds_containers_and_saved_tensors() -> None:
    scan = scan_source(P.PATH, P.W1_WEIGHT)
    assert "_W_Q_CACHE" in scan.containers
    assert any("save_for_backward(a, b)" in s for s in scan.saved)
    assert "_fp8_gemm_kernel" in scan.jit_kernels


def test_a_key_part_repeated_in_the_key_is_named_once():
    before = {"k.py": "def op(inp, w):\n    return inp @ w\n"}
    after = {
        "k.py": "_C = {}\n\n\ndef op(inp, w):\n"
        "    key = (inp.data_ptr(), inp.shape, inp.data_ptr())\n"
        "    if key not in _C:\n        _C[key] = inp @ w\n    return _C[key]\n"
    }
    r = audit_change(before, after)
    assert r.verdict == "REJECT-as-overfit"
    assert r.reason.count("inp.data_ptr()") == 1, r.reason
