"""A round names the changed kernel lines no launch of its shapes reached: in its record, its
summary and its progress (campaign/rounds/reach.py)."""

from __future__ import annotations

import json

import pytest

from kernel_ratchet.campaign.dryrun import quick_validation
from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.campaign.record import Category, RoundRecord
from kernel_ratchet.campaign.rounds import measure as measure_mod
from kernel_ratchet.campaign.rounds.view import _change
from kernel_ratchet.campaign.state import PendingRound, Stage
from kernel_ratchet.harness import launches
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import KERNEL, campaign_dir

ZEROS = "    acc = tl.zeros((BM, BN), dtype=tl.float32)\n"
LAUNCH = {"BM": 16, "BN": 16, "BK": 16, "M": 8, "N": 8, "K": 8}


def _round(project, monkeypatch, added: str, recorded: dict | None) -> tuple[RoundRecord, list]:
    """Round 2 of ``project`` with ``added`` after the accumulator's zeros; its harness
    recorded ``recorded`` (kernel -> argument sets; None: no file). The test, harness and A/B
    are stood in for: the round ends as a failed test, after the harness wrote its files."""
    monkeypatch.chdir(project)
    camp = Campaign(load_profile(project), campaign_dir(project))
    said: list[str] = []
    monkeypatch.setattr(camp.ctx, "say", said.append)
    kernel = project / KERNEL
    assert ZEROS in kernel.read_text()
    kernel.write_text(kernel.read_text().replace(ZEROS, ZEROS + added))

    def levels(c, n, draft, art, *args, **kwargs):
        if recorded is not None:
            launches.write_args(art / launches.ARGS_FILE, {"m8": recorded})
        kernel.write_text(kernel.read_text().replace(added, ""))  # what a rollback does
        return draft.failed(Category.TEST, "stood in", "t1")

    monkeypatch.setattr(measure_mod, "timing_on_gpu", lambda: False)
    monkeypatch.setattr(measure_mod, "_build_and_test", lambda *a, **k: None)
    monkeypatch.setattr(measure_mod, "measure_levels", levels)
    pending = PendingRound(2, Stage.MEASURING, "t0", "h", "K1", "quick")
    return measure_mod._measure(camp.ctx, 2, pending), said


@pytest.mark.slow
def test_a_change_under_a_branch_no_launch_took_is_named_and_kept(project, monkeypatch):
    added = "    if BK == 7:\n        acc += 1.0\n"
    record, said = _round(project, monkeypatch, added, {"_matmul_nt": [LAUNCH]})
    (only,) = record.unreached
    assert only.startswith(f"{KERNEL}:")
    assert "under `if BK == 7`, which no recorded launch of `_matmul_nt` takes" in only
    assert any("no launch of the measured shapes reached" in s and only in s for s in said)
    assert "Not measured: changed kernel lines" in _change(record)
    kept = json.loads(json.dumps(record.to_dict()))
    assert RoundRecord.from_dict(kept).unreached == record.unreached


@pytest.mark.slow
def test_a_reached_change_or_an_unrecorded_round_says_nothing(project, monkeypatch):
    reached = "    if BK == 16:\n        acc += 0.0\n"
    record, said = _round(project, monkeypatch, reached, {"_matmul_nt": [LAUNCH]})
    assert record.unreached == () and "unreached" not in record.to_dict()
    assert not any("reached" in s for s in said)
    assert "Not measured" not in _change(record)


@pytest.mark.slow
def test_a_round_whose_harness_recorded_nothing_is_not_judged(project, monkeypatch):
    record, _ = _round(project, monkeypatch, "    if BK == 7:\n        acc += 1.0\n", None)
    assert record.unreached == ()


@pytest.mark.slow
def test_a_dry_run_names_them_before_any_round(project, monkeypatch):
    """The dry run measures the working tree with the harness, which records the launches:
    the driver learns before stating a round that its change sits where no shape goes."""
    monkeypatch.chdir(project)
    camp = Campaign(load_profile(project), campaign_dir(project))
    kernel = project / KERNEL
    kernel.write_text(
        kernel.read_text().replace(ZEROS, ZEROS + "    if BK == 7:\n        acc += 1\n")
    )
    out = quick_validation(camp.ctx)
    assert out["ok"] and out["all_pass"]
    (only,) = out["unreached"]
    assert "under `if BK == 7`, which no recorded launch of `_matmul_nt` takes" in only
    kernel.write_text(kernel.read_text().replace("BK == 7", "BK > 0"))
    assert quick_validation(camp.ctx)["unreached"] == []
