"""Content-keyed caches: keys built from a tensor's values are fresh every training step."""

from __future__ import annotations

from kernel_ratchet.guard.static_audit import REJECT, audit_change

_BEFORE = """
import torch


def matmul(a, b):
    return a @ b.T
"""


def _audit(after: str):  # noqa: ANN202
    return audit_change({"k.py": _BEFORE}, {"k.py": after})


def test_a_key_of_item_values_is_content() -> None:
    after = (
        _BEFORE.replace(
            "    return a @ b.T",
            "    key = (a[0].item(), a.shape)\n"
            "    if key not in _C:\n"
            "        _C[key] = a @ b.T\n"
            "    return _C[key]",
        )
        + "\n_C = {}\n"
    )
    r = _audit(after)
    assert r.verdict == REJECT and r.bucket == "W3", r
    assert "content of activation a" in r.reason, r


def test_a_list_searched_with_eq_is_a_cache() -> None:
    after = "_SEEN = []\n" + _BEFORE.replace(
        "    return a @ b.T",
        "    key = a.numpy().tobytes()\n"
        "    for k, out in _SEEN:\n"
        "        if k == key:\n"
        "            return out\n"
        "    out = a @ b.T\n"
        "    _SEEN.append((key, out))\n"
        "    return out",
    )
    r = _audit(after)
    assert r.verdict == REJECT and r.bucket == "W3", r
    assert any("searched" in k for k in r.cache_keys), r


def test_a_constant_table_searched_by_config_is_not_a_cache() -> None:
    after = "_TABLE = [(64, 1), (128, 2)]\n" + _BEFORE.replace(
        "    return a @ b.T",
        "    for n, w in _TABLE:\n"
        "        if n == a.shape[0]:\n"
        "            return w\n"
        "    return a @ b.T",
    )
    assert _audit(after).verdict != REJECT
