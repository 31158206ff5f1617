"""The paired A/B decision of a round (SPEC section 6).

Incumbent (the ``.incumbent`` worktree) and candidate (the working tree) run in two isolated
worker processes, alternated in shuffled order over adaptive rounds, with a fresh secret input
seed per round; the decision comes from bootstrap confidence intervals of per-round speed
ratios (``kernel_ratchet.scoring.paired``). Any single-shape gain above 1.5x is re-measured
in fresh processes before it counts. The round's CSV stays the candidate's harness output.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.fsutil import atomic_write_json
from kernel_ratchet.campaign.lineage.worktree import incumbent_tree
from kernel_ratchet.campaign.round_decision import RoundDecision, ShapeResult
from kernel_ratchet.campaign.rounds.paired_times import paired_values, phase_times
from kernel_ratchet.guard.backend import KERNEL_BACKENDS
from kernel_ratchet.harness.ab import run_paired
from kernel_ratchet.harness.adapter import Shape
from kernel_ratchet.harness.level_timing import MEMORY_TIMING
from kernel_ratchet.harness.paired_checks import Prechecked
from kernel_ratchet.harness.paired_run import PairedRun
from kernel_ratchet.harness.pinning import paired_cpus
from kernel_ratchet.harness.timing.quantity import DEFAULT as DEFAULT_MEASURE
from kernel_ratchet.harness.timing.quantity import Measure, engine_measure, of_params
from kernel_ratchet.harness.worker import WorkerSpec
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import aggregates
from kernel_ratchet.scoring.paired_looks import PairedLooks
from kernel_ratchet.scoring.precision import MARGIN_DB, precision_drops

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def _cuda() -> bool:
    """Whether rounds time on a CUDA GPU (torch imported here: readers of records need none)."""
    import torch

    return torch.cuda.is_available()


#: Rounds of the adaptive paired loop: a first look after 10, up to 40 while ambiguous.
K_START, K_MAX = 10, 40
#: The first look of a campaign that measures kernel time by graph replay, whose per-round
#: noise is 0.1-1% per shape on an H200: after 5 rounds the rule keeps its tables there (the
#: fla-graph, norm-graph and gemm-graph presets of ``rule_sim``: 0 false accepts in 200 A/A
#: trials, every 3% slowdown rolled back, every 5% gain accepted), in half the time.
K_START_GRAPH = 5
#: On the CPU (Triton interpreter, rehearsal only) fewer rounds: large effects, slow calls.
K_START_CPU, K_MAX_CPU = 3, 6
#: CPU timing per paired round: one short call of a few samples (the round is the sample). Each
#: sample lasts at least 5 ms (a batch of calls): single interpreter calls of ~1 ms were noisy
#: enough for a clean-clone CI run to read a clearly faster candidate as too noisy to confirm.
CPU_PAIRED_TIMING = {"warmup": 1, "samples": 3, "min_sample_ms": 5.0}
#: GPU timing per paired round: two short timed calls after the clock settles, over the
#: campaign's frozen parameters (its quantity decides the graph mode, the same on both sides).
#: Memory-bound ops time as :data:`~kernel_ratchet.harness.level_timing.MEMORY_TIMING` says;
#: compute-bound ones keep 50 ms samples to average their clocks' swings under the power limit
#: (bf16 GEMM A/A on an H200: 1.8-3.5% at 20 ms, 0.8-1.9% at 50 ms).
GPU_PAIRED_TIMING = {"samples": 2, "sample_ms": 50.0, "settle_max_ms": 1000.0}
SUSPICIOUS_RATIO = 1.5  # a single-shape gain above this is re-measured in fresh processes
CALIBRATION = "calibration.json"


def gpu_paired_timing(campaign_type: str) -> dict[str, Any]:
    """The paired A/B's GPU timing parameters for a campaign of ``campaign_type``."""
    return {**GPU_PAIRED_TIMING, **(MEMORY_TIMING if campaign_type == "memory" else {})}


def paired_settings(
    cuda: bool, measure: Measure = DEFAULT_MEASURE, campaign_type: str = "compute_fwd"
) -> tuple[dict[str, Any], int, int]:
    """(timing parameters, first look, round budget) of a round's A/B measuring ``measure``."""
    if cuda:
        first = K_START_GRAPH if measure.quantity == "kernel_time" else K_START
        return {**gpu_paired_timing(campaign_type), **measure.to_dict()}, first, K_MAX
    return dict(CPU_PAIRED_TIMING), K_START_CPU, K_MAX_CPU


