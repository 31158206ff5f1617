"""The unattended loop on the CPU example: `ratchet run` with a scripted agent, `--optimizer
manual` then `ratchet resume`, and the `--example gemm_bf16 --rehearse` scaffold."""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from pathlib import Path

import pytest

from kernel_ratchet.errors import CampaignError
from kernel_ratchet.optimizers.budget import parse_duration, too_short
from tests.campaign.conftest import KERNEL, campaign_dir, git, make_project, ratchet

AGENT = Path(__file__).resolve().parents[1] / "optimizers" / "scripted_agent.py"
GOOD = "rm[:, None] * K + kk[None, :]"
PATCHES = [
    {
        "hypothesis": {
            "hypothesis": "64x64 output tiles: 16x fewer programs",
            "bucket": "K1",
            "expected": "faster on every shape",
            "summary": "64x64 output tiles",
        },
        "edits": [
            {"path": KERNEL, "old": "BLOCK_M = 16", "new": "BLOCK_M = 64"},
            {"path": KERNEL, "old": "BLOCK_N = 16", "new": "BLOCK_N = 64"},
        ],
    },
    {
        "hypothesis": {
            "hypothesis": "skip the k offset: fewer integer ops",
            "bucket": "K1",
            "expected": "faster",
            "summary": "shifted loads",
        },
        "edits": [{"path": KERNEL, "old": GOOD, "new": GOOD + " + 1"}],
    },
    {
        "hypothesis": {
            "hypothesis": "BLOCK_K 32 and a benchmark tweak",
            "bucket": "K1",
            "expected": "faster",
            "summary": "BLOCK_K 32 + bench edit",
        },
        "edits": [
            {"path": KERNEL, "old": "BLOCK_K = 16", "new": "BLOCK_K = 32"},
            {"path": "tiny_gemm/bench.py", "append": "# the agent was here\n"},
        ],
    },
]


def _ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def _records(cdir: Path) -> list[dict]:
    rounds = sorted(
        (cdir / "rounds").glob("round-*/round.json"), key=lambda p: int(p.parent.name.split("-")[1])
    )
    return [json.loads(p.read_text()) for p in rounds]


@pytest.mark.slow
@pytest.mark.soak  # the agent protocol, ANALYZE and resume are covered one by one
def test_manual_then_resume_with_a_scripted_agent(tmp_path):
    root = make_project(tmp_path / "proj")
    r = _ok(ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "manual", "--yes"))
    assert "ratchet validate --hypothesis" in r.stdout and "PAUSED" in r.stdout
    cdir = campaign_dir(root)
    assert json.loads((cdir / "state.json").read_text())["phase"] == "OPTIMIZING"
    assert not (cdir / "report.md").exists()  # manual mode does not end the campaign

    patches = tmp_path / "patches.json"
    patches.write_text(json.dumps(PATCHES))
    cmd = " ".join(
        shlex.quote(str(x)) for x in (sys.executable, AGENT, patches, tmp_path / "state")
    )
    cmd += " {workdir} {hypothesis_file} {prompt_file}"
    r = _ok(ratchet(root, "resume", "--optimizer", "agent", "--agent-cmd", cmd))
    # a >1.5x gain is re-measured in fresh processes; on a loaded CPU that can fail
    # ("unconfirmed", not ineffective) and the agent then proposes the same change again
    recs = [x for x in _records(cdir) if x["category"] != "unconfirmed"]
    assert [(x["status"], x["category"]) for x in recs[1:]] == [
        ("ACCEPTED", "ok"),
        ("ROLLED BACK", "test"),
        ("ROLLED BACK", "scope"),
    ]
    assert recs[1]["hypothesis"] == PATCHES[0]["hypothesis"]["hypothesis"]
    assert recs[1]["direction"] == "64x64 output tiles"
    assert recs[3]["out_of_scope"] == ["tiny_gemm/bench.py"]
    # the out-of-kernel file is left exactly as the agent wrote it; the kernel is the incumbent
    assert (root / "tiny_gemm/bench.py").read_text().endswith("# the agent was here\n")
    kernel = (root / KERNEL).read_text()
    assert "BLOCK_M = 64" in kernel and "BLOCK_K = 16" in kernel and GOOD + " + 1" not in kernel
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == [KERNEL]
    # ANALYZE ran before every round, the agent calls were logged, the report was written
    profiles = []
    for n in [x["round"] for x in recs[1:]]:
        a = json.loads((cdir / f"profiles/round-{n}/analysis.json").read_text())
        assert a["label"].startswith("CPU") and a["shapes"]
        assert "phases" in a["profile"], a["profile"]  # the kernel time breakdown
        assert "## Kernel time breakdown" in (cdir / f"profiles/round-{n}/analysis.md").read_text()
        profiles.append(a["profile"])
    # one profile per incumbent: the rounds after the accepted one reuse its profile
    assert [p["key"]["incumbent_round"] for p in profiles] == [1, 2, 2]
    assert (
        "reused_from" not in profiles[1]
        and profiles[2]["reused_from"] == f"round-{recs[2]['round']}"
    )
    calls = [json.loads(x) for x in (cdir / "agent/calls.jsonl").read_text().splitlines()]
    assert [c["cost_usd"] for c in calls][-4:] == [0.01, 0.01, 0.01, None]  # stop: no cost
    report = (cdir / "report.md").read_text()
    assert "## Final report" in report and "nothing left to try" in report
    assert re.search(r"stopped:\s+T4", r.stdout)


