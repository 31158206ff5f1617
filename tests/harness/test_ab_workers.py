"""Paired interleaved A/B on real workers (an A/A on the tiny GEMM) and on workers the round
lends it, whose early checks it reuses."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.scoring.paired_looks import PairedLooks
from tests.harness.fake_ab import SHAPES, FakeMachine, FakeSpec, FakeWorker

HAS_WORKER = importlib.util.find_spec("kernel_ratchet.harness.worker") is not None
TINY = Path(__file__).resolve().parents[2] / "examples" / "tiny_gemm"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_WORKER, reason="kernel_ratchet.harness.worker has not landed yet")
def test_real_worker_aa_on_tiny_gemm(tmp_path):
    from kernel_ratchet.harness.worker import WorkerSpec

    spec = WorkerSpec(
        source_root=str(TINY),
        adapter="tiny_gemm.adapter:TinyGemm",
        engine="perf_counter",
        engine_params={"samples": 3},
        device="cpu",
        interpret=True,
        timeout_s=120.0,
    )
    shapes = [Shape("t16", 16, 16, 16), Shape("t32x16", 32, 16, 24)]
    run = run_paired(
        spec,
        spec,
        shapes,
        phases=("fwd",),
        seed=5,
        rule=PairedLooks(),
        k_start=3,
        k_max=3,
        log_dir=tmp_path,
        rng_seed=0,
    )
    assert run.ok, run.failure and run.failure.sentence()
    assert run.rounds == 3
    assert all(len(run.times["candidate"][s.label]["fwd"]) == 3 for s in shapes)
    # The mechanics, not the false-accept rate: interpreter timings on a loaded 2-core CI
    # machine drift between the two processes, and 3 rounds cannot give a valid 95% CI (CI saw
    # an A/A read as a gain). The rate is checked in simulation (tests/scoring) and on the GPU.
    d = run.decision
    assert 0.5 < d.aggregate_ratio < 2.0, d.reason
    if d.accepted:  # only ever on a CI that excludes no gain
        assert d.aggregate_ci_low > 1.0 and d.aggregate_ratio - 1 >= d.min_detectable, d.reason
    # each request says where its time went in the worker; the spot check inside the
    # measurement, all of it inside the request's round trip
    rows = [json.loads(x) for x in (tmp_path / "timings.jsonl").read_text().splitlines()]
    for r in rows:
        st = r["stages_s"]
        assert set(st) == {"inputs", "measure", "spot", "after"}
        assert 0 < st["spot"] <= st["measure"] and min(st.values()) >= 0
        assert st["inputs"] + st["measure"] + st["after"] <= r["request_s"]


def test_checks_made_early_by_the_same_workers_are_reused_and_others_are_not(tmp_path, monkeypatch):
    """The round's workers check the A/B's shapes beside the focused test (``precheck``); the
    A/B then reuses a check only when the worker it times on made it with the A/B's seed."""
    from contextlib import nullcontext

    from kernel_ratchet.harness.paired_checks import precheck

    checked: list[tuple[str, str]] = []
    plain = FakeWorker.check

    def counted(self, shape, seed):
        checked.append((self.spec.name, shape.label))
        return plain(self, shape, seed)

    monkeypatch.setattr(FakeWorker, "check", counted)
    machine = FakeMachine()

    def pair(cand: FakeSpec, name: str) -> dict[str, FakeWorker]:
        return {
            "incumbent": FakeWorker(machine, FakeSpec("inc"), tmp_path / f"{name}-inc.log"),
            "candidate": FakeWorker(machine, cand, tmp_path / f"{name}-cand.log"),
        }

    def paired(workers, cand: FakeSpec, seed: int, early):
        lent = iter(workers.values())
        return run_paired(
            FakeSpec("inc"),
            cand,
            SHAPES,
            phases=("fwd",),
            seed=seed,
            rule=PairedLooks(),
            log_dir=tmp_path / str(seed),
            worker_factory=lambda _spec, _log: nullcontext(next(lent)),
            rng_seed=1,
            prechecked=early,
        )

    made = pair(FakeSpec("cand"), "a")
    early = precheck(made, SHAPES, 1234)
    assert len(checked) == 2 * len(SHAPES)
    run = paired(made, FakeSpec("cand"), 1234, early)
    assert run.ok and len(checked) == 2 * len(SHAPES)  # the same workers and seed: all reused
    run = paired(pair(FakeSpec("cand"), "b"), FakeSpec("cand"), 1234, early)
    assert run.ok and len(checked) == 4 * len(SHAPES)  # other workers: checked again
    run = paired(made, FakeSpec("cand"), 4321, early)
    assert run.ok and len(checked) == 6 * len(SHAPES)  # another seed: checked again
    wrong = FakeSpec("cand", failing_check=SHAPES[1].label)
    bad = pair(wrong, "c")
    early = precheck(bad, SHAPES, 99)  # stops at the first failing shape, as the A/B would
    assert [k for k in early if k[0] == "candidate"] == [("candidate", s.label) for s in SHAPES[:2]]
    run = paired(bad, wrong, 99, early)
    assert not run.ok and run.failure.side == "candidate" and run.failure.label == SHAPES[1].label


def test_a_real_worker_that_ran_out_of_memory_is_started_again(tmp_path, monkeypatch):
    """The candidate's first call runs out of device memory: the A/B asks the incumbent's
    worker to release its cache, starts a new candidate worker (its output appended to the
    same log) and makes the request again; the run then decides."""
    from kernel_ratchet.harness.worker import WorkerSpec

    monkeypatch.setenv("KR_TEST_OOM_FLAG", str(tmp_path / "ran-out-once"))
    root = str(Path(__file__).resolve().parents[2])
    common = {
        "engine": "perf_counter",
        "engine_params": {"samples": 2},
        "device": "cpu",
        "interpret": True,
        "timeout_s": 120.0,
        "source_root": root,
    }
    inc = WorkerSpec(adapter="tests.harness.redteam_candidates:TinyGemm", **common)
    cand = WorkerSpec(adapter="tests.harness.redteam_candidates:OomOnce", **common)
    said: list[str] = []
    run = run_paired(
        inc, cand, [Shape("t16", 16, 16, 16)], phases=("fwd",), seed=5, rule=PairedLooks(),
        k_start=3, k_max=3, log_dir=tmp_path, rng_seed=0, progress=said.append,
    )  # fmt: skip
    assert run.ok, run.failure and run.failure.sentence()
    assert (tmp_path / "ran-out-once").exists()
    note = next(m for m in said if "ran out of device memory" in m)
    assert "candidate's worker restarted (incumbent released" in note and "it passed" in note
    log = (tmp_path / "candidate_worker.log").read_text()
    assert "out of memory" in log.lower() and log.count("[ratchet] worker") >= 1
