"""Shared pieces of the red-team tests: worker specs and the rejection assertions.

A red-team test asserts that a candidate is *rejected* and *why*. Two failures are kept apart:

* the candidate was accepted -- ``AssertionError``. A technique that is not caught yet is
  marked with :func:`gap` (``xfail(strict=True, raises=AssertionError)``): it stays an expected
  failure exactly as long as the hole is open, and turns into a failing XPASS the day a check
  starts rejecting it (then drop the mark);
* the candidate was rejected, but not for the expected reason -- :class:`WrongRejection`, which
  no ``gap`` mark absorbs: a broken candidate or a changed message must be looked at, never
  silently counted as "still not caught".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import WorkerResult, WorkerSpec

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = "tests.redteam.candidates"
SHAPE = Shape("m24_n20_k16", M=24, N=20, K=16)
SEED = 5150
#: CPU timing: tiny shapes, few samples, batches of up to 3 calls per sample.
CPU_TIMING = {"samples": 4, "warmup": 1, "min_sample_ms": 0.2, "max_batch": 3}


class WrongRejection(Exception):
    """The candidate was rejected, but by another check or with another reason than expected."""


def gap(missing: str) -> pytest.MarkDecorator:
    """Mark a technique that no check rejects yet; ``missing`` says what detection is missing."""
    return pytest.mark.xfail(
        strict=True, raises=AssertionError, reason=f"not caught yet: {missing}"
    )


def cpu_spec(adapter: str, timeout_s: float = 90.0, **params: object) -> WorkerSpec:
    """A CPU worker (Triton interpreter) for ``adapter`` (``module:Class``)."""
    return WorkerSpec(
        source_root=str(ROOT),
        adapter=adapter if ":" in adapter else f"{CANDIDATES}:{adapter}",
        engine="perf_counter",
        engine_params={**CPU_TIMING, **params},
        device="cpu",
        interpret=True,
        timeout_s=timeout_s,
    )


def explain(r: WorkerResult) -> str:
    return f"{r.category}: {r.detail}\n--- log tail ---\n{r.log[-1500:]}"


def expect_rejected(
    r: WorkerResult, categories: str | tuple[str, ...], reasons: str | tuple[str, ...]
) -> None:
    """``r`` must be a failure of one of ``categories`` whose detail holds one of ``reasons``
    (several only where the technique's effect depends on allocator state)."""
    allowed = (categories,) if isinstance(categories, str) else categories
    texts = (reasons,) if isinstance(reasons, str) else reasons
    assert not r.ok, f"accepted ({r.detail}): the technique is not caught"
    if r.category not in allowed or not any(t in r.detail for t in texts):
        raise WrongRejection(f"expected {allowed} with one of {texts}, got {explain(r)}")


def expect_flagged(flagged: bool, why: str, reason: str, context: str) -> None:
    """For checks that return a verdict, not a worker result: ``flagged`` must hold, and the
    text ``why`` must hold ``reason``. ``context`` is printed on failure."""
    assert flagged, f"not flagged: {context}"
    if reason not in why:
        raise WrongRejection(f"flagged without {reason!r}: {why}\n{context}")
