"""``ratchet export``: a campaign's records copied for a commit, the bulk left behind, nothing
overwritten."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernel_ratchet.campaign.export import RECORD_SUFFIXES, export_records
from kernel_ratchet.errors import CampaignError, UsageError
from tests.campaign.conftest import campaign_dir, session_accepted
from tests.cli_inprocess import run_cli


@pytest.fixture
def accepted(tmp_path_factory, tmp_path: Path) -> Path:
    """A copy of the session's example campaign with round-2 ACCEPTED."""
    dest = tmp_path / "proj"
    shutil.copytree(session_accepted(tmp_path_factory), dest, symlinks=True)
    return dest


def test_export_copies_the_records_and_only_them(accepted, tmp_path, capsys, monkeypatch):
    cdir = campaign_dir(accepted)
    dest = tmp_path / "records" / "tiny"
    rc, text = run_cli(
        capsys, monkeypatch, "export", str(dest), "--profile", str(accepted / "ratchet.yaml")
    )
    assert rc in (0, None), text
    got = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    for name in ("manifest.yaml", "state.json", "logs/optimize.md", "logs/performance_trend.md"):
        assert name in got
    for name in ("summary.md", "round.json", "candidate.diff", "paired.json"):
        assert f"rounds/round-2/{name}" in got
    assert "rounds/round-1/round.json" in got
    # the copies are the records as written
    assert (dest / "state.json").read_bytes() == (cdir / "state.json").read_bytes()
    paired = json.loads((dest / "rounds/round-2/paired.json").read_text())
    assert paired == json.loads((cdir / "rounds/round-2/artifacts/paired.json").read_text())
    # no worktree, snapshot, CSV, worker log or trace came along
    assert not any("kernel_snapshot" in g or g.endswith((".csv", ".log", ".jsonl")) for g in got)
    assert all(g.count("/") <= 2 for g in got)
    assert all(g.endswith(RECORD_SUFFIXES) for g in got)  # what the scope check may leave out
    assert f"{len(got)} files" in text


