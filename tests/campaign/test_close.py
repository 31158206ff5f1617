"""``ratchet close``: a campaign that cannot be reported (its baseline or the incumbent's full
validation fails) ends without a final table, every record kept; acceptance refuses it and a
new campaign on the op may start."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.cli_inprocess import run_cli

from .conftest import campaign_dir, git, make_project, ratchet

REASON = "the incumbent's full validation fails on this image's Triton"


def _files(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_closed_campaign_keeps_its_rounds_and_says_why(
    accepted_project, tmp_path, capsys, monkeypatch
):
    root = tmp_path / "proj"
    shutil.copytree(accepted_project, root, symlinks=True)
    monkeypatch.chdir(root)
    d = campaign_dir(root)
    rounds_before = _files(d / "rounds")
    rc, text = run_cli(capsys, monkeypatch, "close", "--reason", REASON)
    assert rc == 0, text
    report = (d / "report.md").read_text()
    assert f"Closed without a final validation: {REASON}" in report
    assert "Paired chain: +" in report and "round-2 (ACCEPTED): rounds/round-2" in report
    assert not (d / "report" / "benchmark_full.csv").exists()  # nothing was measured
    state = json.loads((d / "state.json").read_text())
    assert state["phase"] == "TERMINATED" and state["termination"]["code"] == "T4"
    assert REASON in state["termination"]["reason"]
    assert _files(d / "rounds") == rounds_before
    assert REASON in (d / "logs" / "optimize.md").read_text()

    rc, text = run_cli(capsys, monkeypatch, "close", "--reason", "again")
    assert rc != 0 and "ended already" in text
    rc, text = run_cli(capsys, monkeypatch, "validate", "--hypothesis", "one more")
    assert rc != 0 and "has ended" in text and "ratchet report" not in text
    rc, text = run_cli(capsys, monkeypatch, "accept")
    assert rc != 0 and "closed without a final validation" in text
    assert json.loads((d / "state.json").read_text())["phase"] == "TERMINATED"


def test_a_campaign_closed_before_its_baseline_no_longer_blocks_the_op(
    tmp_path, capsys, monkeypatch
):
    root = make_project(tmp_path / "proj")
    assert ratchet(root, "init", "--op", "tiny_gemm", "--yes").returncode == 0
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    rc, text = run_cli(capsys, monkeypatch, "init", "--op", "tiny_gemm", "--yes")
    assert rc != 0 and "ratchet close --campaign" in text  # the refusal names the way out
    rc, text = run_cli(capsys, monkeypatch, "close", "--reason", "   ")
    assert rc != 0 and "say why" in text
    rc, text = run_cli(capsys, monkeypatch, "close", "--reason", "wrong shapes")
    assert rc == 0 and "Closed before its BASELINE: wrong shapes" in text
    flat = " ".join(text.split())  # however wide the console wraps it
    assert "deleted: it held no commit" in flat and "the project is back on main" in flat, text
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert _optimize_branches(root) == []
    rc, text = run_cli(capsys, monkeypatch, "status")
    flat = " ".join(text.split())
    assert rc == 0 and "TERMINATED" in flat and "no incumbent (no baseline)" in flat, text
    rc, text = run_cli(capsys, monkeypatch, "baseline")
    flat = " ".join(text.split())
    assert rc != 0 and "has ended (closed without" in flat and "ratchet init" in flat, text
    rc, text = run_cli(capsys, monkeypatch, "init", "--op", "tiny_gemm", "--yes")
    assert rc == 0, text
    assert len(list((root / ".ratchet" / "campaigns").iterdir())) == 2


def test_a_report_stopped_in_its_final_validation_leaves_the_campaign_open(
    accepted_project, tmp_path, monkeypatch
):
    """Ctrl-C while the report measures the incumbent ends nothing: no termination is recorded,
    rounds may go on, and the next `ratchet report` writes it."""
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.profile.loader import load_profile
    from kernel_ratchet.report import final

    root = tmp_path / "proj"
    shutil.copytree(accepted_project, root, symlinks=True)
    monkeypatch.chdir(root)
    real = final.run_harness

    def stopped(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(final, "run_harness", stopped)
    c = Campaign(load_profile(root), campaign_dir(root))
    with pytest.raises(KeyboardInterrupt):
        final.report(c)
    c = Campaign(load_profile(root), campaign_dir(root))
    assert c.state.termination is None and c.state.phase.name == "OPTIMIZING"
    assert "## Termination check" not in (campaign_dir(root) / "logs/optimize.md").read_text()
    monkeypatch.setattr(final, "run_harness", real)
    text = final.report(Campaign(load_profile(root), campaign_dir(root))).text
    assert "the user asked to stop (ratchet report)" in text
    assert Campaign(load_profile(root), campaign_dir(root)).state.phase.name == "TERMINATED"


def test_close_deletes_an_empty_branch_and_keeps_one_with_a_round(
    accepted_project, tmp_path, capsys, monkeypatch
):
    root = tmp_path / "proj"
    shutil.copytree(accepted_project, root, symlinks=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    accepted = f"optimize/{campaign_dir(root).name}"
    git(root, "checkout", "-q", "main")
    rc, text = run_cli(capsys, monkeypatch, "close", "--reason", REASON)
    assert rc == 0 and f"branch {accepted} kept: it holds 1 commit(s)" in text, text
    assert ratchet(root, "init", "--op", "tiny_gemm", "--yes").returncode == 0
    (empty,) = [b for b in _optimize_branches(root) if b != accepted]
    git(root, "checkout", "-q", "main")
    rc, text = run_cli(
        capsys,
        monkeypatch,
        "close",
        "--reason",
        "wrong shapes",
        "--campaign",
        empty.removeprefix("optimize/"),
    )
    assert rc == 0 and f"branch {empty} deleted: it held no commit beyond" in text, text
    assert _optimize_branches(root) == [accepted]


def _optimize_branches(root) -> list[str]:
    return git(root, "branch", "--list", "optimize/*", "--format=%(refname:short)").split()