@pytest.mark.slow
@pytest.mark.soak
def test_example_gemm_bf16_rehearsal_runs_end_to_end(tmp_path):
    dest = tmp_path / "ex"
    r = ratchet(
        tmp_path,
        "run",
        "--example",
        "gemm_bf16",
        "--dest",
        str(dest),
        "--max-iterations",
        "1",
        "--yes",
    )
    no_gpu = r.returncode != 0
    if no_gpu:  # without a GPU the command says so and asks for --rehearse
        assert "--rehearse" in r.stderr and not dest.exists()
    # a campaign of 2 rounds split over three runs, as over machine sessions: --pause keeps it
    # open when a run's budget is spent (here 1 s: spent during the BASELINE, so 0 rounds)
    r = _ok(
        ratchet(
            tmp_path,
            "run",
            "--example",
            "gemm_bf16",
            "--dest",
            str(dest),
            "--rehearse",
            "--max-iterations",
            "2",
            "--max-duration",
            "1s",
            "--pause",
            "--knobs",
            "num_stages",
            "--yes",
        )
    )
    assert "meaningless for tuning" in r.stderr
    # a campaign this run creates takes --max-iterations as its T3: said before it starts
    assert "--max-iterations 2 is also this new campaign's T3" in r.stderr
    cdir = campaign_dir(dest)
    state = json.loads((cdir / "state.json").read_text())
    assert "PAUSED" in r.stdout and "ratchet resume" in r.stdout, r.stdout
    assert state["phase"] == "OPTIMIZING" and not (cdir / "report.md").exists()
    assert [x["status"] for x in _records(cdir)] == ["BASELINE"]
    # the run's optimizer and --knobs are recorded: a plain resume drives the campaign the same
    assert json.loads((cdir / "optimizer.json").read_text()) == {
        "name": "search",
        "knobs": ["num_stages"],
    }
    r = _ok(ratchet(dest, "resume", "--max-iterations", "1", "--pause"))
    assert "PAUSED" in r.stdout and not (cdir / "report.md").exists(), r.stdout
    assert "search optimizer of the last run, knobs num_stages" in r.stderr
    assert len(_records(cdir)) == 2
    # progress lines carry the local time, and each round says where its time went
    assert re.search(r"\d\d:\d\d:\d\d round-2: asking the search optimizer", r.stderr)
    assert re.search(r"round-2 took \d+ s: test \d+, harness_quick \d+", r.stderr), r.stderr
    r = _ok(ratchet(dest, "resume", "--max-iterations", "5"))  # the campaign's T3 is 2
    recs = _records(cdir)
    assert recs[0]["status"] == "BASELINE" and len(recs) == 3, r.stdout
    prof = json.loads((cdir / "profiles/round-2/analysis.json").read_text())["profile"]
    assert prof["error"].startswith("not taken"), prof  # the search does not read it
    # the search moved one knob per round, the one --knobs allows
    assert all(x["direction"].startswith("CONFIGS/bf16") for x in recs[1:])
    assert all(":num_stages=" in x["direction"] for x in recs[1:]), recs
    assert re.search(r"stopped:\s+T3", r.stdout) and (cdir / "report.md").exists(), r.stdout
    assert "ratchet_example_gemm/configs.py" in (dest / "ratchet.yaml").read_text()


