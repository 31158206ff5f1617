"""Records a command reads besides the sealed round files: the state's index of closed rounds
(the REPORT's gains) and the manifest frozen at BASELINE (the rounds' gates) must not change
unnoticed."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.campaign.conftest import accepted_project, campaign_dir  # noqa: F401
from tests.cli_inprocess import run_cli

pytestmark = pytest.mark.slow


def _status(capsys, monkeypatch, root) -> tuple[int, str]:
    monkeypatch.chdir(root)
    return run_cli(capsys, monkeypatch, "status")


def test_an_edited_gain_in_the_index_stops_the_next_command(
    accepted_project,  # noqa: F811
    capsys,
    monkeypatch,
):
    path = campaign_dir(accepted_project) / "state.json"
    state = json.loads(path.read_text())
    assert _status(capsys, monkeypatch, accepted_project)[0] == 0
    entry = next(e for e in state["closed"] if e["round"] == 2)
    entry["gain"], entry["paired_chain"] = 9.0, 9.0  # a +900% round
    path.write_text(json.dumps(state))
    rc, out = _status(capsys, monkeypatch, accepted_project)
    assert rc == 7, out
    assert "index of closed rounds disagrees" in out and "round-2: gain, paired_chain" in out


def test_an_edited_manifest_stops_the_next_round(accepted_project, capsys, monkeypatch):  # noqa: F811
    path = campaign_dir(accepted_project) / "manifest.yaml"
    manifest = yaml.safe_load(path.read_text())
    manifest["test_command"] = "true"  # the focused test gate, skipped
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    rc, out = _status(capsys, monkeypatch, accepted_project)
    assert rc == 7, out
    assert "manifest.yaml was changed after BASELINE" in out


def test_a_deleted_state_is_named_as_deleted_not_as_never_initialized(tmp_path):
    from kernel_ratchet.campaign.state import State
    from kernel_ratchet.errors import CampaignError

    (tmp_path / "manifest.yaml").write_text("campaign: c\n")
    with pytest.raises(CampaignError, match="deleted or moved. Restore it"):
        State.load(tmp_path)
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(CampaignError, match="written by the tool only: restore it"):
        State.load(tmp_path)


def test_a_record_appended_by_hand_to_a_log_is_refused(accepted_project, capsys, monkeypatch):  # noqa: F811
    """A correction may be appended; a trend row may not: the tool's next append would seal
    it among its own rows."""
    trend = campaign_dir(accepted_project) / "logs/performance_trend.md"
    original = trend.read_text()
    trend.write_text(original + "> Correction (2026-01-01 00:00): round-2 ran on a busy GPU\n")
    assert _status(capsys, monkeypatch, accepted_project)[0] == 0
    notes = "\n## My notes\nthe 32x32 tile spills:\n\n    # a comment in a code block\n"
    trend.write_text(original + notes)  # notes of the user's own, headings and code included
    assert _status(capsys, monkeypatch, accepted_project)[0] == 0
    trend.write_text(original + "| round-9 | ACCEPTED | forged | 9 | 9 | - | - | 9 | +900% | - |\n")
    rc, out = _status(capsys, monkeypatch, accepted_project)
    assert rc == 7 and "reads as the tool's own records" in out, out


def test_a_log_edited_with_its_shadow_copy_points_past_the_copy(tmp_path):
    from kernel_ratchet.campaign.journal import AppendOnlyLog
    from kernel_ratchet.errors import LogTamperedError

    digests: dict = {}
    log = AppendOnlyLog(tmp_path, "logs/optimize.md", digests)
    (tmp_path / "logs").mkdir()
    log.append("## Round 2 — ACCEPTED +3%\n")
    log.path.write_text("## Round 2 — ACCEPTED +30%\n")
    with pytest.raises(LogTamperedError, match="a copy is in"):
        log.verify()
    log.shadow.write_text("## Round 2 — ACCEPTED +30%\n")
    with pytest.raises(LogTamperedError, match="was changed too: take it from a backup"):
        log.verify()


def _forge_round_2(cdir, unseal: bool) -> None:
    """Round-2 turned into a +900% round everywhere the state can say so: its round.json, its
    index entry, and its seal rewritten (or removed)."""
    from kernel_ratchet.campaign.fsutil import file_sha256

    path = cdir / "rounds/round-2/round.json"
    record = json.loads(path.read_text())
    record["decision"]["gain"] = 9.0
    path.write_text(json.dumps(record))
    state = json.loads((cdir / "state.json").read_text())
    entry = next(e for e in state["closed"] if e["round"] == 2)
    entry["gain"] = entry["paired_chain"] = 9.0
    if unseal:
        del state["records"]["rounds/round-2/round.json"]
    else:
        state["records"]["rounds/round-2/round.json"] = file_sha256(path)
    (cdir / "state.json").write_text(json.dumps(state))


@pytest.mark.parametrize("unseal", [False, True], ids=["rehashed", "unsealed"])
def test_a_round_forged_with_its_seal_is_caught_by_its_commit(
    accepted_project,  # noqa: F811
    capsys,
    monkeypatch,
    unseal,
):
    cdir = campaign_dir(accepted_project)
    _forge_round_2(cdir, unseal)
    rc, out = _status(capsys, monkeypatch, accepted_project)
    assert rc == 7, out
    assert "rounds/round-2/round.json" in out
    assert ("against commit" in out) or unseal  # the removed seal is named as missing


def test_a_rewritten_earlier_round_disagrees_with_the_commit_after_it(
    accepted_project,  # noqa: F811
    capsys,
    monkeypatch,
):
    """The BASELINE (or a rolled-back round) rewritten together with its seal in state.json
    passes every seal; the accepted round's commit still holds what it was."""
    from kernel_ratchet.campaign.fsutil import file_sha256

    cdir = campaign_dir(accepted_project)
    record = cdir / "rounds/round-1/round.json"
    data = json.loads(record.read_text())
    data["reason"] = "rewritten"  # any change of the sealed record
    record.write_text(json.dumps(data))
    path = cdir / "state.json"
    state = json.loads(path.read_text())
    state["records"]["rounds/round-1/round.json"] = file_sha256(record)  # the seal, forged too
    path.write_text(json.dumps(state))
    rc, out = _status(capsys, monkeypatch, accepted_project)
    assert rc == 7, out
    assert "the rounds before round-2 (against commit" in out
