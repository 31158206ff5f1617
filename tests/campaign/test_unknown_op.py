"""An op that ``ratchet.yaml`` does not declare, named to any command that takes ``--op``: a
ratchet.yaml problem (exit 3, as the README's table says), the known ops listed, nothing made."""

from __future__ import annotations

import pytest

from tests.campaign.conftest import make_project
from tests.cli_inprocess import run_cli

TIP = ("--round", "1", "--status", "ACCEPTED", "--context", "c", "--signal", "s")


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--op", "nope"),
        ("bench", "--op", "nope"),
        ("init", "--op", "nope", "--yes"),
        ("init", "--op", "nope", "--yes", "--rehearse"),
        ("run", "--op", "nope", "--yes"),
        ("run", "--op", "nope", "--yes", "--rehearse"),
        ("tips", "show", "--op", "nope"),
        ("tips", "add", "--op", "nope", *TIP, "--takeaway", "t", "--applicability", "a"),
        ("sweep", "--op", "nope", "--entry", "CONFIGS", "--knobs", "block_m"),
        ("fleet", "--ops", "tiny_gemm,nope", "--workers", "1"),
    ],
    ids=lambda a: " ".join(a[:2]) + (" --rehearse" if "--rehearse" in a else ""),
)
def test_an_unknown_op_is_a_ratchet_yaml_problem(tmp_path, monkeypatch, capsys, args):
    root = make_project(tmp_path / "p")
    monkeypatch.chdir(root)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # what --rehearse sets, undone after the test
    r = run_cli(capsys, monkeypatch, *args)
    assert r[0] == 3, r[1]
    assert "ops.nope: no such op; known ops: tiny_gemm" in r[1] and "Traceback" not in r[1]
    assert not (root / ".ratchet" / "campaigns").exists()


def test_fleet_names_an_unknown_op_before_a_missing_dask(tmp_path, monkeypatch, capsys):
    """Where Dask is not installed the op is still checked first: the user fixes one thing at
    a time, in the order the command reads them."""
    import kernel_ratchet.fleet as fleet_pkg
    from kernel_ratchet.errors import RatchetError

    def no_dask():
        raise RatchetError("several GPUs or workers need Dask distributed")

    monkeypatch.setattr(fleet_pkg, "require_dask", no_dask)
    monkeypatch.chdir(make_project(tmp_path / "p"))
    code, text = run_cli(capsys, monkeypatch, "fleet", "--ops", "tiny_gemm,nope", "--workers", "1")[
        :2
    ]
    assert code == 3 and "no such op" in text
    code, text = run_cli(capsys, monkeypatch, "fleet", "--ops", "tiny_gemm", "--workers", "1")[:2]
    assert code == 2 and "Dask" in text
