"""The simulation of the paired decision rule: the noise model, the scenarios and the table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kernel_ratchet.method import rule_sim
from kernel_ratchet.method.rule_sim import NoiseModel, scenario_speeds, tally, trial
from kernel_ratchet.method.trace_noise import read_traces

MODEL = NoiseModel((0.5, 1.0, 2.0), (0.01, 0.01, 0.01), 0.02)


def test_a_planted_gain_is_accepted_and_a_planted_slowdown_is_not():
    gain = trial(MODEL, scenario_speeds(MODEL, "faster 5%"), seed=1)
    slow = trial(MODEL, scenario_speeds(MODEL, "slower 3%"), seed=1)
    aa = trial(MODEL, scenario_speeds(MODEL, "A/A"), seed=1)
    assert gain.accepted and 1.03 < gain.aggregate_ratio < 1.07
    assert not slow.accepted and slow.time_weighted.confirmed_slower
    assert not aa.accepted
    counts = tally([gain, slow, aa])
    assert (counts["trials"], counts["accepted"], counts["time_weighted_slower"]) == (3, 1, 1)


def test_mixed_speeds_follow_the_faster_list():
    speeds = scenario_speeds(MODEL, "mixed", faster=[0])
    assert list(speeds.values()) == pytest.approx([1.10, 1 / 1.02, 1 / 1.02])


def test_a_bad_noise_model_is_refused():
    with pytest.raises(ValueError, match="one time and one noise"):
        NoiseModel((1.0, 2.0), (0.01,))
    with pytest.raises(ValueError, match="positive"):
        NoiseModel((0.0,), (0.01,))


def test_the_command_prints_the_table_and_refuses_bad_arguments(capsys):
    argv = ["--shape-ms", "0.5,1", "--noise", "0.01,0.01", "--trials", "2", "--scenario", "A/A"]
    assert rule_sim.main(argv) == 0
    out = capsys.readouterr().out
    assert "| A/A | 2 | 0 |" in out and "shape ms (0.5, 1.0)" in out
    assert rule_sim.main(["--shape-ms", "1,2", "--noise", "0.1"]) == 2
    assert "one time and one noise" in capsys.readouterr().out


def test_the_first_look_of_graph_replay_campaigns_holds_in_the_fla_model():
    """The 5-round first look that kernel-time campaigns use (``paired_settings``) still
    accepts a 5% gain and rolls back a 3% slowdown under the noise measured in the fla A/Bs."""
    from kernel_ratchet.campaign.rounds.paired import K_START, K_START_GRAPH, paired_settings
    from kernel_ratchet.harness.timing.quantity import Measure

    assert paired_settings(True, Measure("kernel_time", "cold"))[1] == K_START_GRAPH == 5
    assert paired_settings(True, Measure("step_time", "warm"))[1] == K_START == 10
    fla = NoiseModel(*rule_sim.PRESETS["fla-graph"])
    gain = trial(fla, scenario_speeds(fla, "faster 5%"), seed=3, k_start=K_START_GRAPH)
    slow = trial(fla, scenario_speeds(fla, "slower 3%"), seed=3, k_start=K_START_GRAPH)
    assert gain.accepted and slow.time_weighted.confirmed_slower and not slow.accepted
    assert max(s.n_rounds for s in gain.per_shape) == K_START_GRAPH  # decided at the first look


def _write_trace(path, rounds, labels, sigma, seed, turns=1):
    """A paired A/A trace: both sides of a visit share a clock, each value its own noise."""
    rng = np.random.default_rng(seed)
    lines = []
    for r in range(rounds):
        for i, label in enumerate(labels):
            clock = math.exp(rng.normal(0.0, 0.05))
            for phase, base in (("fwd", 1.0 + i), ("bwd", 2.0 + 2 * i)):
                for side in ("incumbent", "candidate"):
                    for _ in range(turns):
                        ms = base * clock * math.exp(rng.normal(0.0, sigma))
                        row = {"round": r, "label": label, "phase": phase, "side": side}
                        lines.append(json.dumps({**row, "ok": True, "median_ms": ms}))
    lines.append(
        json.dumps(
            {
                "round": 0,
                "label": labels[0],
                "phase": "fwd",
                "side": "candidate",
                "ok": False,
                "median_ms": None,
            }
        )
    )
    path.write_text("\n".join(lines) + "\n")


def test_traces_give_each_shape_its_step_time_and_centred_pairs(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write_trace(a, 12, ["x", "y"], 0.01, seed=1)
    _write_trace(b, 8, ["x", "y"], 0.01, seed=2, turns=2)
    found = read_traces([a, b])
    assert found.labels == ("x", "y")
    assert found.rounds == (20, 20)
    # the sides of an A/A are interchangeable: every ratio comes with its mirror image
    assert all(np.allclose(np.sort(r), np.sort(-r)) for r in found.residuals)
    # fwd + bwd summed: 3 ms and 6 ms, the shared clock cancelled in the pairs
    assert found.shape_ms == pytest.approx((3.0, 6.0), rel=0.05)
    assert all(abs(float(np.median(r))) < 1e-12 for r in found.residuals)
    # per value sigma of a fwd+bwd sum of two 1% values is below 1%, far below the 5% clock
    assert all(0.003 < s < 0.012 for s in found.sigma), found.sigma


def test_traces_that_are_not_paired_rounds_are_refused(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_traces([bad])
    few = tmp_path / "few.jsonl"
    _write_trace(few, 2, ["x"], 0.01, seed=0)
    with pytest.raises(ValueError, match="at least 3"):
        read_traces([few])


def test_the_rule_on_trace_noise_keeps_its_targets_and_wide_noise_is_not_accepted(tmp_path):
    quiet, loud = tmp_path / "quiet.jsonl", tmp_path / "loud.jsonl"
    _write_trace(quiet, 20, ["x", "y", "z"], 0.005, seed=3)
    _write_trace(loud, 20, ["x", "y", "z"], 0.08, seed=4)
    for path in (quiet, loud):
        found = read_traces([path])
        model = NoiseModel(found.shape_ms, found.sigma)
        res = found.residuals
        gain = [trial(model, scenario_speeds(model, "faster 5%"), s, residuals=res) for s in (0, 1)]
        aa = [trial(model, scenario_speeds(model, "A/A"), s, residuals=res) for s in (0, 1)]
        assert not any(d.accepted for d in aa)
        if path is quiet:  # 0.5% noise resolves a 5% gain; 8% noise must not fake one
            assert all(d.accepted for d in gain)
    assert rule_sim.main(["--traces", str(quiet), "--trials", "2", "--scenario", "A/A"]) == 0
    assert rule_sim.main(["--traces", str(quiet), "--noise", "0.1"]) == 2
    assert rule_sim.main(["--traces", str(tmp_path / "missing.jsonl")]) == 2


def test_a_higher_equivalence_floor_ends_a_no_gain_run_at_the_first_look():
    from kernel_ratchet.scoring.paired_looks import PairedLooks

    noisy = NoiseModel((0.5, 1.0, 2.0), (0.012, 0.012, 0.012), 0.0)
    aa = scenario_speeds(noisy, "A/A")

    def rounds(floor: float) -> list[int]:
        rule = PairedLooks(equivalence_floor=floor)
        runs = [trial(noisy, aa, seed=s, rule=rule, k_start=5) for s in range(6)]
        assert not any(r.accepted for r in runs)
        return [max(x.n_rounds for x in r.per_shape) for r in runs]

    assert all(n == 5 for n in rounds(0.03))
    assert sum(rounds(0.01)) > 6 * 5  # the default floor measures some of them on


def test_gain_scenarios_speed_every_shape_up_and_run_from_the_command_line(capsys):
    speeds = scenario_speeds(MODEL, f"{rule_sim.GAIN_PREFIX}1.5%")
    assert list(speeds.values()) == pytest.approx([1.015] * 3)
    argv = ["--shape-ms", "0.5,1", "--noise", "0.001,0.001", "--trials", "2", "--gain", "3"]
    assert rule_sim.main([*argv, "--equivalence", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "| faster by 3% | 2 | 2 |" in out and "equivalence floor 0.02" in out
    assert "| A/A |" not in out  # --gain alone runs only its scenarios
