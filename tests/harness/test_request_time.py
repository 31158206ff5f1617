"""The A/B's account of where its timing requests spent their time."""

from __future__ import annotations

from kernel_ratchet.harness.request_time import RequestTime


def _stages(inputs: float, measure: float, spot: float) -> dict:
    return {"stages_s": {"inputs": inputs, "measure": measure, "spot": spot, "after": 0.01}}


def test_the_summary_adds_up_the_stages_and_the_time_outside_the_worker():
    spent = RequestTime()
    assert spent.summary() is None
    for _ in range(4):
        spent.add(_stages(0.01, 0.15, 0.01), 0.2)
    line = spent.summary()
    assert line.startswith("A/B: 4 timing requests took 0.8 s (0.200 s each): ")
    assert "inputs 0.0 s, measurement 0.6 s, spot checks 0.0 s, after 0.0 s" in line
    assert "outside the worker 0.1 s" in line and "draw and compute on the device" not in line


def test_inputs_built_on_the_cpu_are_named_with_the_fix():
    spent = RequestTime()
    spent.add(_stages(0.7, 0.55, 0.35), 1.6)
    line = spent.summary()
    assert "Building inputs and spot checks took 66% of it" in line
    assert "draw and compute on the device" in line
    on_cpu = RequestTime()  # a CPU rehearsal: there is no device to draw on
    on_cpu.add({**_stages(0.7, 0.55, 0.35), "device": "cpu"}, 1.6)
    assert "draw and compute on the device" not in on_cpu.summary()
    on_gpu = RequestTime()
    on_gpu.add({**_stages(0.7, 0.55, 0.35), "device": "cuda:0"}, 1.6)
    assert "draw and compute on the device" in on_gpu.summary()


def test_answers_without_stages_count_as_time_outside_the_worker():
    spent = RequestTime()
    spent.add(None, 0.3)
    spent.add({"stages_s": "garbage"}, 0.3)
    spent.add({"stages_s": {"inputs": "x", "unknown": 5.0}}, 0.3)
    assert spent.requests == 3 and sum(spent.stages.values()) == 0.0
    assert "outside the worker 0.9 s" in spent.summary()
