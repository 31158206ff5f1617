"""What a campaign refuses or rolls back: schema drift, edited logs, files outside the kernel,
an edited harness, an empty round, Ctrl+C or SIGTERM, and rollback from snapshots without git
commits."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import pytest

from kernel_ratchet import cli
from kernel_ratchet.campaign import steps
from kernel_ratchet.campaign.lineage.kernel import out_of_scope
from kernel_ratchet.campaign.rounds import level_harness
from kernel_ratchet.campaign.state import PendingRound, Stage
from kernel_ratchet.errors import (
    TERMINATION_REQUESTED,
    CampaignError,
    LogTamperedError,
    SchemaError,
    Terminated,
)
from tests.campaign.conftest import (
    KERNEL,
    baselined_project,
    break_kernel,
    campaign_dir,
    git,
    ratchet,
    set_blocks,
    typo_kernel,
)


@pytest.mark.slow
def test_renamed_csv_column_fails_validate_loudly(accepted_project, open_accepted, monkeypatch):
    real = level_harness._run_harness

    def drifting(c, art, level, name, early=None):
        h, csv = real(c, art, level, name, early)
        text = csv.read_text().replace("Forward TFLOPS_stddev", "Forward TFLOPS_std", 1)
        csv.write_text(text)
        return h, csv

    monkeypatch.setattr(level_harness, "_run_harness", drifting)
    set_blocks(accepted_project, M=64, N=64)
    with open_accepted() as c, pytest.raises(SchemaError, match="Forward TFLOPS_stddev"):
        c.validate("64x64 tiles")
    with open_accepted() as c:
        last = c.state.closed[-1]
    assert last.status == "ROLLED BACK" and last.category == "schema"
    assert "BLOCK_M = 32" in (accepted_project / KERNEL).read_text()


@pytest.mark.slow
def test_sigterm_during_the_harness_closes_the_round_and_exits_143(
    accepted_project, open_accepted, monkeypatch
):
    """A scheduler's kill or `timeout` (SIGTERM) must leave a closed round, as Ctrl+C does,
    not a process that died with the candidate in the tree; the CLI's handler does it."""
    real = steps.RunningStep.wait
    previous = signal.signal(signal.SIGTERM, cli._terminate)

    def killed(step, timeout_s):
        if step.name == "harness":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)  # the handler raises before this ends
        return real(step, timeout_s)

    monkeypatch.setattr(steps.RunningStep, "wait", killed)
    set_blocks(accepted_project, M=64, N=64)
    try:
        with open_accepted() as c, pytest.raises(Terminated):
            c.validate("64x64 tiles")
    finally:
        signal.signal(signal.SIGTERM, previous)
        TERMINATION_REQUESTED.clear()  # process-wide: later tests run loops in this process
    assert not TERMINATION_REQUESTED.is_set()
    with open_accepted() as c:
        assert c.state.pending is None and c.state.closed[-1].category == "interrupted"
    rdir = campaign_dir(accepted_project) / "rounds/round-3"
    record = json.loads((rdir / "round.json").read_text())
    assert "SIGTERM" in record["reason"] and "Ctrl+C" not in record["reason"]
    assert "BLOCK_M = 32" in (accepted_project / KERNEL).read_text()

    def terminated(**_kw):  # as typer 0.29 does: a KeyboardInterrupt becomes a return of 130
        try:
            cli._terminate(signal.SIGTERM, None)
        except KeyboardInterrupt:
            return 130

    monkeypatch.setattr(cli, "app", terminated)
    try:
        with pytest.raises(SystemExit) as exit_:
            cli.main()
    finally:
        signal.signal(signal.SIGTERM, previous)  # main() installed its handler
        TERMINATION_REQUESTED.clear()
    assert exit_.value.code == 143


def test_change_outside_kernel_source_is_refused_and_left_alone(project, open_campaign):
    """validate refuses before a round opens; both edits stay as the user left them."""
    set_blocks(project, M=32, N=32)
    test_file = project / "tests/test_kernel.py"
    test_file.write_text(test_file.read_text() + "\n# weakened test\n")
    with open_campaign() as c, pytest.raises(CampaignError, match=r"\['tests/test_kernel.py'\]"):
        c.validate("32x32 tiles")
    assert "# weakened test" in test_file.read_text()  # never touched by the tool
    assert "BLOCK_M = 32" in (project / KERNEL).read_text()  # the kernel edit kept
    with open_campaign() as c:
        assert c.state.next_round == 2  # no round spent
        rec = c.validate("32x32 tiles", scope_first=False)  # an optimizer's round records it
    assert rec.status == "ROLLED BACK" and rec.category == "scope"
    assert list(rec.out_of_scope) == ["tests/test_kernel.py"]
    assert "BLOCK_M = 16" in (project / KERNEL).read_text()
    with open_campaign() as c, pytest.raises(CampaignError, match="outside them: tests/test_k"):
        c.validate("no kernel change, the test file still edited")


