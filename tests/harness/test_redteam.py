"""Red team (CPU): cheating candidates around the tiny GEMM must be rejected with a reason.

Every candidate runs in its own worker process (``tests/harness/redteam_candidates.py``),
on tiny shapes with the perf_counter engine and few samples, so the file stays well under a
minute on two cores. The honest adapter must pass both ``check`` and ``time``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.worker import Worker, WorkerResult, WorkerSpec

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.harness.redteam_candidates"
POOL = "tests.harness.native_pool_at_import"
IDIOMS = "tests.harness.honest_idioms"
FLAGS = "tests.harness.flags_at_import"
INDUCTOR = "tests.harness.inductor_op"
SHAPE = Shape("m24_n20_k16", M=24, N=20, K=16)
SEED = 20240917


def spec(cls: str, timeout_s: float = 60.0) -> WorkerSpec:
    return WorkerSpec(
        source_root=str(ROOT),
        adapter=f"{MODULE}:{cls}",
        engine="perf_counter",
        engine_params={"samples": 4, "warmup": 1, "min_sample_ms": 0.2, "max_batch": 3},
        device="cpu",
        interpret=True,
        timeout_s=timeout_s,
    )


def described_worker(desc: dict) -> WorkerSpec:
    """The CPU worker's spec for an op described as in ratchet.yaml (``desc``)."""
    from kernel_ratchet.harness.described_spec import described_spec

    return dataclasses.replace(spec("TinyGemm"), adapter=described_spec(desc, "memory"))


def explain(r: WorkerResult) -> str:
    return f"{r.category}: {r.detail}\n--- log tail ---\n{r.log[-1500:]}"


def test_honest_candidate_passes_check_and_time(tmp_path: Path) -> None:
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)
        assert r.payload["passed"] and r.payload["snr"]["out"] >= 80
        assert "rebind" in r.payload["checks"]
        t = w.time(SHAPE, SEED + 1, "fwd")
        assert t.ok, explain(t)
        assert t.payload["median_ms"] > 0 and len(t.payload["samples_ms"]) == 4
        assert t.payload["spot_checks"] == 3
        assert t.payload["engine"]["engine"] == "perf_counter"
        one = w.time(SHAPE, SEED + 2, "fwd", spot_checks=1)  # what a paired round asks for
        assert one.ok and one.payload["spot_checks"] == 1, explain(one)
        assert w.alive


