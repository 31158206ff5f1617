"""``ratchet init --shapes``: a campaign on another shape set than its op's default; a
campaign's parameters out of range refused as usage errors."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.campaign.conftest import cli_env, make_project, ratchet
from tests.campaign.test_cli_misc import run

SHAPES = [{"label": "m48", "M": 48, "N": 32, "K": 80}, {"label": "m96", "M": 96, "N": 64, "K": 64}]


def _campaigns(root):
    base = root / ".ratchet" / "campaigns"
    return sorted(base.iterdir()) if base.exists() else []


def test_a_campaign_takes_the_shape_set_it_is_given(tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHONPATH", cli_env(root)["PYTHONPATH"])  # the package imports
    monkeypatch.syspath_prepend(str(root))
    spec = "inline:" + json.dumps(SHAPES)
    code, out, err = run(monkeypatch, capsys, "init", "--op", "tiny_gemm", "-y", "--shapes", spec)
    assert code in (0, None), out + err
    (cdir,) = _campaigns(root)
    manifest = yaml.safe_load((cdir / "manifest.yaml").read_text())
    assert [s["label"] for s in manifest["target_shapes"]] == ["m48", "m96"]
    assert manifest["shape_set"] == spec
    # without it, the op's own set
    code, out, err = run(monkeypatch, capsys, "init", "--op", "tiny_gemm", "-y", "--another")
    assert code in (0, None), out + err
    other = yaml.safe_load((_campaigns(root)[-1] / "manifest.yaml").read_text())
    assert other["shape_set"] == "tiny_gemm.shapes:TINY"
    assert [s["label"] for s in other["target_shapes"]] != ["m48", "m96"]


def test_a_shape_set_that_does_not_load_stops_init_before_anything_is_made(
    tmp_path, monkeypatch, capsys
):
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    for spec, says in (
        ("tiny_gemm.shapes:NOPE", "cannot be loaded"),
        ("no_colon_here", "is not of the form"),
        ('inline:[{"label": "x"}]', "inline shapes do not validate"),
    ):
        code, out, err = run(
            monkeypatch, capsys, "init", "--op", "tiny_gemm", "-y", "--shapes", spec
        )
        assert code not in (0, None) and says in out + err, (spec, out + err)
        assert "Traceback" not in out + err
        assert not _campaigns(root)
    code, out, err = run(
        monkeypatch, capsys, "init", "--op", "tiny_gemm", "-y", "--rehearse", "--shapes",
        "tiny_gemm.shapes:TINY",
    )  # fmt: skip
    assert code not in (0, None) and "rehearsal runs its own tiny shapes" in out + err
    assert not _campaigns(root)


@pytest.mark.parametrize("command", ["init", "run"])
def test_max_iterations_out_of_range_is_a_usage_error_naming_the_flag(tmp_path, command):
    root = make_project(tmp_path / "p")
    r = ratchet(root, command, "--op", "tiny_gemm", "--yes", "--max-iterations", "-1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--max-iterations must be between 1 and 119, not -1" in " ".join(r.stderr.split())
    assert not any((root / ".ratchet" / "campaigns").glob("*"))
