"""``requires:`` in ratchet.yaml: validated by the loader, checked against this machine by
``ratchet check`` (one clear failing line) and refused by ``init`` (exit 2); and the
Primus-Turbo example profile, which needs ROCm, loads and is checked without running."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.checklist import all_checks
from kernel_ratchet.profile.loader import load_profile
from kernel_ratchet.profile.problems import Problems
from kernel_ratchet.profile.requires import Requirements, parse_requires, unmet
from tests.cli_inprocess import run_cli

PRIMUS = Path(__file__).resolve().parents[2] / "examples" / "primus-turbo"
CANNOT = "cannot run here: needs ROCm (torch.version.hip is None) and package primus_turbo"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"platform": "metal"}, "requires.platform"),
        ({"packages": ["ok", "not a name"]}, "requires.packages"),
        ({"platform": "rocm", "gpu": "mi300"}, "requires.gpu"),
        ("rocm", "requires"),
    ],
)
def test_a_bad_requires_is_a_problem_naming_its_key(raw, key, tmp_path):
    problems = Problems(tmp_path / "ratchet.yaml")
    assert parse_requires(raw, problems) is None
    assert problems.count >= 1 and f": {key}:" in problems.lines[0]


def test_unmet_says_what_this_machine_lacks(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", None)
    req = Requirements("rocm", ("primus_turbo",))
    assert unmet(req) == CANNOT
    monkeypatch.setattr(torch.version, "hip", "6.4")
    assert unmet(req) == "cannot run here: needs package primus_turbo"
    assert unmet(Requirements("rocm", ("json",))) is None
    assert unmet(None) is None


def test_the_primus_turbo_profile_loads():
    prof = load_profile(PRIMUS / "ratchet.yaml")
    assert prof.requires == Requirements("rocm", ("primus_turbo",))
    assert {"gemm_bf16", "gemm_fp8", "grouped_gemm_bf16", "quantize_fp8_tensorwise"} <= set(
        prof.ops
    )
    assert all(o.benchmark for o in prof.ops.values())


def test_a_profile_error_in_requires_exits_3(tmp_path, capsys, monkeypatch):
    text = (PRIMUS / "ratchet.yaml").read_text().replace("platform: rocm", "platform: rocmm")
    (tmp_path / "ratchet.yaml").write_text(text)
    with pytest.raises(ProfileError, match="requires.platform"):
        load_profile(tmp_path / "ratchet.yaml")


@pytest.mark.skipif(torch.version.hip is not None, reason="this machine has ROCm")
def test_check_and_init_on_the_primus_turbo_profile_say_why_it_cannot_run(
    tmp_path, capsys, monkeypatch
):
    proj = tmp_path / "primus"
    shutil.copytree(PRIMUS, proj)
    profile = str(proj / "ratchet.yaml")
    rc, text = run_cli(capsys, monkeypatch, "check", "--profile", profile)
    assert rc == 1 and "cannot run here" in text
    items = {i.name: i for i in all_checks(load_profile(profile))}
    assert items["this machine meets requires:"].detail == CANNOT
    assert not any("adapter importable" in n for n in items)  # it fails for the same reason
    assert items["gemm_bf16: shapes loadable"].ok  # what needs nothing is still checked
    rc, text = run_cli(
        capsys, monkeypatch, "init", "--op", "gemm_bf16", "--yes", "--profile", profile
    )
    assert rc == 2 and CANNOT in " ".join(text.split())
    assert not (proj / ".ratchet").exists()
