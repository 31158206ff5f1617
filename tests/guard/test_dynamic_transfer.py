"""Dynamic transfer check on the CPU with the tiny example GEMM (Triton interpreter).

The planted kernels are module sources from :mod:`tests.guard.planted`, loaded as modules; a
test-local subclass of the example's adapter implements TrainingCase and calls them.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import torch

from kernel_ratchet.errors import RatchetError
from kernel_ratchet.guard.dynamic_transfer import (
    OVERFIT,
    TRANSFERS,
    judge_idioms,
    judge_worker_traces,
    simulate_training,
    weight_quant_ratio,
)
from kernel_ratchet.guard.transfer_result import DynamicResult
from kernel_ratchet.harness.adapter import Adapter, Shape
from kernel_ratchet.harness.timing.perf_counter import PerfCounterEngine
from kernel_ratchet.harness.training_sim import TrainingCase, trace_idioms
from tests.guard import planted as P

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm"))
from tiny_gemm.adapter import TinyGemm  # noqa: E402

SHAPE = Shape(label="m32_n32_k32", M=32, N=32, K=32)
#: The interpreter on a shared 2-core machine is noisy; planted effects are 100x, not 10%.
CPU_GAP = 0.5
#: Steps of each idiom per repeat, as a campaign's transfer check runs them on the CPU
#: (``campaign.rounds.transfer``: 3 steps, 5 repeats, the gap above); 8 is the GPU's.
CPU_STEPS = 3


class TrainableTinyGemm(TinyGemm):
    """The example adapter plus the TrainingCase roles: ``a`` activations, ``b`` the weight."""

    def training_roles(self, case):
        return {"a": "activation", "b": "weight"}


class RolelessGemm(Adapter):
    """An adapter without ``training_roles`` (the example's own adapter now declares them)."""

    schema = "gemm"
    min_snr_db = TinyGemm.min_snr_db

    def __init__(self) -> None:
        self._inner = TinyGemm()

    def make_case(self, shape, seed, device):
        return self._inner.make_case(shape, seed, device)

    def forward(self, case):
        return self._inner.forward(case)

    def outputs(self, case):
        return self._inner.outputs(case)

    def reference(self, case):
        return self._inner.reference(case)

    def flops(self, shape):
        return self._inner.flops(shape)


def planted_adapter(source: str, name: str) -> tuple[TrainableTinyGemm, types.ModuleType]:
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)

    class Planted(TrainableTinyGemm):
        def forward(self, case):
            return module.matmul_nt(case.a, case.b)

    return Planted(), module


def test_adapter_implements_the_protocol() -> None:
    assert isinstance(TrainableTinyGemm(), TrainingCase)
    assert not isinstance(RolelessGemm(), TrainingCase)


@pytest.mark.slow
def test_clean_kernel_transfers(device) -> None:
    result = simulate_training(
        TrainableTinyGemm(), SHAPE, device=device, steps=CPU_STEPS, min_rel_gap=CPU_GAP
    )
    assert result.verdict == TRANSFERS, result
    assert result.bench_ms > 0 and result.train_ms > 0 and result.noise_ms > 0
    assert result.hit_rate_text() == "no cache found in the kernel module"


def test_id_keyed_output_cache_is_overfit(device) -> None:
    adapter, module = planted_adapter(P.TINY_OUT_CACHE, "planted_out_cache")
    result = simulate_training(
        adapter, SHAPE, device=device, steps=CPU_STEPS, cache_modules=[module], min_rel_gap=CPU_GAP
    )
    assert result.verdict == OVERFIT, result
    # the benchmark idiom only reads the cache: far cheaper than computing (a CPU interpreter
    # call costs 10x more or so, a launch of a tiny GPU kernel about 8x)
    assert result.train_ms > 4 * result.bench_ms
    (train,) = result.train_caches
    (bench,) = result.bench_caches
    assert train.hits == 0 and train.lookups == 4  # activation cache: never hits in training
    assert bench.hits == bench.lookups == 4
    assert "training idiom slower" in result.reason


@pytest.mark.slow
def test_weight_cache_with_version_transfers_and_misses_after_each_update(device) -> None:
    adapter, module = planted_adapter(P.TINY_WEIGHT_CACHE, "planted_w1")
    result = simulate_training(
        adapter, SHAPE, device=device, steps=CPU_STEPS, cache_modules=[module], min_rel_gap=CPU_GAP
    )
    assert result.verdict == TRANSFERS, result
    (train,) = result.train_caches
    assert (train.lookups, train.stale_hits, train.fresh_hits) == (4, 0, 0)


def test_weight_cache_without_version_hits_stale(device) -> None:
    source = P.TINY_WEIGHT_CACHE.replace("(id(b), b._version, tuple(b.shape))", "id(b)")
    adapter, module = planted_adapter(source, "planted_w1_stale")
    result = simulate_training(
        adapter, SHAPE, device=device, steps=2, repeats=2, cache_modules=[module], min_rel_gap=9
    )
    assert result.verdict == OVERFIT
    (train,) = result.train_caches
    # every step after the first (the cache may still hold the benchmark case's weight then)
    assert train.stale_hits >= train.steps - 1 and "right after its update" in result.reason


def test_adapter_without_roles_is_refused() -> None:
    with pytest.raises(RatchetError, match="training_roles"):
        simulate_training(RolelessGemm(), SHAPE, device="cpu")

    class BadRole(TinyGemm):
        def training_roles(self, case):
            return {"a": "activation", "b": "bias"}

    with pytest.raises(RatchetError, match="role 'bias'"):
        simulate_training(BadRole(), SHAPE, device="cpu")


