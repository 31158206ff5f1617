"""A command that opens a campaign: which one it opens when none is named, and what it says
when ratchet.yaml changed since the campaign froze its op."""

from __future__ import annotations

import pytest

from tests.campaign.test_cli_errors import run_main


def test_run_without_an_op_continues_the_most_recent_open_campaign(project):
    """`ratchet init` then `ratchet run`: the run continues the campaign init opened; once it
    has ended, a run must name an op."""
    from kernel_ratchet.campaign.state import Phase, State
    from kernel_ratchet.cli.run import _check_start
    from kernel_ratchet.errors import RatchetError
    from kernel_ratchet.profile.loader import load_profile
    from tests.campaign.conftest import campaign_dir

    prof = load_profile(project / "ratchet.yaml")
    cdir = campaign_dir(project)
    assert _check_start(prof, None, None, False, opt=None) == cdir.name
    state = State.load(cdir)
    state.phase = Phase.TERMINATED
    state.save(cdir)
    with pytest.raises(RatchetError, match=f"give --op OP.*{cdir.name}, has ended"):
        _check_start(prof, None, None, False, opt=None)


def test_an_edit_of_the_ops_entry_after_init_is_named_when_the_campaign_opens(
    project, monkeypatch, capsys
):
    """The campaign keeps what it froze at init: an edit of ratchet.yaml does not reach it,
    and a command that opens it says which keys differ."""
    import yaml

    from kernel_ratchet.campaign.drift import drift
    from kernel_ratchet.campaign.manifest import load_manifest
    from kernel_ratchet.profile.loader import load_profile
    from tests.campaign.conftest import campaign_dir

    m = load_manifest(campaign_dir(project))
    path = project / "ratchet.yaml"
    assert drift(load_profile(path), m) == []
    data = yaml.safe_load(path.read_text())
    data["ops"][m.target_op]["test"] = "python -m pytest -q tests -x"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert drift(load_profile(path), m) == [f"ops.{m.target_op}.test"]
    monkeypatch.chdir(project)
    _, text = run_main(monkeypatch, capsys, "status")
    assert "ratchet.yaml changed since campaign" in " ".join(text.split())
