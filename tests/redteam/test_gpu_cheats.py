"""Red team on the GPU: techniques whose effect needs the CUDA caching allocator, CUDA events or
the L2 cache. The tiny GEMM's Triton kernel compiled for CUDA, timed with the cuda_events engine
in eager mode (the paired A/B pins graph mode off). Run on the H200 with
``python -m pytest -m gpu tests/redteam``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import Worker, WorkerSpec
from tests.redteam.expect import CANDIDATES, ROOT, expect_rejected, explain

pytestmark = pytest.mark.gpu

LARGE = Shape("m1024_n1024_k512", M=1024, N=1024, K=512)
SEED = 4242


def gpu_spec(cls: str, timeout_s: float = 180.0) -> WorkerSpec:
    return WorkerSpec(
        source_root=str(ROOT),
        adapter=f"{CANDIDATES}:{cls}",
        engine="cuda_events",
        engine_params={"samples": 5, "sample_ms": 20.0, "settle_max_ms": 1000.0, "graph": "off"},
        device="cuda",
        interpret=False,
        timeout_s=timeout_s,
    )


def test_uninitialised_output_memory_is_caught_by_the_rebind_check(tmp_path: Path) -> None:
    """With the caching allocator the ``torch.empty`` block really holds the previous result, so
    the first comparison passes (the AI CUDA Engineer incident); the poisoned, scrubbed blocks
    of the rebind step must then expose it."""
    with Worker(gpu_spec("UninitReuse"), tmp_path / "w.log") as w:
        expect_rejected(w.check(LARGE, SEED), ("cheat", "nan"), ("did not follow", "NaN"))


def test_batch_and_skip_is_caught_while_timing_on_the_gpu(tmp_path: Path) -> None:
    with Worker(gpu_spec("PoisonAwareSkip"), tmp_path / "w.log") as w:
        r = w.check(LARGE, SEED)
        assert r.ok, explain(r)
        expect_rejected(w.time(LARGE, SEED + 1, "fwd"), "cheat", "same output")


def test_inputs_pinned_in_l2_are_rejected(tmp_path: Path) -> None:
    with Worker(gpu_spec("L2Persist"), tmp_path / "w.log") as w:
        expect_rejected(w.check(LARGE, SEED), "cheat", "persisting L2")
