"""Red team (CPU): caches keyed on the *content* of the inputs, and batch-and-skip, against the
real-training transfer guard's simulation (benchmark idiom vs training idiom, in a worker).

The worker's own checks cannot see a content-keyed cache that returns a fresh copy of a right
answer (rebinding new values is a cache miss, so the result follows; see ``anticheat``'s known
limit). In training every activation is new, so such a cache never hits: the guard's timing of
both idioms is the check that must reject it, whatever container holds the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel_ratchet.guard.dynamic_transfer import judge_worker_traces
from kernel_ratchet.harness.worker import Worker
from tests.redteam.expect import SEED, SHAPE, cpu_spec, expect_flagged, explain
from tests.redteam.planted_adapters import module_name

PLANTED = "tests.redteam.planted_adapters"
#: The campaign's CPU settings (``transfer_round``): 4 steps, a 50% noise floor; 5 repeats
#: instead of 3 so the noise estimate of the honest control stays well below that floor.
STEPS, REPEATS, FLOOR = 4, 5, 0.5


def simulate(tmp_path: Path, adapter: str, source: str | None) -> dict[str, Any]:
    modules = (module_name(source),) if source else ()
    with Worker(cpu_spec(adapter), tmp_path / "w.log") as w:
        r = w.transfer(SHAPE, SEED, steps=STEPS, repeats=REPEATS, cache_modules=modules)
    assert r.ok, explain(r)
    return judge_worker_traces(r.payload, FLOOR)


def test_the_honest_kernel_transfers(tmp_path: Path) -> None:
    p = simulate(tmp_path, f"{PLANTED}:Incumbent", "INCUMBENT")
    assert p["verdict"] == "TRANSFERS", p


@pytest.mark.parametrize(
    ("adapter", "source"),
    [
        pytest.param("ContentSampled", "CONTENT_SAMPLED", id="sampled-elements-key-in-a-dict"),
        pytest.param("ContentClassAttr", "CONTENT_CLASS_ATTR", id="content-key-class-attribute"),
        pytest.param("ContentClosure", "CONTENT_CLOSURE", id="content-key-closure-list"),
        pytest.param("ContentModuleList", "CONTENT_MODULE_LIST", id="content-key-module-list"),
        pytest.param("ContentLru", "CONTENT_LRU", id="content-key-functools-lru-cache"),
    ],
)
@pytest.mark.slow
def test_a_content_keyed_cache_does_not_transfer(tmp_path: Path, adapter: str, source: str) -> None:
    p = simulate(tmp_path, f"{PLANTED}:{adapter}", source)
    expect_flagged(p["verdict"] == "OVERFIT", p["reason"], "training idiom slower", str(p))


def test_batch_and_skip_does_not_pass_the_transfer_guard(tmp_path: Path) -> None:
    p = simulate(tmp_path, "PoisonAwareSkip", None)
    expect_flagged(p["verdict"] == "OVERFIT", p["reason"], "output", str(p))
