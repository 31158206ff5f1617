"""The campaign's generated harness, ``quick_test_bench.py``: writing it, running it.

It is generated from the manifest (never edited by hand: its sha256 is kept in the state and
checked before every round) and is the authoritative per-shape measurement of BASELINE and
every VALIDATE (SPEC section 5). :func:`run_harness` runs it at a level with its CSV and log;
:func:`write_provenance` records next to a CSV how its numbers were measured.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.fsutil import atomic_write_text, sha256_bytes
from kernel_ratchet.campaign.lineage import git
from kernel_ratchet.campaign.manifest import Manifest
from kernel_ratchet.campaign.steps import (
    HARNESS_TIMEOUT_S,
    RunningStep,
    StepResult,
    python_command,
    recorded_python_command,
    run_step,
    start_step,
)
from kernel_ratchet.harness.generate import render_quick_bench
from kernel_ratchet.harness.level_timing import level_params, quick_timing
from kernel_ratchet.harness.paired_run import SEED_POLICY
from kernel_ratchet.harness.provenance import collect_provenance
from kernel_ratchet.harness.provenance import write_provenance as save_provenance

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


def write_harness(
    cdir: Path, m: Manifest, root: Path, *, shapes: list[dict], target_shapes: list[dict]
) -> str:
    """(Re)generate quick_test_bench.py; returns its sha256 for the tamper check."""
    text = render_quick_bench(
        campaign=m.campaign,
        op=m.target_op,
        backend=m.target_backend,
        path=os.path.relpath(cdir / "quick_test_bench.py", root),
        project_root=str(root),
        adapter=m.adapter,
        schema=m.csv_schema["name"],
        engine=m.timing_engine,
        engine_params=m.timing_params,
        seed=m.seed,
        shapes=shapes,
        target_shapes=target_shapes,
        quick_params=quick_timing(m.timing_params, m.campaign_type),
    )
    atomic_write_text(cdir / "quick_test_bench.py", text)
    return sha256_bytes(text.encode())


def harness_command(cdir: Path, level: str, csv: Path) -> str:
    """The shell command running the harness at ``level`` with its summary CSV at ``csv``."""
    return python_command(cdir / "quick_test_bench.py", "--level", level, "--summary-csv", str(csv))


def harness_record(c: CampaignContext, level: str, csv: Path) -> str:
    """:func:`harness_command` as the round's records name it (``python``, paths relative to
    the project root)."""
    args = ("--level", level, "--summary-csv", csv)
    return recorded_python_command(c.profile.root, c.dir / "quick_test_bench.py", *args)


def run_harness(c: CampaignContext, level: str, csv: Path, log_path: Path) -> StepResult:
    """Run the harness at ``level`` (quick | full) on the working tree, writing ``csv``; a
    failure is the step's outcome (``ok`` False), not an exception."""
    return run_step(
        "harness",
        harness_command(c.dir, level, csv),
        cwd=c.root,
        log_path=log_path,
        timeout_s=HARNESS_TIMEOUT_S,
    )


class EarlyHarness:
    """A round's harness started beside its focused test: it imports while the test runs and
    measures only once released (:mod:`kernel_ratchet.harness.start_gate`), so the round pays
    for the harness's start-up once, not after the test. Stopped on exit unless it was run."""

    def __init__(self, c: CampaignContext, level: str, csv: Path, log_path: Path) -> None:
        self.c, self.level, self.csv, self.log_path = c, level, csv, log_path
        self.step: RunningStep | None = None

    def start(self) -> None:
        cmd = harness_command(self.c.dir, self.level, self.csv)
        gate = self.log_path.with_name(self.log_path.name + ".gate")
        self.step = start_step("harness", cmd, cwd=self.c.root, log_path=self.log_path, gate=gate)

    def run(self, level: str, csv: Path) -> StepResult | None:
        """The started harness's outcome when it is the one asked for (``level``, ``csv``),
        released now; None when there is none (the caller runs the harness itself)."""
        step, self.step = self.step, None
        if step is None or (level, Path(csv)) != (self.level, Path(self.csv)):
            if step is not None:
                step.stop()
            return None
        return step.wait(HARNESS_TIMEOUT_S)

    def __enter__(self) -> EarlyHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.step is not None:
            self.step.stop()
            self.step = None


def write_provenance(c: CampaignContext, art: Path, level: str) -> None:
    """``provenance.json`` next to a harness CSV: how its numbers were measured (engine and
    parameters, GPU and clocks, driver, versions, commit, seed policy, environment hash)."""
    import torch

    quick = quick_timing(c.m.timing_params, c.m.campaign_type)
    prov = collect_provenance(
        {"engine": c.m.timing_engine, **level_params(c.m.timing_params, level, quick)},
        candidate_commit=git.head(c.groot),
        seed_policy=f"harness inputs from the campaign seed {c.m.seed}, fresh per shape; "
        f"paired A/B: {SEED_POLICY}",
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
    prov["level"] = level
    save_provenance(art / "provenance.json", prov)
