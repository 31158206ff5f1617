"""``ratchet validate --patch FILE``: a round's change handed over as a diff, applied only when
it fits one round and taken back when the round refuses to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_ratchet.campaign import engine
from kernel_ratchet.campaign.candidate_patch import validate_patch
from kernel_ratchet.errors import CampaignError, UsageError
from tests.campaign.conftest import KERNEL, git, set_blocks
from tests.cli_inprocess import run_cli


class Stop(Exception):
    """Ends the round once it has started measuring."""


def _patch(root: Path, dest: Path, *extra: str, **blocks: int) -> Path:
    """A diff of the kernel (``blocks`` changed) and of ``extra`` files, the tree restored."""
    set_blocks(root, **blocks)
    for rel in extra:
        (root / rel).write_text("x = 1\n")
        git(root, "add", "-N", rel)
    dest.write_text(git(root, "diff", "--", KERNEL, *extra))
    git(root, "checkout", "--", KERNEL)
    for rel in extra:
        git(root, "rm", "-q", "--cached", rel)
        (root / rel).unlink()
    return dest


def _measured(monkeypatch) -> list[str]:
    seen: list[str] = []

    def measure(ctx, n, pending):
        seen.append((ctx.root / KERNEL).read_text())
        raise Stop

    monkeypatch.setattr(engine, "measure", measure)
    return seen


def test_the_round_measures_the_patched_kernel(open_campaign, project, tmp_path, monkeypatch):
    patch = _patch(project, tmp_path / "c.diff", M=32, N=32)
    seen = _measured(monkeypatch)
    c = open_campaign()
    with pytest.raises(Stop):
        validate_patch(c, "32x32 output tiles", patch)
    assert len(seen) == 1 and "BLOCK_M = 32" in seen[0]
    # the round started: it owns the kernel files now (its recovery restores them)
    assert "BLOCK_M = 32" in (project / KERNEL).read_text()


def test_a_refused_round_takes_the_patch_back(open_campaign, project, tmp_path, monkeypatch):
    before = (project / KERNEL).read_text()
    patch = _patch(project, tmp_path / "c.diff", M=32)
    seen = _measured(monkeypatch)
    with pytest.raises(UsageError, match="hypothesis"):
        validate_patch(open_campaign(), "  ", patch)
    assert seen == [] and (project / KERNEL).read_text() == before


def test_a_patch_that_does_not_fit_is_not_applied(open_campaign, project, tmp_path, monkeypatch):
    before = (project / KERNEL).read_text()
    seen = _measured(monkeypatch)
    c = open_campaign()
    with_test = _patch(project, tmp_path / "t.diff", "test_extra.py", M=32)
    with pytest.raises(CampaignError, match="test_extra.py, outside the op's kernel files"):
        validate_patch(c, "h", with_test)
    assert (project / KERNEL).read_text() == before and not (project / "test_extra.py").exists()

    stale = tmp_path / "stale.diff"  # made against another kernel than the incumbent's
    stale.write_text(_patch(project, stale, M=32).read_text().replace("BLOCK_M = ", "BLOCK_Q = "))
    with pytest.raises(CampaignError, match="does not apply to the incumbent"):
        validate_patch(c, "h", stale)
    assert (project / KERNEL).read_text() == before and seen == []


def test_the_user_change_is_kept_when_a_patch_meets_it(open_campaign, project, tmp_path):
    patch = _patch(project, tmp_path / "m.diff", M=32)
    set_blocks(project, N=32)  # the user's own change to the kernel, kept as it is
    mine = (project / KERNEL).read_text()
    with pytest.raises(CampaignError, match="already differ from the incumbent's"):
        validate_patch(open_campaign(), "h", patch)
    assert (project / KERNEL).read_text() == mine


def test_the_cli_names_what_a_patch_cannot_take(project, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(project)
    empty = tmp_path / "empty.diff"
    empty.write_text("not a diff\n")
    rc, text = run_cli(capsys, monkeypatch, "validate", "--hypothesis", "h", "--patch", str(empty))
    assert rc == 2 and "names no file" in " ".join(text.split()), text
    rc, text = run_cli(
        capsys, monkeypatch, "validate", "--hypothesis", "h", "--patch", str(tmp_path / "gone")
    )
    assert rc == 2 and "cannot read the patch" in " ".join(text.split()), text
