"""A worker forgets the autotuned configs its checks picked beside other GPU work, so that its
first timing request picks them again alone; configs picked in timing requests are kept.

The autotuners are real Triton ones; their choices are written into their caches by hand, as
a launch would (launching needs a GPU)."""

from __future__ import annotations

from pathlib import Path

import triton
import triton.language as tl

from kernel_ratchet.harness.autotune_alone import TunedAlone, autotuners


@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"])
@triton.jit
def _double(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


def _pick(key: tuple, config: int = 0) -> None:
    _double.cache[key] = _double.configs[config]


def test_configs_picked_during_checks_are_picked_again_before_timing():
    for tuner in autotuners():  # other tests' kernels in this process start clean too
        tuner.cache.clear()
    assert _double in autotuners()
    tuning = TunedAlone()
    _pick((100, "torch.float32"))  # the first check's launch, beside the focused test
    tuning.after_check()
    assert tuning.before_timing() == 1 and _double.cache == {}
    _pick((100, "torch.float32"), 1)  # the timing request picked it again, alone
    tuning.after_timing()
    assert tuning.before_timing() == 0  # no check since: nothing forgotten
    _pick((4096, "torch.float32"))  # a later check (the full level) picks a new key
    tuning.after_check()
    assert tuning.before_timing() == 1  # only the key picked beside other work
    assert _double.cache == {(100, "torch.float32"): _double.configs[1]}


def test_a_worker_that_never_checked_forgets_nothing():
    for tuner in autotuners():
        tuner.cache.clear()
    tuning = TunedAlone()
    _pick((7, "torch.float32"))
    assert tuning.before_timing() == 0 and len(_double.cache) == 1
    tuning.after_timing()
    tuning.after_check()
    assert tuning.before_timing() == 0  # picked in a timing request: kept after a check


def test_a_worker_picks_again_alone_what_its_check_autotuned(tmp_path):
    from kernel_ratchet.harness.adapter import Shape
    from kernel_ratchet.harness.worker import Worker, WorkerSpec

    spec = WorkerSpec(
        source_root=str(Path(__file__).resolve().parents[2]),
        adapter="tests.harness.autotuned_candidate:AutotunedCopy",
        engine="perf_counter",
        engine_params={"samples": 2, "warmup": 1, "min_sample_ms": 0.2, "max_batch": 2},
        device="cpu",
        interpret=True,
        timeout_s=120.0,
    )
    shape = Shape("m8_n40_k16", M=8, N=40, K=16)
    with Worker(spec, tmp_path / "w.log") as w:
        assert w.check(shape, 1).ok
        assert w.time(shape, 2, "fwd").ok  # forgets the check's pick, picks it alone
        assert w.time(shape, 3, "fwd").ok  # picked in a timing request: kept
    log = (tmp_path / "w.log").read_text()
    assert log.count("1 autotuned config(s) picked during checks: picked again alone") == 1, log