@pytest.mark.parametrize(
    ("cls", "category", "reason"),
    [
        ("IdCache", "cheat", "did not follow"),
        ("DataPtrCache", "cheat", "did not follow"),
        ("CachedTensor", "cheat", "did not follow"),
        ("SkipRepeated", "cheat", "did not follow"),
        ("PatchTimer", "cheat", "time.perf_counter"),
        ("PatchEngine", "cheat", "timing.engine.summarize"),
        ("PatchCudaEngine", "cheat", "cuda_support.per_call_ms"),
        ("PatchPoison", "cheat", "anticheat.poison"),
        ("PatchMatmul", "cheat", "torch.Tensor.__matmul__"),
        ("PatchMedian", "cheat", "statistics.median"),
        ("PatchRandn", "cheat", "torch.randn"),
        ("PatchJson", "cheat", "json.dumps"),  # the verdict is not written by the patch
        ("SwapCode", "cheat", "correctness.snr_db"),  # the same function object, new code
        ("CatchesTheRefusal", "cheat", "correctness.snr_db.__code__"),  # the write was seen
        ("BlindsTheSentinel", "cheat", "surface.library_rewrap"),  # the Sentinel's own judge
        ("FakeChecker", "cheat", "sys.modules['kernel_ratchet.harness.correctness']"),
        ("LowersTheBar", "cheat", "adapter.SNR_BF16"),  # a harness constant rebound
        ("PatchReplace", "cheat", "dataclasses.replace"),  # a library the harness holds
        ("PatchMin", "cheat", "builtins.min"),
        ("MutatesTheThresholds", "cheat", "MutatesTheThresholds.min_snr_db"),  # in place
        ("SwapInputs", "cheat", "case.a (another object)"),  # the rebind would skip it
        ("LazyDetach", "cheat", "0 (detach)"),  # the work in the harness's own detach()
        ("ShadowCopy", "cheat", "case.a (copy_)"),  # new values never written
        ("ShadowDouble", "cheat", "case.a (double)"),  # the reference faked by its inputs
        ("ClassSwapInputs", "cheat", "case.a (now"),
        ("ForgeWatch", "cheat", "import watch's records"),  # reachable in sys.meta_path
        ("SignalDefer", "cheat", "signal.signal(SIGALRM)"),  # work run inside the checks
        ("ShadowThreshold", "cheat", "ShadowThreshold.threshold (on the instance)"),
        ("DeferViaCase", "cheat", "tiny_gemm.adapter.Case.a (added)"),  # a property
        ("HideFields", "cheat", "did not follow"),  # the case is walked by its own storage
        ("AtenMm", "cheat", "aten::mm for CPU"),  # the reference's product through torch.library
        ("DeviceCtxMode", "cheat", "DeviceContext.__torch_function__"),
        ("AuditDefer", "cheat", "sys.addaudithook"),  # work run inside the verification
        ("DebuggerNamedThread", "cheat", "background thread"),  # no thread passes by its name
        ("RawAtenMm", "cheat", "dispatches for aten::mm"),  # below torch.library
        ("ImplsDiscard", "cheat", "dispatches for aten::mm"),  # torch.library's record removed
        ("HiddenThread", "cheat", "background thread"),  # its class says it is not alive
        ("LazySubclass", "cheat", "tensor subclass"),
        ("NonTensor", "cheat", "non-tensor"),
        ("PartialWrite", "cheat", "did not follow"),
        ("LowPrecision", "wrong", "SNR"),
        ("BackgroundThread", "cheat", "background thread"),
        ("BusyPool", "cheat", "background thread"),  # an idle pool is allowed, a busy one not
        ("NativePool", "cheat", "background thread"),
        ("ModifiesInputs", "cheat", "input modified"),
        ("NanOutput", "nan", "NaN"),
        ("RaisesOom", "oom", "out of device memory"),
    ],
)
def test_cheat_rejected_by_check(tmp_path: Path, cls: str, category: str, reason: str) -> None:
    with Worker(spec(cls), tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert not r.ok and r.category == category, explain(r)
        assert reason in r.detail, explain(r)
        assert not w.alive  # a failed worker is never reused


@pytest.mark.slow
def test_native_threads_started_while_the_project_imports_are_not_the_candidates(
    tmp_path: Path,
) -> None:
    """A library that starts a native pool when imported (an OpenMP or BLAS pool sized by the
    machine's cores) leaves idle threads that no call of the op started."""
    pool = WorkerSpec(**{**spec("TinyGemm").__dict__, "adapter": f"{POOL}:PoolAtImport"})
    with Worker(pool, tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        ("CachedTensor", "NaN poison"),
        ("PartialWrite", "NaN poison"),
        ("IdCache", "NaN poison"),
        ("DataPtrCache", "spot check"),
        ("SkipRepeated", "spot check"),
        # replaced during one sample, put back during a later one: seen between the two
        ("TogglesTheDraw", "timed_checks._draw"),
        ("UnhooksTheSamples", "TimedCallChecks.after_sample"),
        ("ClassSwapInputs", "case.a (now"),  # the timed calls' reference reads them too
        ("TupleSkip", "matches an output of the reference"),  # a comparison of nothing
    ],
)
def test_cheat_rejected_while_timing(tmp_path: Path, cls: str, reason: str) -> None:
    """The timed calls themselves are checked, not only the separate correctness call."""
    with Worker(spec(cls), tmp_path / "w.log") as w:
        r = w.time(SHAPE, SEED, "fwd")
        assert not r.ok and r.category == "cheat", explain(r)
        assert reason in r.detail, explain(r)