@pytest.mark.slow
def test_an_unattended_run_takes_a_declared_known_failure_with_its_baseline(tmp_path):
    """`ratchet run --known-failure` takes the BASELINE as `ratchet baseline --known-failure`
    does (here a failure no shape shows, so the baseline says it did not show); continuing a
    campaign whose baseline is taken, the option is refused before anything runs."""
    root = make_project(tmp_path / "proj")
    known = ("--known-failure", "rows past 1024 unmasked")
    _ok(ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "manual", *known, "--yes"))
    base = _records(campaign_dir(root))[0]["reason"]
    assert base.endswith("the declared failure (rows past 1024 unmasked) did not show"), base
    r = ratchet(root, "run", *known, "--yes")
    assert r.returncode != 0 and "has its baseline already; nothing was run" in r.stderr
    assert len(_records(campaign_dir(root))) == 1


def test_run_refuses_bad_options(tmp_path):
    root = make_project(tmp_path / "proj")
    r = ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "agent", "--yes")
    assert r.returncode == 2 and "--agent-cmd" in r.stderr
    r = ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "nope", "--yes")
    assert r.returncode == 2 and "search, agent, manual" in r.stderr
    r = ratchet(root, "run", "--yes")
    assert r.returncode == 2 and "--op" in r.stderr
    r = ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "manual", "--knobs", "x", "-y")
    assert r.returncode == 2 and "--knobs restricts the search optimizer" in r.stderr
    r = ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "queue", "--yes")
    assert r.returncode == 2 and "--queue DIR" in r.stderr
    r = ratchet(root, "run", "--op", "tiny_gemm", "--queue", str(tmp_path), "--yes")
    assert r.returncode == 2 and "--queue goes with --optimizer queue only" in r.stderr
    assert not (root / ".ratchet").exists()


@pytest.mark.slow
def test_a_queue_of_prepared_diffs_is_measured_unattended(tmp_path):
    """Two prepared candidates: 32x32 output tiles (accepted) and shifted loads (wrong results,
    rolled back); the run ends when the queue is spent, with its report."""
    root = make_project(tmp_path / "proj")
    queue = tmp_path / "queue"
    queue.mkdir()
    kernel = root / KERNEL
    good = kernel.read_text()
    for name, edits in (
        ("01-tiles", [("BLOCK_M = 16", "BLOCK_M = 32"), ("BLOCK_N = 16", "BLOCK_N = 32")]),
        ("02-shifted", [(GOOD, GOOD + " + 1")]),
    ):
        text = good
        for old, new in edits:
            text = text.replace(old, new)
        kernel.write_text(text)
        (queue / f"{name}.diff").write_text(git(root, "diff", "--", KERNEL))
        (queue / f"{name}.json").write_text(json.dumps({"hypothesis": f"{name} is faster"}))
        kernel.write_text(good)
    r = ratchet(root, "run", "--op", "tiny_gemm", "--optimizer", "queue", "--queue", str(queue),
                "--yes", "--max-iterations", "5")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    cdir = campaign_dir(root)
    got = [(rec["direction"], rec["status"]) for rec in _records(cdir)[1:]]
    assert got[0] == ("queue:01-tiles", "ACCEPTED") and got[1][0] == "queue:02-shifted"
    assert len(got) == 2 and got[1][1] == "ROLLED BACK"
    assert "BLOCK_M = 32" in kernel.read_text() and (cdir / "report.md").exists()
    assert json.loads((cdir / "optimizer.json").read_text()) == {
        "name": "queue",
        "path": str(queue.resolve()),
    }


