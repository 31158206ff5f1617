"""A recorded campaign on disk, built from the typed records (no GPU, no subprocess).

Round 1 is the BASELINE; then, round by round: every third round (3, 6, ...) is rolled back
by its paired A/B, round 4 fails its focused test (no decision: its forest plot, diff and
times are not recorded), round 7 is a REHEARSAL whose timings would accept (rolled back) and
the others are accepted with a paired gain of +2% (CI at LEVEL) and a time-weighted step
gain of +3%, one shape unresolved. Rounds are search moves (``module:BLOCK_M=<v>``).
:class:`Expected` says what the page must show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.fsutil import atomic_write_json, atomic_write_text
from kernel_ratchet.campaign.manifest import Manifest
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.campaign.round_decision import RoundDecision, ShapeResult
from kernel_ratchet.campaign.state import ClosedEntry, Phase, State, Termination
from kernel_ratchet.guard.static_audit import StaticAudit
from kernel_ratchet.harness.csv_schema import get_schema, write_csv
from kernel_ratchet.scoring.decision import Status
from tests.decisions import paired_decision

SHAPES = [
    (f"m{m}_n{n}_k{k}", m, n, k)
    for m, n, k in ((128, 256, 64), (512, 512, 512), (1000, 777, 300), (64, 4096, 128))
]
GAIN = 0.02
CI = (0.01, 0.03)
LEVEL = 0.9  # the paired CIs' level (the headline rescales it to 95%)
WEIGHTED = 0.03  # the time-weighted step's gain, CI +-0.012
QUANTITY = "kernel GPU time, CUDA-graph replay, cold L2 (flushed per call)"
UNRESOLVED = SHAPES[2][0]
SCHEMA = get_schema("gemm")
#: Round 1's ``round.json`` as the campaign writes it.
BASELINE = {
    "round": 1,
    "status": "BASELINE",
    "category": "baseline",
    "hypothesis": "Baseline measurement",
    "level": "full",
    "csv": "rounds/round-1/artifacts/benchmark.csv",
    "reason": "baseline",
}

#: The tests round-4 failed (one id holds markup: it is shown as text).
FAILED_TESTS = tuple(f"tests/test_k.py::test_q[s{i}]" for i in range(4)) + ("tests/t.py::u[<b>]",)


def write_record(path: Path, rec: RoundRecord) -> None:
    """``round.json`` as the campaign writes it (without its fsync: hundreds of rounds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec.to_dict()))


@dataclass(frozen=True)
class Expected:
    rounds: int
    accepted: int
    rolled_back_paired: int
    rehearsals: int
    no_decision: int
    moves: int


def _manifest(name: str) -> Manifest:
    return Manifest(
        target_op="gemm_bf16",
        target_backend="TRITON",
        target_lang="triton",
        target_gpu="H200",
        execution_mode="repo",
        project_skill="/nonexistent/ratchet.yaml",
        performance_target=None,
        primary_metric="Forward TFLOPS",
        target_shapes=[{"label": s, "B": 1, "M": m, "N": n, "K": k} for s, m, n, k in SHAPES],
        kernel_source=["pkg/kernel.py"],
        test_command="pytest -q",
        benchmark_command="bench",
        quick_command="python quick_test_bench.py",
        representative_shapes=[s[0] for s in SHAPES[:3]],
        git_commit=True,
        git_branch="auto",
        max_iterations=119,
        created="2030-01-01 00:00",
        campaign=name,
        campaign_type="compute_fwd",
        adapter="pkg.adapter:Gemm",
        shape_set="pkg.shapes:S",
        rebuild_command=None,
        timing_engine="cuda_events",
        timing_params={"samples": 20},
        seed=0,
        regression_threshold=0.05,
        starting_commit="abc",
        branch_name=f"optimize/{name}",
        csv_schema={"name": "gemm", "header": SCHEMA.header, "sha256": SCHEMA.header_sha256},
    )


def _csv(path: Path, speed: float) -> None:
    rows = []
    for label, m, n, k in SHAPES:
        tflops = 400.0 * speed * (1 + (m % 7) / 10)
        ms = 2 * m * n * k / (tflops * 1e12) * 1e3
        rows.append(
            [label, 1, m, n, k, "PASS", tflops, 1.0, None, None, ms, None, 40.0, None, None]
        )
    write_csv(path, SCHEMA, rows)


def _decision(n: int, gain: float) -> RoundDecision:
    status = Status.ACCEPTED if gain > 0 else Status.ROLLED_BACK
    shapes = tuple(
        ShapeResult(
            s[0],
            None,
            None,
            gain + i / 1000,
            0.01,
            "FASTER" if gain > 0 else "SAME",
            (gain - 0.01, gain + 0.01 + i / 1000),
            5,
        )
        for i, s in enumerate(SHAPES[:3])
    )
    return paired_decision(
        status,
        gain,
        reason=f"round-{n} paired ratio {1 + gain:.4f}x",
        per_shape=shapes,
        rounds=5,
        min_detectable=0.005,
        ci_level=LEVEL,
        time_weighted=_weighted(WEIGHTED if gain > 0 else -WEIGHTED),
        unresolved=(UNRESOLVED,),
        quantity=QUANTITY,
        harness_only={"gain": gain / 2, "status": status.value, "reason": "single runs"},
    )


