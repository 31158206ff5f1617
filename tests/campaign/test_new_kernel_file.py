"""A kernel_source file that does not exist yet: a round may create it, and its record keeps it."""

from __future__ import annotations

import json

import pytest

from tests.campaign.conftest import campaign_dir, git, make_project, ratchet


@pytest.mark.slow
def test_a_round_may_create_a_listed_kernel_file_and_its_rollback_removes_it(tmp_path):
    root = make_project(tmp_path / "proj")
    yaml = root / "ratchet.yaml"
    yaml.write_text(
        yaml.read_text().replace(
            "kernel_source: [tiny_gemm/kernel.py]",
            "kernel_source: [tiny_gemm/kernel.py, tiny_gemm/blocks.py]",
        )
    )
    git(root, "commit", "-qam", "a helper module to come")
    for args in (("init", "--op", "tiny_gemm", "--yes"), ("baseline",)):
        r = ratchet(root, *args)
        assert r.returncode == 0, r.stdout + r.stderr
    new = root / "tiny_gemm" / "blocks.py"
    new.write_text("BLOCK_M = 32\ndef broken(:\n")  # created by the round; does not parse
    r = ratchet(root, "validate", "--hypothesis", "the tile sizes in a module of their own")
    assert r.returncode == 1 and "does not parse" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not new.exists()  # the rollback restores the incumbent, which has no such file
    cdir = campaign_dir(root)
    diff = (cdir / "rounds/round-2/artifacts/candidate.diff").read_text()
    assert "+++ b/tiny_gemm/blocks.py" in diff and "+BLOCK_M = 32" in diff
    state = json.loads((cdir / "state.json").read_text())
    assert [e["status"] for e in state["closed"]] == ["BASELINE", "ROLLED BACK"]
