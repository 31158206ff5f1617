"""``ratchet bench``: the project's own benchmark command, next to the harness's numbers.

The benchmark (``ops.<op>.benchmark``, optional) runs as the focused test does
(:func:`~kernel_ratchet.campaign.steps.run_step`: through the shell in the project root, its own
process group, a time limit, a log). Its output is the project's claim; the harness's numbers
beside it are the campaign's measurement of the same op: the CSV of the incumbent of the op's
most recent campaign, read with the one CSV reader, never re-measured here. Each is labelled
with where it comes from, and a rehearsal campaign's numbers are labelled as interpreter
timings. Logs go under ``bench-logs/<op>/`` next to the campaign root (with the default
``.ratchet/campaigns``: ``.ratchet/bench-logs/``), one file per run, none overwritten.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path

from kernel_ratchet.campaign.locate import list_campaigns
from kernel_ratchet.campaign.manifest import load_manifest
from kernel_ratchet.campaign.state import State
from kernel_ratchet.campaign.steps import TEST_TIMEOUT_S, StepResult, run_step
from kernel_ratchet.errors import UsageError
from kernel_ratchet.harness.csv_schema import BenchTable, read_csv
from kernel_ratchet.profile.requires import ensure_runnable
from kernel_ratchet.profile.schema import Profile

#: Time limit of one benchmark run, as for a focused test.
BENCH_TIMEOUT_S = TEST_TIMEOUT_S
#: Where the benchmark logs go: beside the campaign root, so never taken for a campaign.
BENCH_DIR = "bench-logs"


@dataclass(frozen=True)
class HarnessNumbers:
    """The harness's latest numbers for an op: ``source`` says where from (or why none)."""

    source: str
    table: BenchTable | None = None


def bench_ops(profile: Profile, op: str | None) -> list[str]:
    """The ops to benchmark: ``op`` (which must have a benchmark), else every op that has one.
    UsageError (exit 2) saying what to add when there is none."""
    if op is not None:
        if profile.op(op).benchmark is None:
            raise UsageError(
                f"{profile.path}: ops.{op} has no benchmark command. Fix: add "
                f"`benchmark: '<command>'` to ops.{op} (run in {profile.root}), or leave it out "
                "and measure the op with `ratchet baseline`"
            )
        return [op]
    names = [name for name, o in profile.ops.items() if o.benchmark is not None]
    if not names:
        raise UsageError(
            f"{profile.path}: no op has a benchmark command. Fix: add `benchmark: '<command>'` "
            "to an op entry, or measure the ops with `ratchet baseline`"
        )
    return names


def _log_path(profile: Profile, op: str) -> Path:
    base = profile.campaign_root_path.parent / BENCH_DIR / op
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = base / f"benchmark-{stamp}.log", 2
    while path.exists():
        path, n = base / f"benchmark-{stamp}-{n}.log", n + 1
    return path


def run_benchmark(profile: Profile, op: str, *, timeout_s: float = BENCH_TIMEOUT_S) -> StepResult:
    """Run op ``op``'s benchmark command in the project root; a failure or a timeout is the
    result (``ok`` False, ``reason``), not an exception. Refuses (RatchetError, exit 2) on a
    machine that lacks what the profile's ``requires:`` names."""
    bench_ops(profile, op)  # the op has a benchmark command
    ensure_runnable(profile.requires, str(profile.path))
    return run_step(
        "benchmark",
        str(profile.op(op).benchmark),
        cwd=profile.root,
        log_path=_log_path(profile, op),
        timeout_s=timeout_s,
    )


def latest_harness(profile: Profile, op: str) -> HarnessNumbers:
    """The incumbent's full-level harness CSV of the op's most recent campaign that has one."""
    for cdir in reversed(list_campaigns(profile)):
        if load_manifest(cdir).target_op != op:
            continue
        st = State.load(cdir)
        if not st.incumbent_full_csv:
            continue
        path = cdir / st.incumbent_full_csv
        what = "REHEARSAL campaign (interpreter timings, not the GPU's)" if st.rehearsal else ""
        source = (
            f"the harness: campaign {cdir.name}, incumbent round {st.incumbent_round}, "
            f"all target shapes{', ' + what if what else ''} ({path})"
        )
        return HarnessNumbers(source, read_csv(path))
    return HarnessNumbers(
        f"the harness: no measurement of {op} yet; `ratchet init --op {op} && ratchet "
        "baseline` measures it"
    )
