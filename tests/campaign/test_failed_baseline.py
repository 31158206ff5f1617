"""A baseline that fails keeps its round's logs, and its error names where they are."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.rounds.baseline import BaselineFailure
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.profile.loader import load_profile

from .conftest import campaign_dir, git, make_project, ratchet, set_blocks


def test_the_failed_baselines_error_names_the_log_where_it_was_kept(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj")
    r = ratchet(root, "init", "--op", "tiny_gemm", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(root)

    def no_shape_passes(c, started, known_failure):
        log = c.round_dir(1) / "artifacts" / "harness.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("[harness] s1: FAIL (why)\n")
        raise BaselineFailure(f"no shape passes the harness's correctness check (see {log})")

    monkeypatch.setattr(engine, "measure_baseline", no_shape_passes)
    c = Campaign(load_profile(root), campaign_dir(root))
    with pytest.raises(CampaignError) as err:
        c.baseline()
    named = re.search(r"\(see (\S+harness\.log)\)", str(err.value))
    assert named, str(err.value)
    assert ".failed-baseline-round-1-" in named.group(1)
    # what init froze (kernel, test command) changes only in a new campaign: the error says so
    assert "ratchet close --reason" in str(err.value) and "`ratchet init` again" in str(err.value)
    assert "FAIL (why)" in Path(named.group(1)).read_text()
    assert not c.ctx.round_dir(1).exists()  # set aside: the next `ratchet baseline` starts clean
    # a second attempt in the same minute keeps its logs too, beside the first's
    c = Campaign(load_profile(root), campaign_dir(root))
    with pytest.raises(CampaignError) as again:
        c.baseline()
    second = re.search(r"\(see (\S+harness\.log)\)", str(again.value))
    assert second and second.group(1) != named.group(1), str(again.value)
    assert Path(named.group(1)).exists() and Path(second.group(1)).exists()
    # each attempt is in the campaign's log, its kept directory named from the campaign
    log = (campaign_dir(root) / "logs" / "optimize.md").read_text()
    attempts = re.findall(r"BASELINE attempt failed: no shape passes .*kept as (\S+)\.", log)
    assert len(attempts) == 2 and str(root) not in log, log
    assert all((campaign_dir(root) / a).is_dir() for a in attempts)


def test_a_reason_naming_the_round_relative_to_the_project_follows_it(tmp_path, monkeypatch):
    root = make_project(tmp_path / "proj")
    assert ratchet(root, "init", "--op", "tiny_gemm", "--yes").returncode == 0
    monkeypatch.chdir(root)

    def fails(c, started, known_failure):
        (c.round_dir(1) / "artifacts").mkdir(parents=True, exist_ok=True)
        raise BaselineFailure(f"the focused test failed (see {c.rel(c.round_dir(1))}/artifacts)")

    monkeypatch.setattr(engine, "measure_baseline", fails)
    c = Campaign(load_profile(root), campaign_dir(root))
    with pytest.raises(CampaignError, match=r"see rounds/\.failed-baseline-round-1-\S+/artifacts"):
        c.baseline()


def test_a_baseline_with_a_failing_shape_says_which_and_why(tmp_path, ratchet_here):
    """A shape the focused test does not cover fails the harness's check: the BASELINE still
    stands on the shapes that pass, and its reason names the one that failed and why."""
    root = make_project(tmp_path / "proj")
    kernel = root / "tiny_gemm" / "kernel.py"
    kernel.write_text(
        kernel.read_text().replace("    return c\n", "    return c * 0 if M == 20 else c\n")
    )
    git(root, "commit", "-qm", "wrong on 20 rows", "--", "tiny_gemm/kernel.py")
    shapes = (
        '[{"label": "m32", "M": 32, "N": 32, "K": 32}, {"label": "m20", "M": 20, "N": 32, "K": 32}]'
    )
    for args in (
        ("init", "--op", "tiny_gemm", "--yes", "--shapes", f"inline:{shapes}"),
        ("baseline",),
    ):
        r = ratchet_here(root, *args)
        assert r.returncode == 0, r.stdout + r.stderr
    state = (campaign_dir(root) / "rounds" / "round-1" / "round.json").read_text()
    assert "1/2 shapes PASS (m20: " in state and "SNR" in state, state
    assert "judged on the shapes that pass" in state
    # a round is judged on m32 alone: the incumbent's own failure on m20 is not the candidate's
    set_blocks(root, M=32, N=32)
    r = ratchet_here(root, "validate", "--hypothesis", "32x32 tiles")
    rec = json.loads((campaign_dir(root) / "rounds" / "round-2" / "round.json").read_text())
    assert rec["category"] != "correctness" and "Check=FAIL" not in rec["reason"], rec["reason"]
    assert "m20" not in (campaign_dir(root) / "rounds/round-2/artifacts/paired.json").read_text()


def test_the_baseline_refuses_a_kernel_edited_since_init(tmp_path, monkeypatch):
    """An uncommitted kernel edit made after `init` is not measured as the baseline (it would
    then be the incumbent's numbers but not its commit, and skip its own round)."""
    root = make_project(tmp_path / "proj")
    assert ratchet(root, "init", "--op", "tiny_gemm", "--yes").returncode == 0
    monkeypatch.chdir(root)
    c = Campaign(load_profile(root), campaign_dir(root))
    kernel = root / c.m.kernel_source[0]
    committed = kernel.read_text()
    kernel.write_text(committed + "\nEDITED = True\n")
    measured = []
    monkeypatch.setattr(engine, "measure_baseline", lambda *a: measured.append(a))
    with pytest.raises(CampaignError, match="differ from the starting commit") as err:
        c.baseline()
    assert c.m.kernel_source[0] in str(err.value) and "git stash" in str(err.value)
    assert not measured and kernel.read_text().endswith("EDITED = True\n")  # the edit is kept
    assert c.state.phase.name == "INITIALIZED" and c.state.pending is None


def test_a_declared_known_failure_takes_the_baseline_and_binds_later_rounds(tmp_path, ratchet_here):
    """The test that comes with a correctness fix fails on the unmodified kernel: `baseline
    --known-failure` takes the baseline anyway and records why; a later round must pass it."""
    root = make_project(tmp_path / "proj")
    kernel = root / "tiny_gemm" / "kernel.py"
    kernel.write_text(
        kernel.read_text().replace("    return c\n", "    return c * 0 if M == 20 else c\n")
    )
    test = root / "tests" / "test_kernel.py"
    test.write_text(
        test.read_text()
        + "\n\ndef test_twenty_rows():\n"
        + "    a, b = torch.ones(20, 32), torch.ones(16, 32)\n"
        + "    assert bool((matmul_nt(a, b) == 32).all())\n"
    )
    git(root, "commit", "-qm", "wrong on 20 rows, and its test", "--", "tiny_gemm", "tests")
    assert ratchet_here(root, "init", "--op", "tiny_gemm", "--yes").returncode == 0
    r = ratchet_here(root, "baseline")
    assert r.returncode != 0 and "--known-failure" in r.stderr, r.stderr
    r = ratchet_here(root, "baseline", "--known-failure", "two\n## Round 9 — ACCEPTED")
    assert r.returncode == 2 and "one line" in r.stderr, r.stderr
    r = ratchet_here(root, "baseline", "--known-failure", "rows of 20 come out zero")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((campaign_dir(root) / "rounds" / "round-1" / "round.json").read_text())
    assert "focused test failed as declared (rows of 20 come out zero): " in rec["reason"]
    assert "test_twenty_rows" in rec["reason"] and rec["status"] == "BASELINE"
    set_blocks(root, M=32, N=32)  # a change that leaves the bug: its round fails the test
    r = ratchet_here(root, "validate", "--hypothesis", "32x32 tiles", "--fix")
    rec = json.loads((campaign_dir(root) / "rounds" / "round-2" / "round.json").read_text())
    assert rec["status"] == "ROLLED BACK" and "test_twenty_rows" in rec["reason"], rec["reason"]