def campaign_measure(c: CampaignContext) -> Measure:
    """The quantity the campaign froze in its timing parameters (the default when none)."""
    found = engine_measure(c.m.timing_params.get("quantity"), c.m.timing_params.get("l2"))
    return found or DEFAULT_MEASURE


def _specs(c: CampaignContext) -> tuple[WorkerSpec, WorkerSpec]:
    common = _common_spec(c)
    return WorkerSpec(source_root=str(incumbent_tree(c)), **common), WorkerSpec(
        source_root=str(c.root), **common
    )


def candidate_spec(c: CampaignContext) -> WorkerSpec:
    """The candidate's worker spec alone (no incumbent tree is prepared)."""
    return WorkerSpec(source_root=str(c.root), **_common_spec(c))


def _common_spec(c: CampaignContext) -> dict[str, Any]:
    if not (cuda := _cuda()):
        params = paired_settings(cuda)[0]
    elif c.m.timing_engine == "cuda_events":  # the campaign's frozen quantity, both sides
        params = {**c.m.timing_params, **gpu_paired_timing(c.m.campaign_type)}
    else:
        params = dict(c.m.timing_params)
    common = {
        "adapter": c.m.adapter,
        "engine": c.m.timing_engine,
        "engine_params": params,
        "device": "cuda" if cuda else "cpu",
        "interpret": not cuda,
        "cpus": paired_cpus() if cuda else (),
    }
    return common


def measured_quantity(c: CampaignContext) -> str:
    """What this campaign's paired A/B measures, named."""
    engine = c.m.timing_engine if _cuda() else "perf_counter"
    return of_params(engine, c.m.timing_params)


def _phases(c: CampaignContext) -> list[str]:
    """The phases the BASELINE timed on its passing shapes; where it passed none (declared
    wrong on every shape), those of the fix's full validation that made the incumbent."""
    rows = [r for r in c.baseline_table().rows if r.passed]
    if not rows and c.state.incumbent_full_csv:
        rows = [r for r in c.table(c.state.incumbent_full_csv).rows if r.passed]
    has_bwd = any(not math.isnan(r.bwd_ms) for r in rows)
    return ["fwd", "bwd"] if has_bwd else ["fwd"]


def min_detectable(c: CampaignContext) -> float:
    """The smallest gain this machine can tell from noise (``ratchet calibrate``; 0 before it)."""
    path = c.dir / CALIBRATION
    if not path.exists():
        return 0.0
    return float(json.loads(path.read_text())["min_detectable_effect"])


def _weights(c: CampaignContext) -> tuple[tuple[str, float], ...]:
    """The profile's per-shape weights of the time-weighted effect (1 where absent)."""
    return tuple(sorted(c.op.weights.items()))


def _time_kwargs(c: CampaignContext) -> dict[str, float]:
    """Roofline anti-cheat: a shape faster than the machine's peak is rejected."""
    if not c.m.hardware_peak:
        return {}
    key = "max_gbps" if c.m.campaign_type == "memory" else "max_tflops"
    return {key: float(c.m.hardware_peak) * 1.05}


def run_ab(
    c: CampaignContext,
    labels: list[str],
    log_dir: Path,
    *,
    secret: int | None = None,
    rng_seed: int | None = None,
    single_look: bool = False,
    a_a: bool = False,
    worker_factory: Callable[..., Any] | None = None,
    prechecked: Prechecked | None = None,
) -> PairedRun:
    """Paired A/B of incumbent vs candidate on ``labels`` (``single_look``: k_start rounds
    only, for the fresh-process confirmation of a suspiciously large gain; ``a_a``: the
    incumbent against itself, for calibration; ``worker_factory``: where the workers come
    from, fresh processes by default)."""
    by = {s["label"]: s for s in c.m.target_shapes}
    shapes = [Shape.from_dict(by[x]) for x in labels]
    inc, cand = _specs(c)
    if a_a:
        cand = inc
    _, k_start, k_max = paired_settings(_cuda(), campaign_measure(c))
    k_max = k_start if single_look else k_max
    run = run_paired(
        inc,
        cand,
        shapes,
        phases=_phases(c),
        seed=secret or secrets.randbits(63),
        rule=PairedLooks(
            c.m.regression_threshold,
            min_detectable(c),
            weights=_weights(c),
            precision_margin_db=math.inf if c.op.allow_precision_drop else MARGIN_DB,
            fix=bool(c.state.pending and c.state.pending.fix and not a_a),
        ),
        k_start=k_start,
        k_max=k_max,
        log_dir=log_dir,
        rng_seed=rng_seed,
        progress=c.say,
        campaign_type=c.m.campaign_type,
        time_kwargs=_time_kwargs(c),
        worker_factory=worker_factory,
        prechecked=prechecked,
        refuse_vendor_ops=c.m.target_backend in KERNEL_BACKENDS,
    )
    return portable_run(run, c)


