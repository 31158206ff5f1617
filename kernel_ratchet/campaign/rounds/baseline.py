"""Round 1, the BASELINE (SPEC section 5): the unmodified kernel's focused test and the harness
on all target shapes; the schema is frozen and the representative shapes chosen from the
PASS rows (from all rows when a declared known failure leaves none passing).
:func:`measure_baseline` raises :class:`BaselineFailure` when the unmodified kernel cannot be
measured (the engine sets the round aside and says what to fix)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.lineage.kernel import snapshot
from kernel_ratchet.campaign.quick_bench import (
    harness_record,
    run_harness,
    write_harness,
    write_provenance,
)
from kernel_ratchet.campaign.record import RoundRecord
from kernel_ratchet.campaign.steps import NO_GPU_ENV, TEST_TIMEOUT_S, StepResult, run_step
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.harness import failures
from kernel_ratchet.harness.csv_schema import read_csv
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.metrics import measured_metric_name
from kernel_ratchet.scoring.representative import choose_representative

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext


class BaselineFailure(CampaignError):
    """The unmodified kernel failed its own test or measured nothing (the message says why)."""


def measure_baseline(
    c: CampaignContext, started: str, known_failure: str | None = None
) -> RoundRecord:
    """Measure round 1; freezes the schema and the representative shapes into the manifest
    (``c.m``, saved) and regenerates the harness with them. Returns the BASELINE record.

    ``known_failure``: the driver's word that the unmodified kernel fails on the bug a
    correctness fix of this campaign is to fix: a failing focused test (a test that came with
    the fix), and a harness whose correctness check fails on every target shape, are then
    recorded in the BASELINE's reason, not a failure. Every later round still has to pass the
    whole focused test; while no shape passes, only a ``--fix`` round may follow (judged on
    correctness alone: :mod:`.correctness_only`)."""
    rdir, m = c.round_dir(1), c.m
    t0 = time.monotonic()
    snapshot(c, rdir)
    write_harness(c.dir, m, c.root, shapes=[], target_shapes=m.target_shapes)
    art = rdir / "artifacts"
    test = _focused_test(c, art, known_failure)
    c.say(f"round-1 (BASELINE): harness on all {len(m.target_shapes)} target shapes")
    csv = art / "benchmark.csv"
    h = run_harness(c, "full", csv, art / "harness.log")
    if not h.ok or not csv.exists():
        raise BaselineFailure(f"the harness did not produce a CSV: {h.reason}")
    table = read_csv(csv, expected=c.schema)
    why = failures.summary(failures.read(csv))
    passed = sum(r.passed for r in table.rows)
    if not passed and not known_failure:
        raise BaselineFailure(
            f"no shape passes the harness's correctness check: {why or 'no reason recorded'} "
            f"(see {art / 'harness.log'}); where every shape fails on the bug a `ratchet "
            "validate --fix` round of this campaign is to fix, say so: `ratchet baseline "
            "--known-failure WHICH`"
        )
    _freeze(c, table)
    write_provenance(c, art, "full")
    c.say(f"round-1 (BASELINE): harness ran in {h.seconds:.1f} s")
    seconds = {"test": test.seconds, "harness_full": h.seconds, "measure": time.monotonic() - t0}
    return RoundRecord(
        round=1,
        status=Status.BASELINE,
        category=Category.BASELINE,
        hypothesis="Baseline measurement",
        bucket="-",
        change="none (baseline)",
        level="full",
        started=started,
        finished=now(),
        reason=_reason(passed, len(table.rows), why, test, known_failure),
        csv=c.rel(csv),
        test_command=m.test_command,
        harness_command=harness_record(c, "full", csv),
        seconds={k: round(v, 1) for k, v in seconds.items()},
        failed_tests=test.failed_tests,  # a declared failure's tests, every one
    )


def _reason(passed: int, total: int, why: str, test: StepResult, known: str | None) -> str:
    """The BASELINE's reason: how many shapes pass and why the others fail, and what the
    failure the driver declared (``known``) covers: the focused test, every shape, or
    neither."""
    if known and not test.ok:
        said = f"; focused test failed as declared ({known}): {test.reason}"
    elif known and passed:
        said = f"; focused test passed, the declared failure ({known}) did not show"
    else:
        said = "; focused test passed" if known else ""
    if passed:
        judged = f" ({why}; rounds are judged on the shapes that pass)" if why else ""
        return (
            f"baseline: {passed}/{total} shapes PASS{judged}; schema frozen; representative "
            f"shapes chosen{said}"
        )
    return (
        f"baseline: 0/{total} shapes PASS ({why or 'no reason recorded'}), as declared "
        f"({known}): only `validate --fix` rounds may follow until one passes every target "
        "shape, accepted on correctness alone (no pair can be timed against an incumbent that "
        f"fails every shape); schema frozen; representative shapes chosen from all shapes{said}"
    )


def _focused_test(c: CampaignContext, art: Path, known_failure: str | None) -> StepResult:
    """The unmodified kernel's focused test; raises BaselineFailure when it fails and the
    driver declared no failure (``known_failure``)."""
    m = c.m
    c.say("round-1 (BASELINE): focused test")
    test = run_step(
        "focused test",
        m.test_command,
        cwd=c.root,
        log_path=art / "test.log",
        timeout_s=TEST_TIMEOUT_S,
        env=None if c.op.test_gpu else NO_GPU_ENV,  # as every round runs it
    )
    if test.ok:
        c.say(f"round-1 (BASELINE): focused test passed in {test.seconds:.1f} s")
        return test
    if not known_failure:
        raise BaselineFailure(
            f"the unmodified kernel fails its focused test: {test.reason} (where it fails on "
            "the bug a `ratchet validate --fix` round of this campaign is to fix, say so: "
            "`ratchet baseline --known-failure WHICH`)"
        )
    c.say(f"round-1 (BASELINE): focused test failed as declared: {test.reason}")
    return test


def _freeze(c: CampaignContext, table) -> None:
    """Representative shapes and the CSV schema into the manifest; the harness regenerated
    with the representative shapes (its sha256 kept for the tamper check)."""
    grouped = any((s.get("params") or {}).get("dist") for s in c.m.target_shapes)
    reps = choose_representative(table, c.m.campaign_type, grouped=grouped, from_failing=True)
    sch = c.schema
    c.m = c.m.with_(
        primary_metric=measured_metric_name(table, c.m.campaign_type),
        representative_shapes=reps,
        csv_schema={"name": sch.name, "header": sch.header, "sha256": sch.header_sha256},
    )
    c.m.save(c.dir)
    c.state.harness_sha256 = write_harness(
        c.dir,
        c.m,
        c.root,
        shapes=c.m.representative_shape_dicts,
        target_shapes=c.m.target_shapes,
    )
