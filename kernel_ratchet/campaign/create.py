"""DEFINE_TARGET, PREPARE_ENVIRONMENT and READ_HISTORICAL_TIPS: from a profile to a campaign.

``define_target`` gathers the structured parameters (defaults from the profile, the GPU from
torch) so the CLI can show them for confirmation; ``create_campaign`` makes the campaign
directory with its exact layout, the git branch, the manifest, the generated harness (empty
SHAPES) and the first lines of both logs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.clock import now, today
from kernel_ratchet.campaign.journal import AppendOnlyLog
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.lineage.workspace import WORKSPACE, extract
from kernel_ratchet.campaign.manifest import Manifest
from kernel_ratchet.campaign.quick_bench import write_harness
from kernel_ratchet.campaign.render import TREND_TITLE, optimize_header, trend_header
from kernel_ratchet.campaign.state import Phase, State
from kernel_ratchet.campaign.steps import portable_path, recorded_python_command
from kernel_ratchet.campaign.tips import read_tips, tips_path
from kernel_ratchet.errors import CampaignError, PreflightError, ProfileError, UsageError
from kernel_ratchet.harness.adapter import Shape, load_shapes
from kernel_ratchet.harness.timing.registry import default_engine_name
from kernel_ratchet.profile.checklist import device_check, env_check, run_checklist, work_check
from kernel_ratchet.profile.requires import ensure_runnable
from kernel_ratchet.profile.schema import EXECUTION_MODES, OpProfile, Profile

MAX_ITERATIONS_LIMIT = 120  # SPEC rule 9: max_iterations must be < 120

#: perf_counter parameters used on the CPU (the Triton interpreter is slow; a few samples of a
#: few calls are what a rehearsal can afford).
CPU_TIMING = {"warmup": 1, "samples": 5, "min_sample_ms": 1.0}


#: cuda_events parameters of the campaign's harness, beside the op's ``measure`` (quantity and
#: L2 state, which decide the graph mode): 10 samples of ~50 ms. The harness CSV is the
#: round's record and correctness gate, the paired A/B decides, so the engine's 30 samples of
#: 75 ms (about 2.4 s per shape and phase, 4-5 min for a 51-shape full level) buy nothing a
#: decision uses.
GPU_TIMING = {"samples": 10, "sample_ms": 50.0, "settle_max_ms": 1000.0}


def timing_params(engine: str, op: OpProfile) -> dict[str, Any]:
    """The campaign's timing parameters: the op's measured quantity on the GPU (frozen in the
    manifest, so every round measures it); the host clock on the CPU."""
    if engine == "perf_counter":
        return dict(CPU_TIMING)
    return {**GPU_TIMING, **op.measure.to_dict()} if engine == "cuda_events" else {}


def detect_gpu() -> str:
    """A short GPU name for campaign names and tips paths: 'H200', 'H100', ..., or 'cpu'."""
    import torch  # here: an init that is refused before the GPU matters needs no torch

    if not torch.cuda.is_available():
        return "cpu"
    name = torch.cuda.get_device_name(0)
    for token in name.replace("-", " ").split():
        if any(c.isdigit() for c in token) and token[0].isalpha():
            return token.upper()
    return name.replace(" ", "_")


@dataclass(frozen=True)
class TargetParams:
    """The DEFINE_TARGET parameters, confirmed before anything is created."""

    op: str
    backend: str
    lang: str
    gpu: str
    campaign_type: str
    primary_metric: str
    performance_target: float | None
    max_iterations: int
    git_branch: str  # auto | none
    git_commit: bool
    execution_mode: str
    shape_set: str
    timing_engine: str
    timing_params: dict[str, Any]
    regression_threshold: float
    seed: int
    efficiency_target: float | None = None
    hardware_peak: float | None = None
    rehearsal: bool = False  # see State.rehearsal

    def describe(self) -> list[tuple[str, str]]:
        return [(k, str(v)) for k, v in self.__dict__.items()]


def define_target(
    profile: Profile,
    op: str,
    *,
    performance_target: float | None = None,
    max_iterations: int = 20,
    git_branch: str = "auto",
    git_commit: bool = True,
    timing_engine: str | None = None,
    regression_threshold: float = 0.05,
    seed: int = 0,
    efficiency_target: float | None = None,
    hardware_peak: float | None = None,
    execution_mode: str | None = None,
    rehearsal: bool = False,
    shapes: str | None = None,
) -> TargetParams:
    """The campaign parameters; ``execution_mode`` (repo | workspace) overrides the profile's,
    ``shapes`` (``module:function`` or ``inline:[...]``) the op's shape set for this
    campaign. A workspace campaign keeps its lineage in kernel snapshots: no branch, no
    commits."""
    o = profile.op(op)
    ensure_runnable(profile.requires, str(profile.path))
    if shapes is not None:
        if rehearsal:
            raise CampaignError("a rehearsal runs its own tiny shapes: leave out the shape set")
        load_shapes_from(profile, shapes)  # a bad spec fails here, before anything is created
    mode = execution_mode or o.execution_mode
    _check_params(max_iterations, git_branch, regression_threshold, mode)
    if mode == "workspace":  # rounds run in the campaign dir; the project is not touched
        git_branch, git_commit = "none", False
    engine = timing_engine or default_engine_name()
    return TargetParams(
        op=op,
        backend=o.backend,
        lang=o.lang,
        gpu=detect_gpu(),
        campaign_type=o.campaign_type,
        primary_metric=o.primary_metric,
        performance_target=performance_target,
        max_iterations=max_iterations,
        git_branch=git_branch,
        git_commit=git_commit,
        execution_mode=mode,
        shape_set=shapes or o.shapes,
        timing_engine=engine,
        timing_params=timing_params(engine, o),
        regression_threshold=regression_threshold,
        seed=seed,
        efficiency_target=efficiency_target,
        hardware_peak=hardware_peak,
        rehearsal=rehearsal,
    )


def _check_params(max_iterations: int, git_branch: str, regression: float, mode: str) -> None:
    """UsageError (exit 2) naming the parameter out of its range, as its flag where it has one."""
    if not 0 < max_iterations < MAX_ITERATIONS_LIMIT:
        raise UsageError(
            f"--max-iterations must be between 1 and {MAX_ITERATIONS_LIMIT - 1}, "
            f"not {max_iterations}"
        )
    if git_branch not in ("auto", "none"):
        raise UsageError(f"--git-branch must be 'auto' or 'none', not {git_branch!r}")
    if not 0 < regression < 1:
        raise UsageError("regression threshold is a fraction, e.g. 0.05 for 5%")
    if mode not in EXECUTION_MODES:
        raise UsageError(
            f"execution mode must be one of {', '.join(EXECUTION_MODES)}, not {mode!r}"
        )


def preflight(profile: Profile, op: str, shapes: str | None = None) -> None:
    """The checklist and the environment check must pass before a campaign is created, and
    this machine must run its shapes (``shapes``: the campaign's own set) in useful time."""
    problems = [i for i in run_checklist(profile, op) if not i.ok]
    device = device_check(profile, op, shapes_spec=shapes)
    work = work_check(profile, op, shapes_spec=shapes)
    problems += [i for i in (env_check(profile), device, work) if not i.ok]
    if problems:
        lines = "\n".join(
            f"  - {i.name}: {i.detail}" + (f" (fix: {i.fix})" if i.fix else "") for i in problems
        )
        raise PreflightError(
            f"the DEFINE_TARGET checklist fails for op {op!r}:\n{lines}\n"
            "Run `ratchet check --op " + op + "` after fixing."
        )


def _campaign_name(
    base: Path, op: str, backend: str, gpu: str, branches_in: Path | None = None
) -> str:
    """``<op>_<backend>_<gpu>_<YYYYMMDD>``, with ``-N`` when a campaign directory of that name
    exists or, with ``branches_in`` (the repository its branch goes in), its ``optimize/``
    branch does: left from a campaign whose directory was deleted, its commits are kept, not
    reused."""

    def taken(name: str) -> bool:
        if (base / name).exists():
            return True
        return branches_in is not None and git.branch_exists(branches_in, f"optimize/{name}")

    name = f"{op}_{backend}_{gpu}_{today()}"
    n = 2
    candidate = name
    while taken(candidate):
        candidate, n = f"{name}-{n}", n + 1
    return candidate


def _start_commit(profile: Profile, kernel_source: list[str]) -> str:
    """The commit the baseline stands on; raises CampaignError when a kernel file has
    uncommitted changes."""
    groot = git.toplevel(profile.root)
    kernel_git = [os.path.relpath(profile.root / k, groot) for k in kernel_source]
    git.require_visible(groot, kernel_git)
    dirty = [k for k in kernel_git if k in git.changed_paths(groot)]
    if dirty:
        raise CampaignError(
            f"kernel files have uncommitted changes: {dirty}. The baseline must be a commit: "
            "commit them (or `git stash` them) and run `ratchet init` again"
        )
    return git.head(groot)


def _manifest(p: TargetParams, o: OpProfile, profile: Profile, cdir: Path, **facts: Any):
    """The campaign's manifest (``facts``: the shapes and commands, the starting commit and
    branch, decided while the directory was prepared)."""
    return Manifest(
        target_op=p.op,
        target_backend=p.backend,
        target_lang=p.lang,
        target_gpu=p.gpu,
        execution_mode=p.execution_mode,
        project_skill=portable_path(profile.path, profile.root),
        performance_target=p.performance_target,
        primary_metric=p.primary_metric,
        kernel_source=list(o.kernel_source),
        quick_command=recorded_python_command(profile.root, cdir / "quick_test_bench.py"),
        representative_shapes=[],
        git_commit=p.git_commit,
        git_branch=p.git_branch,
        max_iterations=p.max_iterations,
        created=now(),
        campaign=cdir.name,
        campaign_type=p.campaign_type,
        adapter=o.adapter,
        shape_set=p.shape_set,
        rebuild_command=o.rebuild,
        timing_engine=p.timing_engine,
        timing_params=p.timing_params,
        seed=p.seed,
        regression_threshold=p.regression_threshold,
        efficiency_target=p.efficiency_target,
        hardware_peak=p.hardware_peak,
        csv_schema={"name": o.schema_name},
        **facts,
    )


def _check_weights(o: OpProfile, labels: list[str], shape_set: str | None = None) -> None:
    """Every shape the profile weighs must be a target shape (a typo would weigh nothing);
    a campaign on another shape set than the op's (``shape_set``) weighs the shapes the two
    share."""
    if shape_set not in (None, o.shapes):
        return
    unknown = sorted(set(o.weights) - set(labels))
    if unknown:
        raise ProfileError(
            f"ops.{o.name}.weights names shape(s) that are not target shapes: "
            f"{', '.join(unknown)}. Fix: use labels from {o.shapes} ({', '.join(labels[:8])}"
            f"{', ...' if len(labels) > 8 else ''})"
        )


def create_campaign(profile: Profile, p: TargetParams) -> Path:
    """PREPARE_ENVIRONMENT + READ_HISTORICAL_TIPS. Returns the campaign directory."""
    o = profile.op(p.op)
    root = profile.root
    start = _start_commit(profile, o.kernel_source)
    groot = git.toplevel(root)
    shapes = load_shapes_from(profile, p.shape_set)
    _check_weights(o, [s.label for s in shapes], p.shape_set)
    base = profile.campaign_root_path
    branches_in = groot if p.git_branch == "auto" else None
    cdir = base / _campaign_name(base, p.op, p.backend, p.gpu, branches_in)
    git.exclude(groot, os.path.relpath(base, groot))
    branch = original = None
    if p.git_branch == "auto":
        original = git.current_branch(groot)
        branch = f"optimize/{cdir.name}"
        git.create_branch(groot, branch)
    for sub in ("logs", "profiles", "rounds"):
        (cdir / sub).mkdir(parents=True, exist_ok=True)
    test_cmd, bench_cmd, rounds_root = o.test, o.benchmark or "", root
    if p.execution_mode == WORKSPACE:
        ws = extract(profile, o, cdir, start)
        test_cmd, bench_cmd, rounds_root = ws.test_command, ws.benchmark_command, cdir / "src"
    m = _manifest(
        p,
        o,
        profile,
        cdir,
        target_shapes=[s.to_dict() for s in shapes],
        test_command=test_cmd,
        benchmark_command=bench_cmd,
        starting_commit=start,
        branch_name=branch,
        original_branch=None if original == "HEAD" else original,
    )
    m.save(cdir)
    state = State(
        phase=Phase.INITIALIZED, next_round=1, incumbent_commit=start, rehearsal=p.rehearsal
    )
    state.harness_sha256 = write_harness(cdir, m, rounds_root, shapes=[], target_shapes=[])
    tpath = tips_path(profile.tips_root_path, p.gpu, p.op, p.backend)
    AppendOnlyLog(cdir, "logs/optimize.md", state.logs).append(
        optimize_header(m, os.path.relpath(tpath, root), read_tips(tpath), rehearsal=p.rehearsal)
    )
    AppendOnlyLog(cdir, "logs/performance_trend.md", state.logs).append(
        TREND_TITLE + trend_header(p.campaign_type)
    )
    state.save(cdir)
    return cdir


def load_shapes_from(profile: Profile, spec: str) -> list[Shape]:
    """Load the op's shape set with the project root importable."""
    sys.path.insert(0, str(profile.root))
    try:
        return load_shapes(spec)
    finally:
        sys.path.remove(str(profile.root))
