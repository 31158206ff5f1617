"""A kernel wrong on every target shape is fixed through a campaign: ``baseline
--known-failure`` stands with no shape passing, only a ``validate --fix`` round may follow, and
it is accepted on correctness alone (no pair can be timed against such an incumbent), once its
own worker has passed the checks an A/B opens with."""

from __future__ import annotations

import difflib
import json

import pytest

from kernel_ratchet.campaign.rounds.correctness_only import FIX_ALONE
from kernel_ratchet.campaign.rounds.preconditions import round_level
from kernel_ratchet.errors import CampaignError
from tests.campaign.conftest import KERNEL, campaign_dir, git, make_project, set_blocks

#: Appended to the kernel: the reference module, reached without naming it, replaced by the
#: kernel itself.
_HIJACK = """

import importlib as _il

_ref = _il.import_module(".".join(["tiny_gemm", "refer" + "ence"]))
_ref.matmul_nt_ref = lambda a, b: matmul_nt(a, b)
"""


def _unified(before: str, after: str) -> str:
    """The kernel's change from ``before`` to ``after``, as ``git diff`` writes it."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{KERNEL}",
            f"b/{KERNEL}",
        )
    )  # fmt: skip


def _record(root, n: int) -> dict:
    return json.loads((campaign_dir(root) / "rounds" / f"round-{n}" / "round.json").read_text())


def _wrong_everywhere(open_campaign, project):
    """The session's campaign with its incumbent's full validation failing every shape: a
    copy of the BASELINE's CSV with each Check turned to FAIL (the state is not saved)."""
    c = open_campaign()
    base = campaign_dir(project) / "rounds" / "round-1" / "artifacts" / "benchmark.csv"
    failing = campaign_dir(project) / "failing.csv"
    failing.write_text(base.read_text().replace(",PASS,", ",FAIL,"))
    c.state.incumbent_full_csv = c.state.incumbent_quick_csv = "failing.csv"
    return c


def test_a_round_that_is_not_a_fix_is_refused_while_no_shape_passes(open_campaign, project):
    c = _wrong_everywhere(open_campaign, project)
    set_blocks(project, M=32, N=32)
    with pytest.raises(CampaignError, match=r"validate --fix") as err:
        c.validate("32x32 tiles")
    assert "no round was opened and nothing was measured" in str(err.value)
    assert c.state.next_round == 2 and c.state.pending is None
    assert not c.round_dir(2).exists()
    assert "BLOCK_M = 32" in (project / KERNEL).read_text()  # the edit is left in the tree
    # a fix is taken, and runs at the full level whatever was asked
    assert round_level(c.ctx, "quick", fix=True) == "full"
    assert round_level(c.ctx, "quick", fix=False) == "quick"
    c.state.incumbent_full_csv = "rounds/round-1/artifacts/benchmark.csv"  # passes again
    assert round_level(c.ctx, "quick", fix=True) == "quick"