@pytest.mark.slow
def test_a_file_edited_while_the_round_runs_rolls_it_back_for_scope(
    accepted_project, open_accepted, monkeypatch
):
    """An edit outside kernel_source made while the round measures (a loosened test, an
    edited reference) may be what the round read: the round is rolled back for its scope,
    not accepted, and the edit is not taken as the new normal; git checkout then suffices."""
    real = level_harness._run_harness
    test_file = accepted_project / "tests/test_kernel.py"

    def meanwhile(c, art, level, name, early=None):
        test_file.write_text(test_file.read_text() + "\n# loosened while the round ran\n")
        return real(c, art, level, name, early)

    monkeypatch.setattr(level_harness, "_run_harness", meanwhile)
    set_blocks(accepted_project, M=64, N=64)
    with open_accepted() as c:
        rec = c.validate("64x64 tiles")
    assert rec.status == "ROLLED BACK" and rec.category == "scope", rec.reason
    assert "changed while the round ran" in rec.reason
    assert list(rec.out_of_scope) == ["tests/test_kernel.py"]
    assert "BLOCK_M = 64" not in (accepted_project / KERNEL).read_text()  # rolled back
    monkeypatch.setattr(level_harness, "_run_harness", real)
    set_blocks(accepted_project, M=64, N=64)
    with open_accepted() as c, pytest.raises(CampaignError, match="tests/test_kernel.py"):
        c.validate("64x64 tiles")  # the edit was not absorbed
    git(accepted_project, "checkout", "--", "tests/test_kernel.py")
    with open_accepted() as c:
        assert out_of_scope(c.ctx) == []

    def writes_its_output(c, art, level, name, early=None):  # a run output, untracked
        (accepted_project / "bench_out.json").write_text(f'{{"level": "{level}"}}')
        return real(c, art, level, name, early)

    monkeypatch.setattr(level_harness, "_run_harness", writes_its_output)
    with open_accepted() as c:
        rec = c.validate("64x64 tiles, the run writing an untracked output")
    assert rec.category != "scope", rec.reason


@pytest.mark.slow
def test_edited_log_harness_and_empty_round_are_refused_without_a_round(project, open_campaign):
    """Each refusal comes before any work; the round after them runs with the harness
    regenerated byte for byte (the one the baseline ran) and the log that only had a
    correction appended. That round's candidate does not parse: passing the checks before any
    work is what is proven here, and a round that closes there starts no process."""
    with open_campaign() as c, pytest.raises(CampaignError, match="equal the incumbent"):
        c.validate("nothing changed")
    kernel = project / KERNEL
    code = kernel.read_text()
    kernel.write_text(
        '"""Tiles, now documented."""\n# a comment\n' + code.replace("\n\n", "\n\n\n", 1)
    )
    with open_campaign() as c, pytest.raises(CampaignError, match="only in comments, docstrings"):
        c.validate("comments only")
    kernel.write_text(code)
    cdir = campaign_dir(project)
    log = cdir / "logs/optimize.md"
    original = log.read_text()
    log.write_text(original.replace("## Basic information", "## Basic info (edited)"))
    set_blocks(project, M=32, N=32)
    with open_campaign() as c, pytest.raises(LogTamperedError) as exc:
        c.validate("32x32 tiles")
    assert "line" in str(exc.value) and "append a correction" in str(exc.value)
    with open_campaign() as c:  # refused before any work: no round was spent
        assert c.state.next_round == 2 and c.state.pending is None
    log.write_text(original + "> Correction (2026-01-01 00:00): a note appended by hand\n")
    harness = cdir / "quick_test_bench.py"
    generated = harness.read_text()
    harness.write_text(generated.replace("SEED = 0", "SEED = 1"))
    with open_campaign() as c, pytest.raises(CampaignError, match="was edited"):
        c.validate("32x32 tiles")
    assert harness.read_text() == generated  # regenerated from the manifest
    typo_kernel(project)
    with open_campaign() as c:
        assert c.state.next_round == 2 and len(c.state.closed) == 1
        rec = c.validate("32x32 tiles, a typo")
        assert rec.round == 2 and rec.category == "compile", rec.reason
    text = log.read_text()
    assert "a note appended by hand" in text and text.index("hand") < text.index("## Round 2 — ")


