"""A whole campaign on the CPU example with real git, driven through the `ratchet` CLI:
init -> baseline -> an improving change accepted -> a change that breaks correctness rolled
back -> a slower change rolled back -> report -> accept.

The campaign after ``init`` is checked on a fresh project; the rounds go on from a copy of the
session's campaign whose first three rounds (baseline, accepted, broken) the same ``init``,
``baseline`` and ``validate`` commands made (the MCP tests read the same one).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import yaml

from kernel_ratchet.campaign.manifest import SPEC_FIELDS
from kernel_ratchet.harness.csv_schema import GEMM_HEADER, read_csv
from kernel_ratchet.harness.level_timing import QUICK_SAMPLES
from tests.campaign.conftest import (
    KERNEL,
    campaign_dir,
    cli_env,
    git,
    make_project,
    ratchet,
    session_two_rounds,
    set_blocks,
)
from tests.cli_inprocess import cli_result

TINY_COUNT = 4  # shapes in examples/tiny_gemm/tiny_gemm/shapes.py (TINY)


def _ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.mark.slow
def test_check_then_init_opens_a_branch_with_an_empty_harness(tmp_path):
    root = make_project(tmp_path / "proj")
    start = git(root, "rev-parse", "HEAD").strip()
    _ok(ratchet(root, "check", "--op", "tiny_gemm"))
    _ok(ratchet(root, "init", "--op", "tiny_gemm", "--yes"))
    cdir = campaign_dir(root)
    assert re.fullmatch(r"tiny_gemm_TRITON_cpu_\d{8}", cdir.name)
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == f"optimize/{cdir.name}"
    assert git(root, "rev-parse", "HEAD").strip() == start
    harness = (cdir / "quick_test_bench.py").read_text()
    assert "SHAPES = [\n]" in harness  # generated with empty SHAPES


@pytest.fixture
def two_rounds(tmp_path_factory) -> Path:
    return session_two_rounds(tmp_path_factory)


@pytest.mark.slow
def test_whole_campaign(two_rounds, capsys, monkeypatch):
    # init, baseline, round-2 (32x32 tiles, accepted) and round-3 (shifted loads, rolled back)
    # ran: the session's project, copied
    root = two_rounds
    start = git(root, "rev-parse", "main").strip()  # the user's branch, where init started
    cdir = campaign_dir(root)
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == f"optimize/{cdir.name}"
    # exact SPEC layout
    for rel in (
        "manifest.yaml",
        "quick_test_bench.py",
        "logs/optimize.md",
        "logs/performance_trend.md",
        "profiles",
        "rounds/round-1/summary.md",
        "rounds/round-1/kernel_snapshot/tiny_gemm/kernel.py",
        "rounds/round-1/artifacts/benchmark.csv",
    ):
        assert (cdir / rel).exists(), rel
    # the kernels each shape's checked call launched: what the search may move
    launched = json.loads((cdir / "rounds/round-1/artifacts/launches.json").read_text())
    assert len(launched) == TINY_COUNT and set(map(tuple, launched.values())) == {("_matmul_nt",)}
    args = json.loads((cdir / "rounds/round-1/artifacts/launch_args.json").read_text())
    for label, kernels in args.items():  # each launch's sizes and tile constexprs
        (one,) = kernels["_matmul_nt"]
        assert set(one) == {"M", "N", "K", "BM", "BN", "BK"}
        assert label == f"m{one['M']}_n{one['N']}_k{one['K']}"
    prov = json.loads((cdir / "rounds/round-1/artifacts/provenance.json").read_text())
    assert prov["engine"]["engine"] == "perf_counter" and prov["environment_hash"]
    assert prov["candidate_commit"] == start and prov["level"] == "full"
    csv1 = cdir / "rounds/round-1/artifacts/benchmark.csv"
    assert csv1.read_text().splitlines()[0] == GEMM_HEADER
    manifest = yaml.safe_load((cdir / "manifest.yaml").read_text())
    assert list(manifest)[: len(SPEC_FIELDS)] == list(SPEC_FIELDS)
    assert 3 <= len(manifest["representative_shapes"]) <= 5
    rel = f".ratchet/campaigns/{cdir.name}"
    assert manifest["quick_command"] == f"python {rel}/quick_test_bench.py"
    assert manifest["csv_schema"]["header"] == GEMM_HEADER
    for label in manifest["representative_shapes"]:
        assert f"'label': '{label}'" in (cdir / "quick_test_bench.py").read_text()

    # round 2: larger output tiles run far faster in the interpreter -> ACCEPTED, one commit
    msg = git(root, "log", "-1", "--format=%B")
    assert re.match(r"\[optimize\] tiny_gemm TRITON round-2: 32x32 output tiles", msg)
    assert "Hypothesis: 32x32 output tiles: 4x fewer programs" in msg
    assert re.search(r"Result: \S+ -> \S+ \(\+\d+\.\d%\)", msg)
    assert f"Details: .ratchet/campaigns/{cdir.name}/logs/optimize.md" in msg  # SPEC section 4
    assert f"Record: campaign {cdir.name}, rounds/round-2/summary.md in its records" in msg
    sealed = json.loads((cdir / "state.json").read_text())["records"]  # anchored in the commit
    assert f"Round-record: sha256:{sealed['rounds/round-2/round.json']}" in msg
    assert f"Campaign-manifest: sha256:{sealed['manifest.yaml']}" in msg
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [KERNEL]
    accepted = (cdir / "rounds/round-2/summary.md").read_text()
    assert "measured in the training idiom" in accepted  # the dynamic transfer check ran
    assert "- Decision: ACCEPT-as-real" in accepted
    lines = accepted.splitlines()
    table, phase_table = (
        list(itertools.takewhile(lambda ln: ln.startswith("|"), lines[i:]))
        for i, ln in enumerate(lines)
        if ln.startswith("| Shape |")
    )
    assert "(paired) | Incumbent (paired) |" in table[0] and "| Harness " in table[0]
    for line in table[2:]:  # both sides' numbers come from the A/B that decided
        assert all(float(x) > 0 for x in line.split("|")[3:5]), line
    # and each phase's paired times, median and range per side, for every shape
    assert phase_table[0].startswith("| Shape | fwd: incumbent -> candidate")
    assert len(phase_table) == len(table) > 2 and " -> " in phase_table[2]
    assert "from the paired A/B, candidate side; the round's harness run:" in accepted
    record = json.loads((cdir / "rounds/round-2/round.json").read_text())
    assert record["harness_command"].startswith(f"python {rel}/quick_test_bench.py --level quick")
    assert str(root) not in record["harness_command"] and str(root) not in accepted
    took = record["seconds"]
    # "workers": the wait for the workers' start and checks, where they outlasted the test
    assert set(took) - {"workers"} == {"test", "harness_quick", "ab_quick", "transfer", "measure"}
    assert took["measure"] >= sum(v for k, v in took.items() if k != "measure") - 0.5 > 0
    art = cdir / "rounds/round-2/artifacts"
    for side in ("incumbent", "candidate"):  # one worker per side served the A/B and transfer
        log = (art / f"paired/{side}_worker.log").read_text()
        assert log.count("ready after") == 1 and " transfer " in log, log
        # each shape checked once, beside the focused test, and the A/B reused the checks
        assert log.count("] check ") == len(manifest["representative_shapes"]), log
    assert json.loads((art / "paired.json").read_text())["run"]["check_wall_s"] < 1.0
    # the quick harness (diagnostic times) took fewer samples than the BASELINE's, and says so
    provs = [cdir / f"rounds/{r}/artifacts/provenance.json" for r in ("round-1", "round-2")]
    samples = [json.loads(p.read_text())["engine"]["samples"] for p in provs]
    assert samples == [manifest["timing_params"]["samples"], QUICK_SAMPLES], samples
    assert not list(art.glob("transfer_*.log"))
    incumbent = git(root, "show", f"HEAD:{KERNEL}")

    # round 3: wrong indexing -> focused test fails -> ROLLED BACK (the session's round)
    assert (root / KERNEL).read_text() == incumbent
    assert "+ 1" in (cdir / "rounds/round-3/kernel_snapshot" / KERNEL).read_text()
    record = json.loads((cdir / "rounds/round-3/round.json").read_text())
    assert record["status"] == "ROLLED BACK" and record["category"] == "test", record
    assert set(record["seconds"]) == {"test", "measure"}  # the harness never ran
    # the reason names the failing test and the log from the project root
    assert "failed: tests/" in record["reason"] and str(root) not in record["reason"], record
    assert "(see .ratchet/campaigns/" in record["reason"], record
    summary3 = (cdir / "rounds/round-3/summary.md").read_text()
    assert "- Benchmark gain: not judged: the round stopped before any measurement" in summary3
    assert "- Decision: not judged" in summary3 and "ACCEPT-as-real" not in summary3

    # round 4: smaller K tiles double the k-loop -> slower -> ROLLED BACK
    set_blocks(root, K=8)
    r = ratchet(root, "validate", "--hypothesis", "BLOCK_K 8", "--lesson", "k-loop cost")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ROLLED BACK" in r.stdout
    assert (root / KERNEL).read_text() == incumbent
    assert "BLOCK_K = 8" in (cdir / "rounds/round-4/kernel_snapshot" / KERNEL).read_text()
    # the user's uncommitted work survived every rollback
    assert (root / "notes.txt").read_text() == "my notes\n"
    assert "a local edit the user has not committed" in (root / "pyproject.toml").read_text()
    assert len(git(root, "log", "--format=%H", f"{start}..HEAD").split()) == 1

    trend = (cdir / "logs/performance_trend.md").read_text()
    rows = [ln for ln in trend.splitlines() if ln.startswith("| round-")]
    assert [ln.split("|")[2].strip() for ln in rows] == [
        "BASELINE",
        "ACCEPTED",
        "ROLLED BACK",
        "ROLLED BACK",
    ]
    assert "| — |" in rows[0]
    # the harness's own numbers per phase (diagnostic: 3 samples at the quick level, so their
    # sign on a loaded CPU is not the decision's; the paired chain below is)
    assert re.search(r"step -, fwd [+-]\d+\.\d{3}%, bwd -", rows[1])
    summary = (cdir / "rounds/round-4/summary.md").read_text()
    for section in (
        "## Hypothesis",
        "## Single change",
        "## Results",
        "## Decision",
        "## Attribution",
        "## Next direction",
        "## Rollback Analysis",
        "## Real-training transfer check",
    ):
        assert section in summary, section
    assert "Lesson: k-loop cost (the driver's, stated before the round)" in summary
    # a measured rollback's transfer section carries no decision of its own
    assert "- Decision: none: the round was rolled back (the gain would read ACCEPT" in summary
    opt = (cdir / "logs/optimize.md").read_text()
    assert "### Stagnation review after round-4" in opt

    # the commands after the last round run in this process: `ratchet`'s main, as a user sees
    # it, without an interpreter's start-up each
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHONPATH", cli_env(root)["PYTHONPATH"])  # for the REPORT's harness

    def ratchet_here(*args: str):
        return cli_result(capsys, monkeypatch, *args)

    assert (cdir / ".incumbent").is_dir()  # the paired A/B's incumbent tree, while it runs
    r = _ok(ratchet_here("report"))
    assert "Headline (paired chain" in r.stdout and "Harness total (diagnostic" in r.stdout
    # ended: the incumbent's worktree is gone, from disk and from git's list
    assert not (cdir / ".incumbent").exists()
    assert ".incumbent" not in git(root, "worktree", "list")
    report = (cdir / "report.md").read_text()
    assert "## Final report" in report and "## Verified-ineffective directions" in report
    # measured without a GPU, the report says its gains are the host's
    import torch

    on_cpu = not torch.cuda.is_available()
    assert ("CPU: this campaign ran without a GPU" in report) is on_cpu
    # SPEC 8: the gain re-attributed to S_real / W_real / R_real with the inflation gap; the one
    # accepted round is a tunables change (K bucket), so it all transfers and nothing is called out
    assert "- S_real (K1–K4, transfers 1:1): +" in report and "(round-2)" in report
    assert "- R_real (rejected / overfit, must be 0): +0.00% (none)" in report
    assert "Inflation gap: headline − (S_real + W_real)" in report and "CALLED OUT" not in report
    # the paired chain: round-2's paired ratio against the baseline, round-4's on top of it
    closed = {e["round"]: e for e in json.loads((cdir / "state.json").read_text())["closed"]}
    g2, g4 = closed[2]["gain"], closed[4]["gain"]
    assert closed[2]["paired_chain"] == pytest.approx(g2) and g2 > 0
    assert closed[3]["paired_chain"] is None  # the focused test failed: nothing was measured
    assert closed[4]["paired_chain"] == pytest.approx((1 + g2) * (1 + g4) - 1)
    d2 = json.loads((cdir / "rounds/round-2/round.json").read_text())["decision"]
    chain = f"- Paired chain: {g2 * 100:+.2f}% (round-2 {1 + g2:.4f}x [{1 + d2['gain_ci'][0]:.4f}"
    assert chain in report, report
    # the full validation's per-shape paired chain: the accepted round's per-shape ratio (the
    # rolled-back round-4's is not in it)
    for x in d2["per_shape"]:
        row = next(ln for ln in report.splitlines() if ln.startswith(f"| {x['label']} |"))
        assert row.endswith(f"| {x['delta'] * 100:+.2f}% (1 of 1 rounds) |"), row
    # the audit re-attributes the report's headline (the paired chain), not a harness total
    assert f"- Headline: {g2 * 100:+.2f}% (the paired chain, the report's headline" in report
    assert "two single harness measurements taken at different times" in report
    st = ratchet_here("status")
    assert "(paired" in st.stdout and f"{g2 * 100:+.2f}%" in st.stdout, st.stdout
    # a campaign closed its rounds before the chain was kept: status rebuilds it from records
    state = json.loads((cdir / "state.json").read_text())
    for e in state["closed"]:
        e.pop("paired_chain", None)
    (cdir / "state.json").write_text(json.dumps(state))
    rows = json.loads(_ok(ratchet_here("status", "--json")).stdout)["rounds"]
    assert [r.get("paired_chain") for r in rows][1:4] == [
        pytest.approx(g2),
        None,
        pytest.approx((1 + g2) * (1 + g4) - 1),
    ]
    final = read_csv(cdir / "report/benchmark_full.csv")
    assert len(final.rows) == TINY_COUNT and all(row.passed for row in final.rows)
    # the written report is sealed: `ratchet report` prints it again only as it was written
    text = (cdir / "report.md").read_text()
    (cdir / "report.md").write_text(text.replace("Headline (paired chain", "Headline (edited"))
    r = ratchet_here("report")
    assert r.returncode == 7 and "report.md" in r.stderr, r.stdout + r.stderr
    (cdir / "report.md").write_text(text)
    # acceptance on the user's branch, which lacks the campaign's commits: refused, unrecorded
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(root, "checkout", "-q", "main")
    r = ratchet_here("accept")
    assert r.returncode != 0 and "does not hold the campaign's incumbent" in r.stderr, r.stderr
    assert f"git checkout {branch}" in r.stderr
    assert "## Acceptance" not in (cdir / "logs/optimize.md").read_text()
    git(root, "checkout", "-q", branch)
    r = _ok(ratchet_here("accept"))
    assert "ACCEPTED" in r.stdout
    assert "## Acceptance" in (cdir / "logs/optimize.md").read_text()
    r = ratchet_here("validate", "--hypothesis", "after the end")
    assert r.returncode == 5 and "ended" in r.stderr
