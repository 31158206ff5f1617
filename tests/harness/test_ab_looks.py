"""Paired interleaved A/B: when it looks at the samples and when it stops, the futility stop
included, and the rule it is given for both. Driven by the fake workers of
:mod:`tests.harness.fake_ab`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from kernel_ratchet.harness.ab_rule import LookDecision, SequentialRule
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired import PairedVerdict
from kernel_ratchet.scoring.paired_looks import FUTILITY_ROUNDS, PairedLooks, look_schedule
from tests.harness.fake_ab import SHAPES, FakeMachine, FakeSpec, ab


def test_a_hopeless_candidate_stops_at_the_futility_look(tmp_path):
    messages: list[str] = []
    run = ab(tmp_path, FakeSpec("cand", speed=0.7), progress=messages.append)
    d = run.decision
    assert run.rounds == FUTILITY_ROUNDS and run.early_stop and "futility stop" in run.early_stop
    assert d.status is Status.ROLLED_BACK and d.verdict_aggregate is PairedVerdict.SLOWER
    assert all(r.n_rounds == FUTILITY_ROUNDS for r in d.per_shape)
    assert any(m.startswith("A/B: futility stop after 3 rounds") for m in messages)
    assert json.loads(json.dumps(run.to_dict()))["early_stop"] == run.early_stop


def test_the_round_record_says_the_a_b_stopped_for_futility(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from kernel_ratchet.campaign.rounds import paired as paired_round

    run = ab(tmp_path, FakeSpec("cand", speed=0.7))
    monkeypatch.setattr(paired_round, "aggregates", lambda *_a: SimpleNamespace(primary_avg=100))
    table = SimpleNamespace(restrict=lambda _labels: None, rows=[])
    m = SimpleNamespace(
        campaign_type="compute_fwd",
        timing_engine="cuda_events",
        timing_params={"quantity": "kernel_time", "l2": "cold"},
    )
    c = SimpleNamespace(table=lambda _rel: table, m=m)
    labels = list(run.labels)
    rec = paired_round._to_decision(c, run, None, [], "inc.csv", "cand.csv", labels).to_dict()
    assert rec["quantity"] in (
        "kernel GPU time, CUDA-graph replay, cold L2 (flushed per call)",
        "host wall time of back-to-back calls (CPU: the Triton interpreter, no GPU)",
    )
    assert rec["status"] == "ROLLED BACK" and rec["early_stop"] == run.early_stop
    assert rec["reason"].startswith("futility stop after 3 rounds") and rec["rounds"] == 3
    assert rec["aggregate_after"] == pytest.approx(100 * run.decision.aggregate_ratio)


def test_futility_needs_every_round_and_the_step_aggregate_far_below(tmp_path):
    """No early stop for: one shape 15% slower (aggregate ~0.97); a forward 2x slower whose
    backward, twice as long, gains 60% (the combined step reads 0.92x although the geometric
    mean over phases reads 0.89x); the CPU's k_start of 3 (no look before the first)."""
    one_bad = ab(tmp_path / "a", FakeSpec("cand", speed_by={("s512", "fwd"): 0.85}))
    assert one_bad.early_stop is None and one_bad.rounds >= 10
    mixed = FakeSpec(
        "cand",
        speed_by={
            k: v for s in SHAPES for k, v in (((s.label, "fwd"), 0.5), ((s.label, "bwd"), 1.6))
        },
    )
    run = ab(
        tmp_path / "b", mixed, machine=FakeMachine(noise=0.001, drift=0.0), phases=("fwd", "bwd")
    )
    assert run.early_stop is None and run.rounds >= 10
    assert run.decision.aggregate_ratio == pytest.approx(3.0 / 3.25, rel=3e-3)
    cpu = ab(tmp_path / "c", FakeSpec("cand", speed=0.7), k_start=3, k_max=6)
    assert cpu.early_stop is None and cpu.rounds == 3


def test_futility_never_stops_a_same_or_mildly_slower_candidate_in_h200_like_noise(tmp_path):
    """Per-call noise 4.2% (the H200's worst one-round spread): A/A and a 3% slowdown never
    read 10% slower in 3 rounds out of 3 (40 trials each)."""
    for t in range(40):
        for speed in (1.0, 0.97):
            run = ab(
                tmp_path / f"{t}_{speed}",
                FakeSpec("cand", speed=speed),
                rng_seed=t,
                machine=FakeMachine(seed=t, noise=0.042, drift=0.0),
                k_max=10,
            )
            assert run.early_stop is None and run.rounds == 10


@dataclass(frozen=True)
class FakeLook:
    undecided: tuple[str, ...]
    verdict_aggregate: str = "SAME"
    aggregate_ratio: float = 1.0

    def to_dict(self) -> dict:
        return {"undecided": list(self.undecided)}


@dataclass
class FakeRule:
    """Keeps s512 undecided until the last look; no futility look unless ``futility`` says."""

    futility: int | None = None
    hopeless: str | None = None
    calls: list = field(default_factory=list)

    def looks(self, k_start: int, k_max: int) -> tuple[int, ...]:
        return (k_start, k_start + 2, k_max)

    def futility_look(self, k_start: int) -> int | None:
        return self.futility

    def futile(self, samples, campaign_type: str) -> str | None:
        self.calls.append(("futile", {k: s.n_rounds for k, s in samples.items()}))
        return self.hopeless

    def precision_drop(self, incumbent, candidate) -> str | None:
        return None

    def decide(self, samples, campaign_type: str, *, exhausted: bool, looks: int) -> FakeLook:
        rounds = {k: s.n_rounds for k, s in samples.items()}
        self.calls.append(("decide", rounds, exhausted, looks, campaign_type))
        return FakeLook(() if exhausted else ("s512",))


def test_the_run_follows_the_rule_it_is_given(tmp_path):
    """The harness measures; the caller's rule says when to look and which shapes need more."""
    rule = FakeRule()
    assert isinstance(rule, SequentialRule) and isinstance(FakeLook(()), LookDecision)
    run = ab(tmp_path / "a", FakeSpec("cand"), rule=rule, k_start=3, k_max=8)
    decided = [c[1:] for c in rule.calls if c[0] == "decide"]
    assert [d[1:] for d in decided] == [(False, 3, "compute_fwd")] * 2 + [(True, 3, "compute_fwd")]
    assert decided[0][0] == {s.label: 3 for s in SHAPES}
    assert decided[2][0] == {**{s.label: 3 for s in SHAPES}, "s512": 8}
    assert run.rounds == 8 and run.decision == FakeLook(()) and run.early_stop is None
    assert json.loads(json.dumps(run.to_dict()))["decision"] == {"undecided": []}
    stop = FakeRule(futility=2, hopeless="hopeless")
    run = ab(tmp_path / "b", FakeSpec("cand"), rule=stop, k_start=3, k_max=8)
    assert run.rounds == 2 and run.early_stop == "hopeless"
    assert [c[0] for c in stop.calls] == ["futile", "decide"] and stop.calls[1][2] is True


def test_the_scoring_rule_keeps_the_harness_contract():
    assert isinstance(PairedLooks(), SequentialRule)
    with pytest.raises(ValueError, match="k_start"):
        PairedLooks().looks(2, 40)
    assert PairedLooks().futility_look(10) == FUTILITY_ROUNDS
    assert PairedLooks().futility_look(3) is None


def test_looks_double_up_to_the_budget():
    assert look_schedule(10, 40) == (10, 20, 40)
    assert look_schedule(10, 25) == (10, 20, 25)
    assert look_schedule(10, 10) == (10,)
