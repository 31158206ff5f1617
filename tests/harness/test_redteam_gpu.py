"""Red team on the GPU: the tiny GEMM's Triton kernel compiled for CUDA, timed with the
cuda_events engine. Run on the H200 with ``python -m pytest -m gpu tests/harness``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import Worker, WorkerResult, WorkerSpec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.harness.redteam_candidates"
SMALL = Shape("m64_n48_k32", M=64, N=48, K=32)  # well under 20 us: graph mode
LARGE = Shape("m1024_n1024_k512", M=1024, N=1024, K=512)  # eager mode
SEED = 917


def spec(cls: str, timeout_s: float = 180.0, **params: object) -> WorkerSpec:
    return WorkerSpec(
        source_root=str(ROOT),
        adapter=f"{MODULE}:{cls}",
        engine="cuda_events",
        engine_params={"samples": 5, "sample_ms": 20.0, "settle_max_ms": 1000.0, **params},
        device="cuda",
        interpret=False,
        timeout_s=timeout_s,
    )


def explain(r: WorkerResult) -> str:
    return f"{r.category}: {r.detail}\n--- log tail ---\n{r.log[-3000:]}"


@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=lambda s: s.label)
def test_honest_candidate_passes_on_the_gpu(tmp_path: Path, shape: Shape) -> None:
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        r = w.check(shape, SEED)
        assert r.ok, explain(r)
        assert "stream order" in r.payload["checks"]
        t = w.time(shape, SEED + 1, "fwd")
        assert t.ok, explain(t)
        p = t.payload
        # 5 samples, and 4 more where cold-L2 samples of a flush-bound op disagreed (flagged)
        disagreed = any(f.startswith("cold-L2 samples disagreed") for f in p["flags"])
        assert p["median_ms"] > 0 and len(p["samples_ms"]) == (9 if disagreed else 5), p
        if shape is SMALL:  # a ~10 us GEMM: graph mode, or eager when lost in the flush (said)
            graph = p["engine"]["mode"] == "graph"
            assert graph or any("ill-conditioned" in f for f in p["flags"]), p
        else:
            assert p["engine"]["mode"] == "eager", p["engine"]
        # 3 secret spot checks per collection of samples; a graph timing lost in the L2-flush
        # subtraction is collected again eagerly, with its own 3 (6 in all)
        retimed = any("ill-conditioned" in f for f in p["flags"])
        assert p["spot_checks"] == (6 if retimed else 3), p


@pytest.mark.parametrize(
    ("cls", "category", "reason"),
    [
        ("SideStream", "cheat", "side stream"),
        ("PatchEvent", "cheat", "torch.cuda.Event"),
        ("IdCache", "cheat", "did not follow"),
        ("DataPtrCache", "cheat", "did not follow"),
        ("CachedTensor", "cheat", "did not follow"),
        ("PartialWrite", "cheat", "did not follow"),
        ("LazySubclass", "cheat", "tensor subclass"),
        ("LowPrecision", "wrong", "SNR"),
        ("BackgroundThread", "cheat", "background thread"),
        ("IllegalMemory", "illegal_memory", "illegal memory"),
        ("CompileError", "compile", "compile"),
        ("HugeAlloc", "oom", "memory"),
    ],
)
def test_gpu_cheats_and_faults_rejected(tmp_path: Path, cls: str, category: str, reason: str):
    with Worker(spec(cls), tmp_path / "w.log") as w:
        r = w.check(LARGE, SEED)
        assert not r.ok and r.category == category, explain(r)
        assert reason in r.detail, explain(r)
        assert not w.alive


@pytest.mark.parametrize("cls", ["CachedTensor", "PartialWrite", "SkipRepeated", "DataPtrCache"])
@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=lambda s: s.label)
def test_gpu_cheats_caught_in_timed_calls(tmp_path: Path, cls: str, shape: Shape) -> None:
    with Worker(spec(cls), tmp_path / "w.log") as w:
        r = w.time(shape, SEED, "fwd")
        assert not r.ok and r.category == "cheat", explain(r)


def test_side_stream_work_is_inside_the_timing(tmp_path: Path) -> None:
    """Timed without the check: the device-wide synchronize puts the ~10 ms side work in."""
    with Worker(spec("SideStream", graph="off"), tmp_path / "w.log") as w:
        r = w.time(LARGE, SEED, "fwd")
        if r.ok:  # side streams rotate, so two calls may overlap: still far above ~0.1 ms
            assert r.payload["median_ms"] > 2.0, r.payload
        else:  # a spot check may catch it first; either way no fast time comes back
            assert r.category == "cheat", explain(r)


def test_roofline_bound_rejects_on_the_gpu(tmp_path: Path) -> None:
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        r = w.time(LARGE, SEED, "fwd", max_tflops=1e-3)
        assert r.category == "cheat" and "TFLOPS" in r.detail, explain(r)


def test_parent_holds_no_cuda_context(tmp_path: Path) -> None:
    import torch

    with Worker(spec("IllegalMemory"), tmp_path / "w.log") as w:
        assert w.check(LARGE, SEED).category == "illegal_memory"
    assert float(torch.ones(4, device="cuda").sum()) == 4.0  # our own CUDA use still works