def test_op_without_weight_runs(device) -> None:
    class AllFresh(TinyGemm):
        def training_roles(self, case):
            return {"a": "activation", "b": "activation"}

    result = simulate_training(AllFresh(), SHAPE, device=device, steps=2, repeats=2, min_rel_gap=9)
    assert result.verdict == TRANSFERS


def test_custom_timer_is_used(device) -> None:
    calls = []

    def timer(fn) -> float:
        fn()
        calls.append(1)
        return 1.0

    result = simulate_training(
        TrainableTinyGemm(), SHAPE, device=device, timing=timer, repeats=2, steps=3
    )
    # once per step: 2 repeats x 2 idioms x 3 steps
    assert len(calls) == 12 and result.gap_ms == 0 and result.verdict == TRANSFERS
    with pytest.raises(RatchetError, match="timing engine repeats"):
        simulate_training(TrainableTinyGemm(), SHAPE, device=device, timing=PerfCounterEngine())


class CostedGemm(TrainableTinyGemm):
    """A test double of cost: each call adds to ``COST`` what it would take, 1.0 on fresh
    activations and 0.5 on the same tensor again (a cache that only the benchmark idiom
    hits); the simulation's preparation adds noise ten times larger."""

    def __init__(self) -> None:
        self.cost, self.last = [0.0], None

    def forward(self, case):
        self.cost[0] += 0.5 if case.a is self.last else 1.0
        self.last = case.a
        return super().forward(case)


def test_only_the_ops_calls_are_timed_so_preparation_noise_hides_nothing(monkeypatch, device):
    """A 50% benchmark-only gain under preparation noise of +-5 (a sub-millisecond op beside
    the fresh tensors' allocations): timed with the op alone, the gap is exact."""
    import random

    from kernel_ratchet.harness import training_sim

    adapter, rng = CostedGemm(), random.Random(0)
    fresh = training_sim._Simulation._fresh

    def noisy_fresh(self, src, role):
        adapter.cost[0] += rng.uniform(0.0, 10.0)
        return fresh(self, src, role)

    def cost_timer(fn):
        before = adapter.cost[0]
        fn()
        return adapter.cost[0] - before

    monkeypatch.setattr(training_sim._Simulation, "_fresh", noisy_fresh)
    result = simulate_training(adapter, SHAPE, device=device, timing=cost_timer, steps=4)
    # a benchmark trace's first call follows the other idiom's tensors: one miss in 4 steps
    assert result.bench_ms == pytest.approx((1.0 + 3 * 0.5) / 4)
    assert result.train_ms == pytest.approx(1.0)
    assert result.verdict == OVERFIT and "training idiom slower" in result.reason


def test_a_worker_answer_is_judged_as_the_traces_it_carries(device) -> None:
    """The worker sends the traces as JSON; the guard's verdict on them is the same as on the
    traces measured in process, and the summary keeps the keys a round records."""
    source = P.TINY_WEIGHT_CACHE.replace("(id(b), b._version, tuple(b.shape))", "id(b)")
    adapter, module = planted_adapter(source, "planted_w1_stale_sent")
    traces = trace_idioms(adapter, SHAPE, device=device, steps=2, repeats=2, cache_modules=[module])
    sent = json.loads(json.dumps(traces.to_payload()))
    summary = judge_worker_traces(sent, 9)
    assert summary == judge_idioms(traces, 9).to_payload()
    assert list(summary) == [
        "label",
        "steps",
        "repeats",
        "bench_ms",
        "train_ms",
        "gap_ms",
        "noise_ms",
        "verdict",
        "reason",
        "hit_rates",
    ]
    assert summary["verdict"] == OVERFIT and "right after its update" in summary["reason"]


def test_weight_quant_ratio() -> None:
    ratio = weight_quant_ratio(
        lambda w: None, torch.ones(4), 2.0, device="cpu", timing=lambda fn: (fn(), 0.5)[1]
    )
    assert ratio == pytest.approx(0.25)
    with pytest.raises(RatchetError):
        weight_quant_ratio(lambda w: None, torch.ones(4), 0.0, device="cpu")


def test_hit_rates_list_the_caches_looked_up_and_count_the_rest() -> None:
    """A kernel module's constants and the tables of paths the trace did not take are dicts
    too: they are counted in one clause, the caches either idiom looked up are each listed."""
    from kernel_ratchet.harness.cache_probe import CacheStats

    used = CacheStats("PLAN", lookups=8, hits=8, config_hits=8, steps=4)
    bench_only = CacheStats("FRESH", lookups=0, steps=4)
    idle = [CacheStats(f"TABLE{i}", steps=4) for i in range(3)]
    result = DynamicResult(
        "s", 4, 1, 1.0, 1.0, 0.0, 0.1, TRANSFERS, "", train_caches=(used, bench_only, *idle),
        bench_caches=(used, CacheStats("FRESH", lookups=4, hits=4, steps=4), *idle),
    )  # fmt: skip
    text = result.hit_rate_text()
    assert text.startswith("training PLAN: 8/8 hits over 4 steps")
    assert "training FRESH: 0/0 hits over 4 steps" in text and "benchmark idiom 4/4" in text
    assert "TABLE" not in text
    assert text.endswith("3 other module-level tables not looked up in either idiom")