def _weighted(gain: float) -> dict:
    ratio = 1 + gain
    return {
        "ratio": ratio,
        "ci_low": ratio - 0.012,
        "ci_high": ratio + 0.012,
        "level": 0.95,
        "incumbent_ms": 2.0,
        "candidate_ms": 2.0 / ratio,
        "weights": {s[0]: 1.0 for s in SHAPES[:3]},
    }


def _round(n: int, incumbent: int) -> tuple[RoundRecord, str]:
    """Round ``n``'s record and a short description of its fate."""
    common = {
        "round": n,
        "hypothesis": f"BLOCK_M tried in round {n}",
        "bucket": "K1",
        "started": "2030-01-01 01:00",
        "finished": "2030-01-01 01:05",
        "direction": f"module:BLOCK_M={16 * n}",
        "incumbent_round": incumbent,
        "test_command": "pytest -q",
    }
    if n == 4:
        return RoundRecord(
            status=Status.ROLLED_BACK,
            category=Category.TEST,
            reason="focused test failed",
            failed_tests=FAILED_TESTS,
            **common,
        ), "test"
    csv = f"rounds/round-{n}/artifacts/benchmark.csv"
    static = StaticAudit("K1", ("only constants changed",), (), "ALLOW", "K1 confirmed")
    secs = {"test": 3.0, "harness_quick": 10.0, "ab_quick": 40.0 + n, "measure": 53.0 + n}
    if n % 3 == 0:
        rec = RoundRecord(
            status=Status.ROLLED_BACK,
            category=Category.NO_GAIN,
            csv=csv,
            decision=_decision(n, -GAIN),
            seconds=secs,
            transfer_static=static,
            reason=f"round-{n} no gain",
            **common,
        )
        return rec, "rolled"
    rec = RoundRecord(
        status=Status.ACCEPTED,
        category=Category.OK,
        csv=csv,
        seconds=secs,
        decision=_decision(n, GAIN),
        transfer_static=static,
        reason=f"round-{n} faster",
        **common,
    )
    if n == 7:
        return rec.as_rehearsal(), "rehearsal"
    return rec, "accepted"


def build_campaign(
    root: Path,
    n_rounds: int,
    *,
    name: str = "gemm_bf16_TRITON_H200_20300101",
    finished: bool = True,
) -> tuple[Path, Expected]:
    """Write a campaign of ``n_rounds`` closed rounds under ``root``; returns its directory."""
    cdir = root / name
    _manifest(name).save(cdir)
    base = RoundRecord.from_dict(BASELINE)
    write_record(cdir / "rounds/round-1/round.json", base)
    _csv(cdir / "rounds/round-1/artifacts/benchmark.csv", 1.0)
    closed = [
        ClosedEntry(
            1,
            Status.BASELINE,
            "full",
            Category.BASELINE,
            base.hypothesis,
            vs_baseline=0.0,
            paired_chain=None,
        )
    ]
    inc, chain, fates = 1, 1.0, []
    for n in range(2, n_rounds + 1):
        rec, fate = _round(n, inc)
        fates.append(fate)
        write_record(cdir / f"rounds/round-{n}/round.json", rec)
        pc = None
        if rec.decision is not None:
            pc = chain * (1 + rec.decision.gain) - 1
            _csv(cdir / rec.csv, 1 + pc)
            atomic_write_text(
                cdir / f"rounds/round-{n}/artifacts/candidate.diff",
                f"-BLOCK_M = 16\n+BLOCK_M = {16 * n}\n</script><b>x</b>\n",
            )
        commit = f"c{n:04d}" if fate == "accepted" else None
        closed.append(
            ClosedEntry(
                n,
                rec.status,
                "quick",
                rec.category,
                rec.hypothesis,
                gain=rec.gain,
                vs_baseline=None if pc is None else pc * 0.9,
                paired_chain=pc,
                commit=commit,
                finished=rec.finished,
                rehearsal=rec.label if rec.rehearsal else None,
            )
        )
        if fate == "accepted":
            inc, chain = n, 1 + pc
    term = Termination("T4", "2030-01-02 00:00", "stopped") if finished else None
    State(
        phase=Phase.TERMINATED if finished else Phase.OPTIMIZING,
        next_round=n_rounds + 1,
        incumbent_round=inc,
        closed=closed,
        termination=term,
    ).save(cdir)
    atomic_write_json(
        cdir / "profiles/ceilings.json",
        {
            "device": "NVIDIA H200",
            "label": "GPU",
            "matrix_tflops": {"bf16": 800.0, "fp32": 60.0},
            "copy_gbps": 4000.0,
            "measured": "2030-01-01 00:00",
        },
    )
    atomic_write_json(
        cdir / "rounds/round-1/artifacts/provenance.json",
        {
            "device": "cuda",
            "gpu": {"name": "NVIDIA H200"},
            "versions": {"torch": "2.11", "triton": "3.6"},
        },
    )
    if finished:
        atomic_write_text(cdir / "report.md", "## Final report\n<script>alert(1)</script>\n")
    exp = Expected(
        rounds=n_rounds,
        accepted=fates.count("accepted"),
        rolled_back_paired=fates.count("rolled"),
        rehearsals=fates.count("rehearsal"),
        no_decision=fates.count("test"),
        moves=n_rounds - 1,
    )
    return cdir, exp