def test_the_export_says_what_each_round_measured_on_without_the_machines_paths(accepted, tmp_path):
    cdir = campaign_dir(accepted)
    prov = json.loads((cdir / "rounds/round-2/artifacts/provenance.json").read_text())
    prov["env"] = {"LD_LIBRARY_PATH": "/opt/secret/lib"}  # a path of the measuring machine
    prov["gpu"] = {"name": "NVIDIA H100 80GB HBM3", "driver_version": "580.1", "source": "smi"}
    (cdir / "rounds/round-2/artifacts/provenance.json").write_text(json.dumps(prov))
    written = export_records(cdir, tmp_path / "out")
    assert Path("environment.json") in written
    text = (tmp_path / "out" / "environment.json").read_text()
    env = json.loads(text)
    assert set(env["rounds"]) == {"round-1", "round-2"}  # the baseline's and the round's
    r2 = env["rounds"]["round-2"]
    assert r2["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and r2["gpu"]["driver_version"] == "580.1"
    assert r2["versions"]["torch"] == prov["versions"]["torch"] and r2["engine"] == prov["engine"]
    assert env["rounds"]["round-1"]["gpu"] is None  # measured on the CPU
    assert "/opt/secret" not in text and prov["host"]["platform"] not in text


def test_an_accepted_commit_cites_the_summary_an_export_holds(accepted, tmp_path):
    """The campaign directory is not in git: beside SPEC's ``Details`` line (the log in that
    directory), the commit names the campaign and the summary's path inside its records,
    which a reader of ``git log`` on another clone finds in an export of them."""
    import re

    from tests.campaign.conftest import git

    cdir = campaign_dir(accepted)
    msg = git(accepted, "log", "-1", "--format=%B")
    cited = re.search(r"^Record: campaign (\S+), (\S+) in its records", msg, re.M)
    assert cited and cited[1] == cdir.name, msg
    assert f"Details: .ratchet/campaigns/{cdir.name}/logs/optimize.md" in msg
    dest = tmp_path / "campaigns" / "tiny_gemm" / cdir.name
    export_records(cdir, dest)
    assert (dest / cited[2]).read_bytes() == (cdir / "rounds/round-2/summary.md").read_bytes()


def test_traces_come_on_request(accepted, tmp_path):
    cdir = campaign_dir(accepted)
    trace = cdir / "rounds/round-2/artifacts/paired/timings.jsonl"
    assert trace.is_file()
    written = export_records(cdir, tmp_path / "t", traces=True)
    assert Path("rounds/round-2/timings.jsonl") in written
    assert (tmp_path / "t/rounds/round-2/timings.jsonl").read_bytes() == trace.read_bytes()


def test_an_escalated_round_exports_the_full_levels_ab_beside_the_quick_one(accepted, tmp_path):
    """A round whose quick gain escalated it was decided by its full-level A/B: that one is in
    the copy, named apart from the quick level's."""
    art = campaign_dir(accepted) / "rounds/round-2/artifacts"
    (art / "full/paired").mkdir(parents=True)
    (art / "full/paired.json").write_text('{"run": "full level"}')
    (art / "full/paired/timings.jsonl").write_text("{}\n")
    written = export_records(campaign_dir(accepted), tmp_path / "e", traces=True)
    assert Path("rounds/round-2/paired_full.json") in written
    assert Path("rounds/round-2/timings_full.jsonl") in written
    assert "full level" in (tmp_path / "e/rounds/round-2/paired_full.json").read_text()
    assert (tmp_path / "e/rounds/round-2/paired.json").read_bytes() == (
        art / "paired.json"
    ).read_bytes()


def test_export_never_overwrites_and_stays_outside_the_campaign(
    accepted, tmp_path, capsys, monkeypatch
):
    """A destination that holds files or lies in the campaign is the caller's to choose again:
    a usage error (exit 2, as the README's table has it), nothing written."""
    cdir = campaign_dir(accepted)
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("kept")
    with pytest.raises(UsageError, match="already holds files"):
        export_records(cdir, full)
    monkeypatch.chdir(accepted)
    rc, text = run_cli(capsys, monkeypatch, "export", str(full))
    assert rc == 2 and "already holds files" in text, text
    assert [p.name for p in full.iterdir()] == ["mine.txt"]
    with pytest.raises(UsageError, match="outside the campaign"):
        export_records(cdir, cdir / "copy")
    with pytest.raises(CampaignError, match="not a campaign directory"):
        export_records(tmp_path, tmp_path / "x")
    (tmp_path / "empty").mkdir()
    assert export_records(cdir, tmp_path / "empty")  # an empty folder is fine


def test_an_export_inside_the_project_is_not_a_change_a_round_could_read(
    accepted, capsys, monkeypatch
):
    """The tool's own records, exported into the project between rounds, do not stop the
    next round for its scope, and moving them away later does not either."""
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.lineage.kernel import out_of_scope
    from kernel_ratchet.profile.loader import load_profile

    monkeypatch.chdir(accepted)
    rc, text = run_cli(capsys, monkeypatch, "export", "campaigns/tiny")
    assert rc in (0, None), text
    (accepted / "stray.json").write_text("{}")  # a file of the user's still counts
    state = json.loads((campaign_dir(accepted) / "state.json").read_text())
    assert "campaigns/tiny/state.json" in state["exported"]

    def scope() -> list[str]:
        with Campaign(load_profile(accepted), campaign_dir(accepted)) as c:
            return out_of_scope(c.ctx)

    assert scope() == ["stray.json"]
    shutil.rmtree(accepted / "campaigns")
    assert scope() == ["stray.json"]


def test_an_archive_destination_holds_the_same_records_in_one_file(accepted, capsys, monkeypatch):
    """``ratchet export NAME.tar.gz`` writes the folder export's files, as written, under a
    folder NAME in one archive inside the project; the scope check leaves it out, and a second
    export to that name is refused with the archive kept."""
    import tarfile

    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.lineage.kernel import out_of_scope
    from kernel_ratchet.profile.loader import load_profile

    cdir = campaign_dir(accepted)
    monkeypatch.chdir(accepted)
    rc, text = run_cli(capsys, monkeypatch, "export", "out/tiny.tar.gz")
    assert rc in (0, None), text
    archive = accepted / "out" / "tiny.tar.gz"
    folder = export_records(cdir, accepted.parent / "folder")
    with tarfile.open(archive) as tar:
        files = {m.name for m in tar.getmembers() if m.isfile()}
        paired = tar.extractfile("tiny/rounds/round-2/paired.json").read()  # type: ignore[union-attr]
    assert (
        files == {f"tiny/{p.as_posix()}" for p in folder}
        and "tiny/rounds/round-2/paired.json" in files
    )
    assert paired == (cdir / "rounds/round-2/artifacts/paired.json").read_bytes()
    assert f"{len(folder)} files" in text
    assert [p.name for p in (accepted / "out").iterdir()] == ["tiny.tar.gz"]  # no leftovers
    with Campaign(load_profile(accepted), cdir) as c:
        assert out_of_scope(c.ctx) == []
    before = archive.read_bytes()
    rc, text = run_cli(capsys, monkeypatch, "export", "out/tiny.tar.gz")
    assert rc == 2 and "already exists" in text, text
    assert archive.read_bytes() == before