@pytest.mark.slow
def test_ctrl_c_during_the_harness_closes_the_round(accepted_project, open_accepted, monkeypatch):
    real = steps.RunningStep.wait

    def interrupted(step, timeout_s):
        if step.name == "harness":
            raise KeyboardInterrupt
        return real(step, timeout_s)

    monkeypatch.setattr(steps.RunningStep, "wait", interrupted)
    set_blocks(accepted_project, M=64, N=64)
    with open_accepted() as c:
        stalled = c.state.consecutive_rollbacks
    with open_accepted() as c, pytest.raises(KeyboardInterrupt):
        c.validate("64x64 tiles")
    with open_accepted() as c:
        assert c.state.pending is None
        assert c.state.consecutive_rollbacks == stalled  # the user's stop is no failed direction
        last = c.state.closed[-1]
    assert last.category == "interrupted" and "Ctrl+C" in json.dumps(
        json.loads((campaign_dir(accepted_project) / "rounds/round-3/round.json").read_text())
    )
    assert "BLOCK_M = 32" in (accepted_project / KERNEL).read_text()


@pytest.mark.slow
@pytest.mark.soak  # its own campaign: the default run checks a rollback from the incumbent's
# snapshot without commits in the workspace campaign (tests/campaign/test_workspace.py)
def test_no_commit_mode_rolls_back_from_the_snapshot(tmp_path):
    root = baselined_project(tmp_path / "proj", "--no-commit", "--git-branch", "none")
    set_blocks(root, M=32, N=32)
    assert ratchet(root, "validate", "--hypothesis", "32x32").returncode == 0
    accepted = (root / KERNEL).read_text()
    break_kernel(root)  # rolled back at its focused test: restored from the snapshot
    assert ratchet(root, "validate", "--hypothesis", "shifted loads").returncode == 1
    assert (root / KERNEL).read_text() == accepted


def _calibrates(open_campaign, root: Path, monkeypatch, **run_ab_kw) -> None:
    """``calibrate_campaign`` with 2 A/A trials of ``run_ab(**run_ab_kw)`` stores the minimum
    detectable effect, the log says so and the decision reads it."""
    from functools import partial

    from kernel_ratchet.campaign import calibrate as calibrate_mod
    from kernel_ratchet.campaign.calibrate import calibrate_campaign
    from kernel_ratchet.campaign.rounds.paired import min_detectable

    # the mechanics, not the rate (tests/scoring checks it): each A/A trial measures one shape
    # and stops at its first look instead of measuring an interpreter's AMBIGUOUS shapes on to
    # the round budget
    real = partial(calibrate_mod.run_ab, single_look=True, **run_ab_kw)

    def one_shape(c, labels, *args, **kwargs):
        return real(c, labels[:1], *args, **kwargs)

    monkeypatch.setattr(calibrate_mod, "run_ab", one_shape)
    with open_campaign() as c:
        assert min_detectable(c) == 0.0
        cal = calibrate_campaign(c, trials=2)
        assert cal.trials == 2 and cal.min_detectable_effect > 0.0
        assert min_detectable(c) == pytest.approx(cal.min_detectable_effect)
    cdir = campaign_dir(root)
    stored = json.loads((cdir / "calibration.json").read_text())
    assert stored["trials"] == 2 and stored["shapes"]
    assert "## Calibration" in (cdir / "logs/optimize.md").read_text()


def test_calibrate_stores_the_machine_noise_and_the_decision_uses_it(
    project, open_campaign, monkeypatch
):
    """The A/A trials' workers simulated (the A/B's own tests' machine: 2% noise); real
    workers run an A/A in tests/harness/test_ab_workers.py and the whole calibration in the
    soak run."""
    from tests.harness.fake_ab import FakeMachine, FakeSpec, FakeWorker

    machine = FakeMachine(seed=7)

    def simulated(spec, log_path):
        return FakeWorker(machine, FakeSpec("incumbent"), log_path)

    _calibrates(open_campaign, project, monkeypatch, worker_factory=simulated)
    assert machine.calls  # the trials timed on the simulated workers


@pytest.mark.slow
@pytest.mark.soak  # the default run simulates the workers (above)
def test_calibrate_measures_in_real_workers(accepted_project, open_accepted, monkeypatch):
    _calibrates(open_accepted, accepted_project, monkeypatch)


def test_a_lost_sigterm_still_stops_the_loop_between_rounds():
    """A Terminated raised while a finalizer runs is swallowed by Python; the flag the handler
    sets first stops `ratchet run` at the next round boundary, paused (resumable), not ended."""
    import threading
    from types import SimpleNamespace

    from kernel_ratchet.optimizers import loop

    c = SimpleNamespace(state=SimpleNamespace(termination=None))
    TERMINATION_REQUESTED.set()
    try:
        code, why = loop._loop(
            c,
            loop.LoopResult(Path(".")),
            loop.LoopSettings(None, 20, math.inf, None, threading.Event(), print, None, "T4"),
        )
    finally:
        TERMINATION_REQUESTED.clear()
    assert code == loop.PAUSED and "SIGTERM" in why and "ratchet resume" in why


