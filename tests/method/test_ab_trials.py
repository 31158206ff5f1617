"""The A/B trials of the measurement method: the table's counts from recorded trial rows, and a
tiny run of every scenario on the CPU through real worker processes (the interpreter: the
numbers mean nothing, the planted adapters and the JSON are what is tested)."""

from __future__ import annotations

import json

import pytest

from kernel_ratchet.method import ab_trials
from kernel_ratchet.method.ab_trials import (
    TrialPlan,
    regression_rollback,
    round_spread,
    small_slower,
    summarize,
    table,
)


def _row(status: str, verdict: str, ratios: dict, **extra) -> dict:
    return {
        "trial": 0,
        "wall_s": 30.0,
        "failure": None,
        "status": status,
        "verdict": verdict,
        "rounds": 10,
        "shape_ratios": ratios,
        **extra,
    }


def test_a_regression_rollback_is_the_decisions_regressed_shapes():
    assert regression_rollback(_row("ROLLED BACK", "SLOWER", {}, regressed=["a"]))
    assert not regression_rollback(
        _row("ROLLED BACK", "SLOWER", {"a": [0.97, 0.96, 0.98]}, regressed=[], regressions=["a"])
    )


def test_rows_without_regressed_derive_it_from_the_named_shapes_ratios():
    row = _row("ROLLED BACK", "SLOWER", {"a": [0.94, 0.93, 0.95], "b": [0.99, 0.98, 1.0]})
    assert regression_rollback({**row, "regressions": ["a"]})
    assert not regression_rollback({**row, "regressions": ["b"]})
    assert not regression_rollback({**row, "status": "ACCEPTED", "regressions": ["a"]})


def test_small_slower_counts_shapes_confirmed_slower_by_under_the_threshold():
    ratios = {"a": [0.98, 0.97, 0.99], "b": [0.98, 0.96, 1.01], "c": [0.93, 0.92, 0.94]}
    assert small_slower(_row("ROLLED BACK", "SLOWER", ratios)) == 1  # b's CI reaches 1


def test_round_spread_needs_kept_times():
    assert round_spread([_row("ROLLED BACK", "SAME", {})]) is None
    times = {
        "incumbent": {"a": {"fwd": [1.0, 1.02, 0.98, 1.0, 1.01]}},
        "candidate": {"a": {"fwd": [1.0, 1.0, 1.0, 1.0, 1.0]}},
    }
    spread = round_spread([_row("ROLLED BACK", "SAME", {}, times=times)])
    assert spread is not None and 0.0 < spread < 0.05


def test_the_table_counts_each_scenarios_outcomes(tmp_path):
    results = {
        "A/A": [_row("ROLLED BACK", "SAME", {"a": [1.0, 0.99, 1.01]}, regressed=[])] * 2,
        "slower 3%": [_row("ROLLED BACK", "SLOWER", {"a": [0.97, 0.96, 0.98]}, regressed=[])],
        "faster 5%": [],
    }
    text = table(results)
    lines = text.splitlines()
    assert len(lines) == 4  # header, rule, one line per scenario with rows
    assert lines[2].startswith("| A/A | 2 | 0 | 0 | 0 | 0 of 2 | 0 | 30.0 | 10 | - |")
    assert lines[3].startswith("| slower 3% | 1 | 0 | 1 | 0 | 1 of 1 | 0 |")
    (tmp_path / "a.json").write_text(json.dumps(results))
    (tmp_path / "b.json").write_text(json.dumps({"A/A": results["A/A"]}))
    merged = summarize([tmp_path / "a.json", tmp_path / "b.json"])
    assert "| A/A | 4 | 0 |" in merged


def test_the_scenarios_plant_their_effect_on_the_right_side():
    sides = ab_trials.scenario_sides(cuda=True)
    assert sides["A/A"][0] == sides["A/A"][1]
    assert sides["slower 3%"][1].endswith("planted:SlowerBf16")
    assert sides["faster 5%"][0].endswith("planted:FasterBaselineBf16")
    assert ab_trials.scenario_sides(cuda=False)["slower 3%"][1].endswith(":SlowerFp16")


@pytest.mark.soak
def test_one_cpu_trial_of_every_scenario(tmp_path):
    out = tmp_path / "trials.json"
    results = ab_trials.run_trials(TrialPlan(trials=1, cuda=False), out, tmp_path / "logs")
    assert list(results) == list(ab_trials.SCENARIOS)
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    for name, rows in results.items():
        (row,) = rows
        assert row["failure"] is None, (name, row["failure"])
        assert row["status"] in ("ACCEPTED", "ROLLED BACK") and row["rounds"] >= 3
        assert set(row["shape_ratios"]) == {"m32_n32_k32", "m48_n32_k32"}
    assert list((tmp_path / "logs").glob("*/timings.jsonl"))
    assert table(results).count("\n") == 4


def test_the_command_line_chooses_launch_bound_shapes_and_unpinned_workers():
    args = ab_trials.parse_args(["--shapes", "decode", "--unpinned", "--scenario", "A/A"])
    plan = ab_trials.plan_of(args, cuda=True)
    assert (plan.shape_set, plan.pinned, plan.scenarios, plan.cuda) == (
        "decode",
        False,
        ("A/A",),
        True,
    )
    plan = ab_trials.plan_of(ab_trials.parse_args(["--cpu"]), cuda=True)
    assert (plan.shape_set, plan.pinned, plan.cuda) == ("large", True, False)