def test_parse_duration():
    assert parse_duration("2h") == 7200 and parse_duration("1h30m") == 5400
    assert parse_duration("45s") == 45 and parse_duration(None) is None
    with pytest.raises(CampaignError):
        parse_duration("two hours")


def test_roofline_bound_and_efficiency_from_a_csv():
    from kernel_ratchet.harness.csv_schema import GEMM_HEADER, parse_csv_text
    from kernel_ratchet.scoring.roofline import Ceilings, analyze_table, efficiency, render_md

    # 100 TFLOPS peak, 1000 GB/s: a 4096^3 GEMM is compute-bound, a 4096x4096x16 one is not
    text = (
        GEMM_HEADER
        + "\n"
        + "\n".join(
            [
                "big,1,4096,4096,4096,PASS,50,1,,,2.748779,,90,,",
                "thin,1,4096,4096,16,PASS,1,0.1,,,0.536871,,90,,",
                "bad,1,8,8,8,FAIL,1,0,,,1,,0,,",
            ]
        )
    )
    table = parse_csv_text(text)

    class Bytes:  # bf16 operands
        dtype = None

        def bytes_moved(self, s):
            return (2.0 * (s.M * s.K + s.N * s.K + s.M * s.N), 0.0)

    ceil = Ceilings("gpu", "GPU", {"fp32": 100.0}, 1000.0)
    a = analyze_table(table, ceil, adapter=Bytes(), op="gemm_x")
    by = {s["label"]: s for s in a["shapes"]}
    assert set(by) == {"big", "thin"}  # FAIL rows are not analysed
    assert by["big"]["bound"] == "compute" and abs(by["big"]["efficiency"] - 0.5) < 0.01
    assert by["thin"]["bound"] == "memory" and by["thin"]["roofline_tflops"] < 100
    assert 0 < efficiency(a) < 1 and a["efficiency"] == efficiency(a)
    # an incumbent that passes no shape (a BASELINE declared wrong everywhere): nothing to rate
    none = analyze_table(parse_csv_text(text.replace(",PASS,", ",FAIL,")), ceil, adapter=Bytes())
    assert none["shapes"] == [] and math.isnan(none["efficiency"])
    assert "Aggregate efficiency (geomean): none: no shape passes" in render_md(2, none)


def test_roofline_counts_the_flops_the_harness_counted_for_a_grouped_gemm():
    """A grouped GEMM row's M is all groups' rows: 2·M·N·K·B would count B times its work.
    The achieved rate is the one the harness measured with the adapter's flop count."""
    from kernel_ratchet.harness.csv_schema import GEMM_HEADER, parse_csv_text
    from kernel_ratchet.scoring.roofline import Ceilings, analyze_table

    # 128 experts, 65536 rows in all: 2·65536·3072·4096 flops in 5.4775 ms = 301.1 TFLOPS
    row = "moe,128,65536,3072,4096,PASS,301.098,0.3,374.7,0.8,5.4775,8.8,28.6,28.6,28.7"
    table = parse_csv_text(GEMM_HEADER + "\n" + row)
    ceil = Ceilings("gpu", "GPU", {"fp8": 1436.0}, 4260.0)
    s = analyze_table(table, ceil, op="grouped_gemm_fp8")["shapes"][0]
    assert abs(s["achieved_tflops"] - 301.098) < 0.01
    assert abs(s["efficiency"] - 301.098 / 1436.0) < 1e-4


def test_a_round_starts_only_when_the_time_left_holds_a_typical_one():
    assert too_short(10.0, []) is None  # the first round always starts
    assert too_short(float("inf"), [100.0]) is None  # no --max-duration
    assert too_short(150.0, [100.0, 300.0, 120.0]) is None  # median 120 s fits
    why = too_short(110.0, [100.0, 300.0, 120.0])
    assert why == "has 110 s left, less than a typical round of this run (120 s)"