def test_an_optimizer_that_does_not_read_the_profile_does_not_pay_for_it(open_campaign):
    """ANALYZE's profile (a profiler process, Nsight Compute on a GPU) is taken for the
    optimizers that read it; the search reads only the roofline."""
    from kernel_ratchet.campaign.analyze import NOT_READ, analyze_campaign
    from kernel_ratchet.optimizers.search import SearchOptimizer

    assert SearchOptimizer.reads_profile is False
    with open_campaign() as c:
        a = analyze_campaign(c.ctx, 2, profile=False)
    assert a["shapes"] and a["profile"]["error"] == NOT_READ
    assert a["profile"]["key"]["incumbent_round"] == 1
    md = (c.ctx.dir / "profiles/round-2/analysis.md").read_text()
    assert "## Kernel time breakdown" in md and "Not measured: not taken" in md
    assert not (c.ctx.dir / "profiles/round-2/breakdown.log").exists()


def test_an_analysis_without_the_profiler_keeps_the_profile_taken_before(open_campaign):
    """``ratchet analyze`` then ``ratchet analyze --no-profile-run``: the second keeps the
    first one's profile of the same incumbent and shape; with none, it names the flag."""
    from kernel_ratchet.campaign import analyze

    with open_campaign() as c:
        out = c.ctx.dir / "profiles/round-2"
        first = analyze.analyze_campaign(c.ctx, 2, profile=False, why_not=analyze.NOT_ASKED)
        assert first["profile"]["error"] == analyze.NOT_ASKED
        taken = {"key": first["profile"]["key"], "method": "torch.profiler", "phases": {}}
        data = json.loads((out / "analysis.json").read_text())
        (out / "analysis.json").write_text(json.dumps({**data, "profile": taken}))
        again = analyze.analyze_campaign(c.ctx, 2, profile=False, why_not=analyze.NOT_ASKED)
    assert again["profile"] == taken


def test_the_code_of_a_python_file_leaves_out_comments_docstrings_and_layout():
    from kernel_ratchet.campaign.lineage.kernel import _code

    base = b"def f(x):\n    return x * 2\n"
    same = b'"""Doc."""\n# note\ndef f(x):\n    """What f does."""\n    return x * 2  # doubled\n'
    assert _code(same) == _code(base)
    assert _code(b"def f(x):\n    return x * 3\n") != _code(base)
    assert _code(b'def f(x):\n    s = "a string"\n    return x\n') != _code(
        b"def f(x):\n    return x\n"
    )  # a string that is not a docstring is code
    assert _code(b"def f(:\n") == b"def f(:\n"  # unparsable: its bytes


def test_the_incumbents_csv_is_judged_as_it_was_before_the_round(open_campaign):
    """A round's code that marks one of the incumbent's shapes FAIL in its CSV, and writes the
    bytes back before the round closes, would drop that shape from judging: the round reads
    the incumbent's CSVs once, before any of its code runs."""
    with open_campaign() as c:
        ctx = c.ctx
        ctx.hold_incumbent()
        rel = ctx.state.incumbent_full_csv
        path = ctx.dir / rel
        text = path.read_text()
        path.write_text(text.replace(",PASS,", ",FAIL,"))
        try:
            assert ctx.incumbent_fails(rel) == set()
            assert all(r.passed for r in ctx.table(rel).rows)
        finally:
            path.write_text(text)


def test_the_round_in_flight_reads_its_own_csv_as_it_is_now(open_campaign):
    """A round that escalates writes its full-level CSV where its quick one was: the records
    read the full one, not a copy of the quick one kept from earlier in the round."""
    with open_campaign() as c:
        ctx = c.ctx
        inc = ctx.dir / ctx.state.incumbent_full_csv
        n = ctx.state.next_round
        ctx.state.pending = PendingRound(n, Stage.MEASURING, "now", "h", "K1", "quick")
        ctx.state.next_round = n + 1
        rel = f"rounds/round-{n}/artifacts/benchmark.csv"
        (ctx.dir / rel).parent.mkdir(parents=True)
        lines = inc.read_text().splitlines(keepends=True)
        (ctx.dir / rel).write_text("".join(lines[:2]))  # quick: the first shape
        assert len(ctx.table(rel).rows) == 1
        (ctx.dir / rel).write_text("".join(lines))  # full: every shape
        assert len(ctx.table(rel).rows) == len(lines) - 1 > 1