@pytest.mark.slow
def test_timed_calls_are_compared_with_the_spot_reference(tmp_path: Path) -> None:
    with Worker(spec("WrongSpotReference"), tmp_path / "w.log") as w:
        assert w.check(SHAPE, SEED).ok  # the correctness check keeps the full reference
        r = w.time(SHAPE, SEED, "fwd", spot_checks=1)
        assert not r.ok and r.category == "cheat" and "spot check" in r.detail, explain(r)
    with Worker(spec("CheapSpotReference"), tmp_path / "w2.log") as w:
        t = w.time(SHAPE, SEED, "fwd", spot_checks=2)
        assert t.ok and t.payload["spot_checks"] == 2, explain(t)


def test_every_timed_sample_starts_on_fresh_inputs(tmp_path: Path) -> None:
    """Not only the compared samples: a sample on the previous sample's inputs would tell the
    candidate that it is not checked."""
    with Worker(spec("SeesUnchangedInputs"), tmp_path / "w.log") as w:
        t = w.time(SHAPE, SEED, "fwd", spot_checks=1)
        assert t.ok and t.payload["spot_checks"] == 1, explain(t)


def test_faster_than_roofline_is_rejected(tmp_path: Path) -> None:
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        r = w.time(SHAPE, SEED, "fwd", max_tflops=1e-9)
        assert not r.ok and r.category == "cheat" and "TFLOPS" in r.detail, explain(r)


def test_hang_is_killed_and_classified(tmp_path: Path) -> None:
    w = Worker(spec("Hangs", timeout_s=3.0), tmp_path / "w.log")
    t0 = time.monotonic()
    r = w.check(SHAPE, SEED)
    assert r.category == "hang" and not r.ok, explain(r)
    assert "3 s" in r.detail
    assert time.monotonic() - t0 < 60
    assert not w.alive
    with pytest.raises(ProcessLookupError):
        os.kill(w.info["pid"], 0)  # the process is gone, not just abandoned
    w.close()