@pytest.mark.slow
def test_a_kernel_wrong_on_every_shape_is_fixed_through_a_campaign(tmp_path, ratchet_here):
    """Rows of 20 come out zero, and every target shape has 20 rows; the focused test, which
    has none, passes: the harness's check is what catches the bug. The CLI runs in this
    process (what it starts still runs apart): seven commands without an interpreter's
    start-up each."""
    root = make_project(tmp_path / "proj")
    ratchet = ratchet_here
    good = (root / KERNEL).read_text()
    (root / KERNEL).write_text(
        good.replace("    return c\n", "    return c * 0 if M == 20 else c\n")
    )
    git(root, "commit", "-qm", "rows of 20 come out zero", "--", KERNEL)
    shapes = (
        '[{"label": "a", "M": 20, "N": 32, "K": 32}, {"label": "b", "M": 20, "N": 16, "K": 48}]'
    )
    r = ratchet(root, "init", "--op", "tiny_gemm", "--yes", "--shapes", f"inline:{shapes}")
    assert r.returncode == 0, r.stdout + r.stderr
    r = ratchet(root, "baseline")
    assert r.returncode != 0 and "no shape passes the harness's correctness" in r.stderr
    assert "`ratchet baseline --known-failure WHICH`" in r.stderr, r.stderr
    r = ratchet(root, "baseline", "--known-failure", "rows of 20 come out zero")
    assert r.returncode == 0, r.stdout + r.stderr
    reason = _record(root, 1)["reason"]
    assert reason.startswith("baseline: 0/2 shapes PASS (a, b: out: SNR "), reason
    assert "as declared (rows of 20 come out zero): only `validate --fix` rounds" in reason
    assert reason.endswith("; focused test passed")  # not "did not show": it did
    manifest = (campaign_dir(root) / "manifest.yaml").read_text()
    assert "representative_shapes:\n- a\n- b\n" in manifest  # chosen from failing rows
    # a plain round is refused before anything runs
    set_blocks(root, M=32, N=32)
    r = ratchet(root, "validate", "--hypothesis", "32x32 tiles")
    assert r.returncode != 0 and "validate --fix" in r.stderr, r.stdout + r.stderr
    assert not (campaign_dir(root) / "rounds" / "round-2").exists()
    # a "fix" that keeps the bug and replaces the reference at import, so that the harness's
    # check (in its own process, with the reference beside the kernel) agrees with the wrong
    # rows: the candidate's worker, which checks as an A/B would, refuses it
    bad = (root / KERNEL).read_text()
    (root / KERNEL).write_text(bad + _HIJACK)
    fix = tmp_path / "forged.diff"
    fix.write_text(git(root, "diff", "--", KERNEL))
    git(root, "checkout", "--", KERNEL)
    r = ratchet(root, "validate", "--fix", "--patch", str(fix), "--hypothesis", "forged")
    rec = _record(root, 2)
    assert rec["status"] == "ROLLED BACK" and rec["category"] == "cheat", r.stdout + r.stderr
    assert rec["reason"].startswith("the candidate's worker check failed: candidate failed")
    assert "tiny_gemm.reference.matmul_nt_ref" in rec["reason"]
    assert rec["failure"]["log_path"] == "rounds/round-2/artifacts/paired/candidate_worker.log"
    # the fix and a change on top of it, prepared as a queue and measured in one run: the
    # fix at the full level with no pair timed, the next round paired against it as usual
    queue = tmp_path / "queue"
    queue.mkdir()
    tiles = good.replace("BLOCK_M = 16", "BLOCK_M = 32").replace("BLOCK_N = 16", "BLOCK_N = 32")
    for name, before, after, fields in (
        ("01-keep-row-20", git(root, "show", f"HEAD:{KERNEL}"), good, {"fix": True}),
        ("02-tiles", good, tiles, {"after": "01-keep-row-20"}),
    ):
        (queue / f"{name}.diff").write_text(_unified(before, after))
        (queue / f"{name}.json").write_text(json.dumps({"hypothesis": name, **fields}))
    r = ratchet(root, "resume", "--optimizer", "queue", "--queue", str(queue))
    assert r.returncode == 0, r.stdout + r.stderr
    rec = _record(root, 3)
    assert rec["status"] == "ACCEPTED" and rec["level"] == "full", rec
    assert rec["reason"].startswith(FIX_ALONE) and "no speed is claimed" in rec["reason"]
    assert rec["decision"]["correctness_only"] and not rec["decision"]["paired"]
    assert not (campaign_dir(root) / "rounds" / "round-3" / "artifacts" / "paired.json").exists()
    rec = _record(root, 4)
    assert rec["decision"]["paired"] and rec["incumbent_round"] == 3, r.stdout + r.stderr
    r = ratchet(root, "status", "--json")
    rows = {x["round"]: x for x in json.loads(r.stdout)["rounds"]}
    assert [rows[n]["chain_from"] for n in (1, 2, 3, 4)] == [1, 1, 1, 3], rows
    assert rows[4]["paired_chain"] is not None and rows[3]["paired_chain"] is None
    r = ratchet(root, "status")  # the chain counts from the fix, and says so
    assert "paired chains after round-3 count from it: a fix accepted" in r.stdout, r.stdout
    report = (campaign_dir(root) / "report.md").read_text()  # the queue run's end wrote it
    assert "no comparison with the BASELINE: it passed no shape" in report
    assert "- Not counted: round-3, fixes accepted on correctness alone" in report
    assert "not in the chain, which counts from them: 1 fix(es)" in report
