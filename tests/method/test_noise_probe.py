"""The noise probe of timing variants: its table, and a tiny probe on the CPU through real
worker processes (the interpreter: the numbers mean nothing; the files are what is tested)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernel_ratchet.method import noise_probe
from kernel_ratchet.scoring.noise import RoundNoise


def _noise(name: str, sd: float, s_per_round: float) -> RoundNoise:
    rng = np.random.default_rng(0)
    centred = {"s1": tuple(rng.normal(0.0, sd, 48)), "s2": tuple(rng.normal(0.0, sd, 48))}
    per_shape = {k: float(np.std(v)) for k, v in centred.items()}
    return RoundNoise(name, {}, sd, per_shape, 0.0, s_per_round, 48, centred=centred)


def test_the_table_lists_every_variant_then_the_choice():
    reports = [_noise("current", 0.015, 1.0), _noise("4 samples", 0.015, 1.8)]
    text = noise_probe.table(reports)
    assert "| current | 1.50% | +0.00% | 1.00 | 0.000225 |" in text
    assert "| 4 samples | 1.50% |" in text
    assert text.splitlines()[-1].startswith("chosen: kept 'current'")


@pytest.mark.soak
def test_a_cpu_probe_writes_its_choice_once_every_variant_ran(tmp_path):
    out = tmp_path / "probe.json"
    variants = {"current": {}, "A B B A": {"alternations": 2}}
    reports = noise_probe.probe(variants, 3, out, cuda=False, logs=tmp_path / "logs")
    assert [r.name for r in reports] == ["current", "A B B A"]
    data = json.loads(out.read_text())
    assert not (tmp_path / "probe.json.partial").exists()
    assert [v["name"] for v in data["variants"]] == ["current", "A B B A"]
    # 3 rounds x 2 shapes x 2 sides, one request per side and visit, two with two turns
    for i, turns in enumerate((1, 2)):
        trace = (tmp_path / "logs" / f"variant-{i}" / "timings.jsonl").read_text().splitlines()
        assert len(trace) == 3 * 2 * 2 * turns
    assert "alternations" not in data["variants"][0]["params"]  # each says how it was timed
    assert data["variants"][1]["params"]["alternations"] == 2
    assert data["chosen"]["name"] in variants and data["rounds"] == 3
    assert data["shapes"] == ["m32_n32_k32", "m48_n32_k32"]
