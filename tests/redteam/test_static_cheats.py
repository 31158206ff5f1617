"""Red team (CPU): the static audit of one round's change, on planted versions of the tiny
GEMM's kernel file (``tests/redteam/sources.py``).

Two families the audit must flag before any benchmark:

* a **backend change**: the campaign's backend is TRITON, but the candidate routes the work to
  the vendor library (cuBLAS through ``F.linear`` / ``torch.mm``), behind a try/except or a
  branch the campaign's shapes never take, or to the project's own reference. That is not a
  kernel gain; it needs the user's explicit consent (a new campaign on another backend);
* a **content-keyed cache** (W3 generic memoization), wherever it is held: a class attribute, a
  closure, a module-level list, a ``functools`` cache, a dict keyed on sampled elements.

When the backend check exists it needs the campaign's backend: pass it in :func:`audit`.
"""

from __future__ import annotations

import pytest

from kernel_ratchet.guard.static_audit import ALLOW, StaticAudit, audit_change
from tests.redteam import sources as S
from tests.redteam.expect import expect_flagged, gap

_NO_BACKEND_CHECK = gap(
    "audit_change has no backend rule: it does not know the campaign's backend and does not "
    "look for vendor-library calls (torch.matmul/mm/bmm/addmm/linear, F.linear, torch._scaled_mm, "
    "cuBLAS/cuDNN bindings) or calls into the project's reference added in a TRITON kernel file"
)


def audit(after: str) -> StaticAudit:
    return audit_change({S.PATH: S.INCUMBENT}, {S.PATH: after}, declared_bucket="K1")


def test_the_incumbent_against_itself_is_clean() -> None:
    result = audit(S.INCUMBENT)
    assert result.verdict == ALLOW and result.cache_keys == (), result


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("VENDOR_LINEAR", id="vendor-library-swap-f-linear", marks=_NO_BACKEND_CHECK),
        pytest.param(
            "TRY_EXCEPT_FALLBACK", id="try-except-fallback-to-torch", marks=_NO_BACKEND_CHECK
        ),
        pytest.param("GHOST_BRANCH", id="ghost-branch-to-torch-mm", marks=_NO_BACKEND_CHECK),
        pytest.param("CALLS_REFERENCE", id="kernel-calls-the-reference", marks=_NO_BACKEND_CHECK),
    ],
)
def test_a_backend_change_needs_consent(name: str) -> None:
    result = audit(getattr(S, name))
    expect_flagged(result.verdict != ALLOW, result.reason, "backend", str(result))


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