def portable_run(run: PairedRun, c: CampaignContext) -> PairedRun:
    """``run`` with its worker logs named from the campaign directory, as the round's other
    records name their files."""
    logs = {side: c.rel(Path(log)) for side, log in run.logs.items()}
    f = run.failure
    failure = replace(f, log_path=c.rel(Path(f.log_path))) if f is not None else None
    return replace(run, logs=logs, failure=failure)


@dataclass(frozen=True)
class PairedFailure:
    """A paired A/B that ended on a worker failure: the candidate's (its worker category) or
    the incumbent's (category ``incumbent``: infrastructure, not the candidate)."""

    category: Category
    reason: str
    failure: dict[str, Any]


def paired_decision(
    c: CampaignContext,
    n: int,
    art: Path,
    cand_rel: str,
    inc_rel: str,
    worker_factory: Callable[..., Any] | None = None,
    secret: int | None = None,
    prechecked: Prechecked | None = None,
) -> RoundDecision | PairedFailure:
    """Measure and decide; returns the round's decision (or the failure that ended the A/B).
    ``worker_factory``: the round's workers for the A/B (never for the fresh-process
    confirmation of a suspiciously large gain); ``secret`` (None: drawn now) and
    ``prechecked``: the correctness checks those workers made early with it."""
    fails, secret = c.incumbent_fails(inc_rel), secrets.randbits(63) if secret is None else secret
    labels = [r.label for r in c.table(cand_rel).rows if r.label not in fails]  # as judged
    cpus = paired_cpus() if _cuda() else ()
    where = f", both workers on CPU {','.join(map(str, cpus))}" if cpus else ""
    c.say(
        f"round-{n}: paired A/B, incumbent vs candidate, {len(labels)} shapes, "
        f"measuring {measured_quantity(c)}{where}"
    )
    run = run_ab(
        c,
        labels,
        art / "paired",
        secret=secret,
        worker_factory=worker_factory,
        prechecked=prechecked,
    )
    suspicious = []
    if run.ok:
        suspicious = [s.label for s in run.decision.per_shape if s.ratio > SUSPICIOUS_RATIO]
    confirm = None
    if suspicious and not _cuda():
        # on the CPU, interpreter timings drift by tens of percent between processes, so a
        # fresh-process re-measurement would judge the machine, not the candidate
        c.say(
            f"round-{n}: gains above {SUSPICIOUS_RATIO}x on {suspicious}: fresh-process "
            "confirmation skipped on the CPU (Triton interpreter timings)"
        )
        suspicious = []
    if suspicious:
        c.say(
            f"round-{n}: gains above {SUSPICIOUS_RATIO}x on {suspicious}: re-measuring in "
            "fresh processes"
        )
        confirm = run_ab(c, suspicious, art / "paired_confirm", single_look=True)
    atomic_write_json(
        art / "paired.json",
        {
            "secret_seed": secret,
            "run": run.to_dict(),
            "confirmation": confirm.to_dict() if confirm else None,
        },
    )
    return _to_decision(c, run, confirm, suspicious, inc_rel, cand_rel, labels)


