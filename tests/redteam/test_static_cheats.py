"""Red team (CPU): the static audit of one round's change, on planted versions of the tiny
GEMM's kernel file (``tests/redteam/sources.py``).

Two families the audit must flag before any benchmark:

* a **backend change**: the campaign's backend is TRITON, but the candidate routes the work to
  the vendor library (cuBLAS through ``F.linear`` / ``torch.mm``), behind a try/except or a
  branch the campaign's shapes never take, or to the project's own reference. That is not a
  kernel gain; it needs the user's explicit consent (a new campaign on another backend);
* a **content-keyed cache** (W3 generic memoization), wherever it is held: a class attribute, a
  closure, a module-level list, a ``functools`` cache, a dict keyed on sampled elements.

The backend rule needs the campaign's backend: :func:`~kernel_ratchet.guard.backend.backend_audit`
takes it (the campaign round must call it next to the static audit).
"""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.backend import backend_audit
from kernel_ratchet.guard.static_audit import ALLOW, StaticAudit, audit_change
from tests.redteam import sources as S
from tests.redteam.expect import expect_flagged


def audit(after: str) -> StaticAudit:
    return audit_change({S.PATH: S.INCUMBENT}, {S.PATH: after}, declared_bucket="K1")


def test_the_incumbent_against_itself_is_clean() -> None:
    result = audit(S.INCUMBENT)
    assert result.verdict == ALLOW and result.cache_keys == (), result


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("VENDOR_LINEAR", id="vendor-library-swap-f-linear"),
        pytest.param("TRY_EXCEPT_FALLBACK", id="try-except-fallback-to-torch"),
        pytest.param("GHOST_BRANCH", id="ghost-branch-to-torch-mm"),
        pytest.param("CALLS_REFERENCE", id="kernel-calls-the-reference"),
    ],
)
def test_a_backend_change_needs_consent(name: str) -> None:
    result = backend_audit({S.PATH: S.INCUMBENT}, {S.PATH: getattr(S, name)}, "TRITON")
    expect_flagged(result.flagged, result.reason, "backend", str(result))


def test_the_incumbent_makes_no_backend_change() -> None:
    assert not backend_audit({S.PATH: S.INCUMBENT}, {S.PATH: S.INCUMBENT}, "TRITON").flagged


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("CONTENT_CLASS_ATTR", id="content-key-class-attribute"),
        pytest.param("CONTENT_CLOSURE", id="content-key-closure-list"),
        pytest.param("CONTENT_MODULE_LIST", id="content-key-module-list"),
        pytest.param("CONTENT_LRU", id="content-key-functools-lru-cache"),
        pytest.param("CONTENT_SAMPLED", id="sampled-elements-key-in-a-dict"),
    ],
)
def test_a_content_keyed_cache_is_generic_memoization(name: str) -> None:
    result = audit(getattr(S, name))
    expect_flagged(
        result.verdict != ALLOW and result.bucket == "W3", result.reason, "memoization", str(result)
    )
