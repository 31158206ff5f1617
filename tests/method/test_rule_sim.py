"""The simulation of the paired decision rule: the noise model, the scenarios and the table."""

from __future__ import annotations

import pytest

from kernel_ratchet.method import rule_sim
from kernel_ratchet.method.rule_sim import NoiseModel, scenario_speeds, tally, trial

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