def unconfirmed_shapes(first_rows, again_rows, suspicious: list[str]) -> list[str]:
    """Suspicious shapes whose gain did not hold when re-measured in fresh processes.

    A warm-process artefact (state that survives between timed calls) collapses towards 1.0
    in fresh processes: a shape holds when it still reads FASTER and its re-measured CI reaches
    half of the first gain."""
    first = {s.label: s for s in first_rows}
    again = {s.label: s for s in again_rows}
    return [
        x
        for x in suspicious
        if again[x].verdict.value != "FASTER" or again[x].ci_high - 1 < 0.5 * (first[x].ratio - 1)
    ]


def _confirmed(run: PairedRun, confirm: PairedRun | None, suspicious: list[str]):
    """(status, reason, unconfirmed) of the A/B's decision after the fresh-process
    re-measurement of its suspiciously large gains (none: the decision's own)."""
    d = run.decision
    status, reason, unconfirmed = d.status, d.reason, False
    if run.early_stop:
        reason = f"{run.early_stop}; {reason}"
    if confirm is None:
        return status, reason, unconfirmed
    if not confirm.ok:
        return Status.ROLLED_BACK, f"re-measurement failed: {confirm.failure.sentence()}", True
    weak = unconfirmed_shapes(d.per_shape, confirm.decision.per_shape, suspicious)
    if weak:
        reason = (
            f"gains above {SUSPICIOUS_RATIO}x on {suspicious} did not hold in fresh "
            f"processes (not FASTER, or CI below half the first gain, on {weak}); "
            f"first measurement: {d.reason}"
        )
        return Status.ROLLED_BACK, reason, True
    return status, reason + f" Gains above {SUSPICIOUS_RATIO}x confirmed in fresh processes.", False


def allowed_precision_drop(run: PairedRun) -> str:
    """The sentence a decision adds when the candidate's checks were less precise than the
    incumbent's, which only the op's ``allow_precision_drop`` lets a round go on with; "" when
    they were not."""
    drops = precision_drops(run.snr.get("incumbent", {}), run.snr.get("candidate", {}))
    if not drops:
        return ""
    return (
        f"; precision fell more than {MARGIN_DB:g} dB ({'; '.join(d.describe() for d in drops)}), "
        "allowed by allow_precision_drop in ratchet.yaml"
    )


def _to_decision(
    c: CampaignContext,
    run: PairedRun,
    confirm: PairedRun | None,
    suspicious: list[str],
    inc_rel: str,
    cand_rel: str,
    labels: list[str],
) -> RoundDecision | PairedFailure:
    if not run.ok:
        f = run.failure
        who = "candidate" if f.side == "candidate" else "incumbent"
        category = Category(f.category) if who == "candidate" else Category.INCUMBENT
        return PairedFailure(category, f.sentence(), f.to_dict())
    d = run.decision
    status, reason, unconfirmed = _confirmed(run, confirm, suspicious)
    reason += allowed_precision_drop(run)
    before = aggregates(c.table(inc_rel).restrict(labels), c.m.campaign_type).primary_avg
    values = paired_values(c.table(cand_rel), run, c.m.campaign_type)
    times = phase_times(run)
    return RoundDecision(
        status=status,
        reason=reason,
        paired=True,
        trade_off=d.trade_off,
        regressions=tuple(d.regressions),
        aggregate_before=before,
        aggregate_after=before * d.aggregate_ratio,
        gain=d.gain,
        gain_noise=(d.aggregate_ci_high - d.aggregate_ci_low) / 2,
        gain_ci=(d.aggregate_ci_low - 1, d.aggregate_ci_high - 1),
        ambiguous=d.ambiguous,
        rounds=run.rounds,
        min_detectable=d.min_detectable,
        unconfirmed=unconfirmed,
        early_stop=run.early_stop,
        ci_level=d.aggregate_ci_level,
        time_weighted=None if d.time_weighted is None else d.time_weighted.to_dict(),
        unresolved=d.unresolved,
        quantity=measured_quantity(c),
        per_shape=tuple(
            ShapeResult(
                label=s.label,
                incumbent=values.get(s.label, (None, None))[0],
                candidate=values.get(s.label, (None, None))[1],
                delta=s.ratio - 1,
                noise=(s.ci_high - s.ci_low) / 2,
                ci=(s.ci_low - 1, s.ci_high - 1),
                verdict=s.verdict.value,
                rounds=s.n_rounds,
                phases=dict(s.phase_ratios) or None,
                phase_ms=times.get(s.label),
            )
            for s in d.per_shape
        ),
    )
