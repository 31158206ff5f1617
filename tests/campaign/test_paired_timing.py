"""The paired A/B's GPU timing: the campaign's frozen quantity on both sides, samples of 20 ms
(after a short warm-up) for memory-bound campaigns and 50 ms for compute-bound ones."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.rounds import paired
from kernel_ratchet.harness.timing.quantity import Measure


@pytest.mark.parametrize(("ctype", "ms"), [("memory", 20.0), ("compute_fwd", 50.0)])
def test_samples_are_shorter_for_memory_bound_campaigns(ctype, ms):
    params, first, _ = paired.paired_settings(True, Measure("kernel_time", "cold"), ctype)
    assert params["sample_ms"] == ms and params["quantity"] == "kernel_time" and first == 5
    short = ctype == "memory"  # and their warm-up: 10 ms, settled on 2 reads within 30 MHz
    warm = (params.get("warmup_ms"), params.get("settle_window"), params.get("settle_tol_mhz"))
    assert warm == ((10.0, 2, 30.0) if short else (None, None, None))


@pytest.mark.parametrize(("ctype", "ms"), [("memory", 20.0), ("compute_fwd_bwd", 50.0)])
def test_a_rounds_workers_time_the_frozen_quantity_with_the_types_samples(
    monkeypatch, tmp_path, ctype, ms
):
    monkeypatch.setattr(paired, "_cuda", lambda: True)
    monkeypatch.setattr(paired, "incumbent_tree", lambda _c: tmp_path / ".incumbent")
    monkeypatch.setattr(paired, "paired_cpus", lambda: (3,))
    frozen = {"samples": 10, "sample_ms": 75.0, "quantity": "kernel_time", "l2": "warm"}
    m = SimpleNamespace(
        adapter="pkg.mod:Adapter",
        timing_engine="cuda_events",
        timing_params=frozen,
        campaign_type=ctype,
    )
    inc, cand = paired._specs(SimpleNamespace(m=m, root=tmp_path))
    for spec in (inc, cand):
        p = spec.engine_params
        assert (p["sample_ms"], p["samples"], p["quantity"], p["l2"]) == (
            ms,
            2,
            "kernel_time",
            "warm",
        )
    assert Path(inc.source_root).name == ".incumbent" and cand.source_root == str(tmp_path)
