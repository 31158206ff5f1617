"""The commands that change a campaign after its rounds rewrite its live page, and a page that
cannot be written never fails them. The campaign operations are replaced by test doubles: what
is checked is the command's hook, not acceptance or sync-back themselves."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign import acceptance
from kernel_ratchet.campaign import sync_back as sync_mod
from kernel_ratchet.campaign.manifest import load_manifest
from kernel_ratchet.cli import common, rounds
from kernel_ratchet.dashboard.site import LIVE_PAGE
from tests.cli_inprocess import run_cli


def _accept(monkeypatch, capsys, c):
    ok = acceptance.Acceptance(True, ("- Full test: PASS",), "report/full_test.log")
    monkeypatch.setattr(acceptance, "accept", lambda ctx: ok)
    return run_cli(capsys, monkeypatch, "accept")


def _sync_back(monkeypatch, capsys, c):
    res = sync_mod.SyncResult(True, 2, ("pkg/kernel.py",), "c0002", ("- Focused test: PASS",))
    monkeypatch.setattr(sync_mod, "sync_back", lambda camp, commit: res)
    return run_cli(capsys, monkeypatch, "sync-back")


def _resume_by_hand(monkeypatch, capsys, c):
    from kernel_ratchet.cli.run import _close_by_hand

    c.recover = lambda: c.state.closed[-1]  # the round in flight, closed
    _close_by_hand(None, c.dir.name)
    return 0, capsys.readouterr().out


@pytest.fixture
def campaign(small, tmp_path, monkeypatch):
    """A copy of the small campaign, opened by every command as a stand-in campaign."""
    cdir = shutil.copytree(small[0], tmp_path / small[0].name)
    (cdir / LIVE_PAGE).unlink(missing_ok=True)  # another test may have drawn it
    said: list[str] = []
    from kernel_ratchet.campaign.state import State

    c = SimpleNamespace(dir=cdir, profile=None, m=load_manifest(cdir), say=said.append)
    c.state, c.ctx, c.said = State.load(cdir), None, said

    @contextmanager
    def opened(profile, name):
        yield c

    for mod in (common, rounds):
        monkeypatch.setattr(mod, "open_campaign", opened)
    monkeypatch.setattr("kernel_ratchet.cli.tools.open_campaign", opened)
    return c


@pytest.mark.parametrize("command", [_accept, _sync_back, _resume_by_hand])
def test_the_command_rewrites_the_live_page_and_a_failed_page_never_fails_it(
    command, campaign, monkeypatch, capsys
):
    page = campaign.dir / LIVE_PAGE
    assert not page.exists()
    rc, text = command(monkeypatch, capsys, campaign)
    assert rc == 0, text
    assert page.stat().st_size > 1_000_000 and campaign.said == []
    page.unlink()
    (campaign.dir / "state.json").write_text("{broken")  # the page cannot be drawn now
    rc, text = command(monkeypatch, capsys, campaign)
    assert rc == 0, text
    assert not page.exists() and "dashboard not written" in campaign.said[0]