@pytest.mark.parametrize(("cls", "signame"), [("Aborts", "SIGABRT"), ("Segfaults", "SIGSEGV")])
def test_fatal_signal_is_a_crash_and_parent_survives(
    tmp_path: Path, cls: str, signame: str
) -> None:
    with Worker(spec(cls), tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.category == "crash" and signame in r.detail, explain(r)
        assert not w.alive
    # the parent is healthy: no exception escaped, and it can still do work of its own
    import torch

    assert float(torch.ones(3).sum()) == 3.0


def test_candidate_prints_do_not_corrupt_protocol(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    with Worker(spec("PrintsToStdout"), log) as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)
    text = log.read_text()
    assert "debug: forward called" in text and "raw fd-1 write" in text


def test_unimportable_candidate_is_a_compile_failure(tmp_path: Path) -> None:
    s = WorkerSpec(str(ROOT), "tests.harness.no_such_candidate:X", "perf_counter", {}, "cpu", True)
    with Worker(s, tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.category == "compile" and "start-up" in r.detail, explain(r)


def test_a_backward_on_the_forwards_autograd_graph_survives_its_spot_checks(
    tmp_path: Path,
) -> None:
    """A spot check writes another seed's values into the case's tensors; a backward that runs
    on the graph its forward left in the case (saved tensors the write would bump) is given a
    new forward, untimed, without the adapter having to declare ``forward_state``."""
    with Worker(spec("GraphBackward"), tmp_path / "w.log") as w:
        assert w.check(SHAPE, SEED).ok
        t = w.time(SHAPE, SEED, "bwd", spot_checks=2)
        assert t.ok and t.payload["spot_checks"] == 2, explain(t)


@pytest.mark.slow
def test_common_library_idioms_are_not_cheats(tmp_path: Path) -> None:
    """torch.compile, torch.jit.script, vmap, logging, warnings filters and an lru_cache on
    geometry, around an honest kernel, pass every check (none of them replaces what the
    Sentinel keeps or writes what a kept function runs)."""
    idioms = WorkerSpec(**{**spec("TinyGemm").__dict__, "adapter": f"{IDIOMS}:Idioms"})
    with Worker(idioms, tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)
        t = w.time(SHAPE, SEED + 1, "fwd")
        assert t.ok and t.payload["spot_checks"] == 3, explain(t)


def test_state_a_forward_leaves_in_the_case_is_not_an_input(tmp_path: Path) -> None:
    """A forward that stores new tensors in the case for its backward (every call) is honest:
    after a spot check writes new values into the inputs, the next sample's forward replaces
    that state, not an input."""
    honest = WorkerSpec(**{**spec("TinyGemm").__dict__, "adapter": f"{IDIOMS}:ForwardState"})
    with Worker(honest, tmp_path / "w.log") as w:
        t = w.time(SHAPE, SEED + 1, "fwd", spot_checks=3)
        assert t.ok and t.payload["spot_checks"] == 3, explain(t)


@pytest.mark.parametrize(
    "adapter",
    [
        # TF32 allowed at import time is the project's setting, not a cheat; flags changed by
        # a call still are (the GPU red team's cases)
        f"{FLAGS}:TinyGemm",
        # inductor keeps a thread pool for its compiles; idle, it is no work off the timed
        # path (a pool still busy when the call returns is: BusyPool)
        pytest.param(f"{INDUCTOR}:Inductor", marks=pytest.mark.slow),
    ],
)
def test_honest_project_settings_are_not_cheats(tmp_path: Path, adapter: str) -> None:
    honest = WorkerSpec(**{**spec("TinyGemm").__dict__, "adapter": adapter})
    with Worker(honest, tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert r.ok, explain(r)
        t = w.time(SHAPE, SEED + 1, "fwd")
        assert t.ok, explain(t)


def test_a_random_call_of_each_batch_is_compared(tmp_path: Path) -> None:
    """An op that computes only the last call of a batched sample: the compared call is drawn
    from the whole batch (missed with probability (1/20)**3 here)."""
    params = {"samples": 4, "warmup": 1, "min_sample_ms": 50.0, "max_batch": 20}
    tail = WorkerSpec(**{**spec("BatchTail").__dict__, "engine_params": params})
    with Worker(tail, tmp_path / "w.log") as w:
        r = w.time(SHAPE, SEED, "fwd")
        assert not r.ok and r.category == "cheat", explain(r)
        assert "spot check" in r.detail and "of 20)" in r.detail, explain(r)


def test_a_worker_gives_back_its_cached_memory_and_serves_on(tmp_path: Path) -> None:
    with Worker(spec("TinyGemm"), tmp_path / "w.log") as w:
        assert w.check(SHAPE, SEED).ok
        r = w.release()
        assert r.ok and "released" in r.detail, explain(r)
        assert w.check(SHAPE, SEED + 1).ok


def test_an_answer_channel_pointed_elsewhere_is_a_cheat(tmp_path: Path) -> None:
    """A relay below Python (the answer descriptor dup2'ed onto the candidate's pipe, a raw
    thread rewriting each answer's timings): refused, whichever side sees it first."""
    with Worker(spec("ChannelRelay"), tmp_path / "w.log") as w:
        r = w.check(SHAPE, SEED)
        assert not r.ok and r.category == "cheat", explain(r)
        assert "protocol channel" in r.detail, explain(r)


def test_a_request_rewritten_on_its_way_in_is_a_cheat(tmp_path: Path) -> None:
    """A relay on the worker's input that halves a timing request's rows: the answer names
    the digest of the line the worker read, which is not the line the tool sent."""
    with Worker(spec("RequestRelay"), tmp_path / "w.log") as w:
        assert w.check(SHAPE, SEED).ok  # passed on unchanged
        r = w.time(SHAPE, SEED + 1, "fwd")
        assert not r.ok and r.category == "cheat", explain(r)
        assert "another request than the tool sent" in r.detail, explain(r)


def test_a_patch_made_while_the_transfer_traces_run_fails_that_request(tmp_path: Path) -> None:
    """The training-idiom traces run the op too: the Sentinel's checks come after them, as
    after a check or a time request."""
    with Worker(spec("PatchMedian"), tmp_path / "w.log") as w:
        r = w.transfer(SHAPE, SEED, steps=2, repeats=2)
        assert not r.ok and r.category == "cheat" and "statistics.median" in r.detail, explain(r)


def test_an_infinite_result_the_reference_shares_passes_check_and_time(tmp_path: Path) -> None:
    """A log-sum-exp of fully masked rows is -inf in the reference and the kernel: judged
    position by position, and not taken for the NaN poison in the timed samples."""
    ops = "tests.harness.described_ops"
    desc = {
        "function": f"{ops}:masked_logsumexp_shifted",
        "reference": f"{ops}:masked_logsumexp",
        "inputs": {"x": "[M, N] float32", "mask": "[M, N] bool | rows=1"},
        "outputs": ["y"],
    }
    shape = Shape("s", M=64, N=48)
    with Worker(described_worker(desc), tmp_path / "w.log") as w:
        r = w.check(shape, SEED)
        assert r.ok, explain(r)
        t = w.time(shape, SEED + 1, "fwd")
        assert t.ok, explain(t)


@pytest.mark.parametrize(
    ("inputs", "outputs"),
    [
        ({"x": "[M, N] float32 | layout=broadcast"}, ["y"]),
        ({"x": "[M, N] float32 | layout=padded"}, ["y"]),
        ({"x": "[M, N] float32"}, {"y": "[M, N] float32 | layout=broadcast"}),
    ],
    ids=["input-broadcast", "input-padded", "dy-broadcast"],
)
def test_inputs_in_a_declared_layout_pass_check_and_time(tmp_path: Path, inputs, outputs) -> None:
    """A stride-0 or padded input (or incoming gradient) goes through every check that writes
    new values into the inputs (the rebind, the fresh inputs of each timed sample)."""
    ops = "tests.harness.described_ops"
    desc = {
        "function": f"{ops}:rms_norm",
        "reference": f"{ops}:rms_norm_ref",
        "inputs": {**inputs, "weight": "[N] float32"},
        "outputs": outputs,
        "gradients": ["x", "weight"],
    }
    with Worker(described_worker(desc), tmp_path / "w") as w:
        shape = Shape("s", M=48, N=64)
        r = w.check(shape, SEED)
        assert r.ok, explain(r)
        for phase in ("fwd", "bwd"):
            t = w.time(shape, SEED + 1, phase)
            assert t.ok, explain(t)


def test_a_case_whose_plain_values_follow_the_seed_is_timed_on_fresh_cases(tmp_path, monkeypatch):
    """No rebind is possible (the seed in the case differs), so each eager sample times the
    next seed's case itself: a result kept from an earlier sample, by identity or by value,
    is never right again (it timed one case's values throughout before, and a memo comparing
    values was accepted at 25x)."""
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("KR_SEEN", str(seen))
    s = WorkerSpec(**{**spec("X").__dict__, "adapter": "tests.harness.seeded_case_op:SeededCase"})
    with Worker(s, tmp_path / "w.log") as w:
        assert w.check(Shape("s", M=8, N=16), SEED).ok
        seen.write_text("")
        t = w.time(Shape("s", M=8, N=16), SEED + 1, "fwd")
        assert t.ok, explain(t)
    sums = seen.read_text().split()
    assert len(set(sums)) >= 4, sums  # one input per sample (4 samples), warm-up aside
