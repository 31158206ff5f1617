"""``ratchet analyze``: the ANALYZE profile of the incumbent on demand, for campaigns driven by
hand (``ratchet validate``), which the optimizer loop's ANALYZE never runs for."""

from __future__ import annotations

import json

import pytest

from tests.campaign.conftest import campaign_dir, make_project, ratchet


@pytest.mark.slow
def test_analyze_profiles_the_incumbent_and_records_no_round(project):
    d = campaign_dir(project)
    before = json.loads((d / "state.json").read_text())
    r = ratchet(project, "analyze")
    assert r.returncode == 0, r.stdout + r.stderr
    md = (d / "profiles" / "round-2" / "analysis.md").read_text()
    a = json.loads((d / "profiles" / "round-2" / "analysis.json").read_text())
    assert a["source_csv"] in (before["incumbent_quick_csv"], before["incumbent_full_csv"])
    assert a["shapes"] and a["peak_tflops"] > 0 and a["efficiency"] >= 0, a
    assert "## Kernel time breakdown" in md and "error" not in a["profile"], a["profile"]
    assert a["profile"]["key"]["incumbent_round"] == 1
    assert "written to" in r.stdout
    after = json.loads((d / "state.json").read_text())
    assert after["closed"] == before["closed"] and not (d / "rounds" / "round-2").exists()


@pytest.mark.slow
def test_analyze_before_the_baseline_says_what_to_run(tmp_path):
    root = make_project(tmp_path / "p")
    assert ratchet(root, "init", "--op", "tiny_gemm", "--yes").returncode == 0
    r = ratchet(root, "analyze", "--no-profile-run")
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "ratchet baseline" in r.stdout + r.stderr
