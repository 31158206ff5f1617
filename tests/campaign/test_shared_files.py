"""A round that changes a kernel file other ops also list: it says so in its record and summary,
and with ``test_shared`` their focused tests gate it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kernel_ratchet.campaign.rounds.shared import describe, shared_tests, sharing_ops
from kernel_ratchet.errors import ProfileError
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import (
    KERNEL,
    set_blocks,
    typo_kernel,
    with_ops,
)

FAILING = "python -c \"raise SystemExit('the twin op is broken')\""


def test_sharing_ops_are_the_other_ops_listing_a_changed_file(project):
    profile = with_ops(
        load_profile(project),
        twin=([KERNEL, "tiny_gemm/other.py"], "pytest a"),
        dotted=(["./" + KERNEL], "pytest a"),  # same file, spelled differently: same test
        stranger=(["tiny_gemm/other.py"], "pytest b"),
    )
    sharing = sharing_ops(profile, "tiny_gemm", [KERNEL])
    assert sharing == {"twin": [KERNEL], "dotted": [KERNEL]}
    own = profile.op("tiny_gemm").test
    assert shared_tests(profile, own, sharing) == [("twin", "pytest a")]
    assert shared_tests(profile, "pytest a", sharing) == []
    assert describe({}, False) == ""
    assert "--test-shared" in describe(sharing, False)
    assert "ran after this op's and gated the round" in describe(sharing, True)
    many = {"a": ["k.py", "l.py"], "b": ["k.py"], "c": ["k.py", "l.py"]}
    assert describe(many, False).startswith(
        "Also run by (listed in or imported by the kernel_source of): a, c (k.py, l.py); b (k.py);"
    )


@pytest.mark.slow
def test_failing_twin_test_rolls_the_round_back_with_test_shared(accepted_project, open_accepted):
    set_blocks(accepted_project, M=64, N=64)
    with open_accepted(twin=([KERNEL], FAILING)) as c:
        rec = c.validate("64x64 tiles", test_shared=True)
        rdir = c.round_dir(rec.round)
    assert rec.status == "ROLLED BACK" and rec.category == "test" and rec.shared_tested
    assert "focused test of twin (it shares tiny_gemm/kernel.py) failed" in rec.reason
    assert (rdir / "artifacts" / "test.twin.log").exists()
    assert "BLOCK_M = 32" in (accepted_project / KERNEL).read_text()  # rolled back


@pytest.mark.slow
def test_without_test_shared_the_round_records_who_shares_the_file(project, open_campaign):
    typo_kernel(project)  # the round ends before any test, after noting the sharing
    with open_campaign(twin=([KERNEL], FAILING), stranger=(["tiny_gemm/other.py"], FAILING)) as c:
        rec = c.validate("a typo")
        rdir = c.round_dir(rec.round)
    assert rec.category == "compile" and "does not parse" in rec.reason
    assert dict(rec.shared_with) == {"twin": (KERNEL,)} and not rec.shared_tested
    saved = json.loads((rdir / "round.json").read_text())
    assert saved["shared_with"] == {"twin": [KERNEL]} and saved["shared_tested"] is False
    summary = (rdir / "summary.md").read_text()
    assert "imported by the kernel_source of): twin (tiny_gemm/kernel.py)" in summary
    assert "(`ratchet validate --test-shared`, or `test_shared: true`" in summary
    assert not (rdir / "artifacts" / "test.twin.log").exists()


def test_test_shared_in_the_profile_gates_a_round_without_the_flag(project, open_campaign):
    """``test_shared: true`` on the op: every driver's rounds are gated by the twin's test, as
    with ``--test-shared``. The round's gate is decided before its steps, so a candidate that
    does not parse shows it; what a gated round runs is the flagged round's (above)."""
    typo_kernel(project)
    with open_campaign(twin=([KERNEL], FAILING)) as c:
        own = c.ctx.profile.op("tiny_gemm")
        c.ctx.profile = dataclasses.replace(
            c.ctx.profile,
            ops={**c.ctx.profile.ops, "tiny_gemm": dataclasses.replace(own, test_shared=True)},
        )
        rec = c.validate("a typo")
        saved = json.loads((c.round_dir(rec.round) / "round.json").read_text())
    assert rec.category == "compile" and rec.shared_tested is True
    assert dict(rec.shared_with) == {"twin": (KERNEL,)} and saved["shared_tested"] is True
    typo_kernel(project)  # rolled back: the same candidate again
    with open_campaign(twin=([KERNEL], FAILING)) as c:  # the control: the op's default, false
        rec = c.validate("the same typo")
    assert rec.category == "compile" and rec.shared_tested is False


def test_test_shared_must_be_true_or_false(project):
    path = project / "ratchet.yaml"
    text = path.read_text()
    line = "    rebuild: null\n"
    path.write_text(text.replace(line, line + "    test_shared: maybe\n"))
    with pytest.raises(ProfileError, match=r"ops.tiny_gemm.test_shared: expected true or false"):
        load_profile(project)
    path.write_text(path.read_text().replace("test_shared: maybe", "test_shared: true"))
    assert load_profile(project).op("tiny_gemm").test_shared is True


def test_check_notes_the_ops_that_share_a_kernel_file(project, monkeypatch):
    from kernel_ratchet.profile.checklist import run_checklist

    monkeypatch.chdir(project)
    profile = with_ops(load_profile(project), twin=([KERNEL], "pytest a"))
    (shared,) = [i for i in run_checklist(profile, "tiny_gemm") if "shared with" in i.name]
    assert shared.ok and shared.warning and "twin" in shared.detail
    assert "test_shared: true" in shared.detail
    alone = run_checklist(load_profile(project), "tiny_gemm")
    assert not [i for i in alone if "shared with" in i.name]
