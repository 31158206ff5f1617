"""Workspace-mode on the CPU example: extraction, rounds in the campaign directory, sync-back
(only the kernel file, re-validated in the project) and its refusal after an upstream change.

The project starts from 32x32 output tiles with 8-wide k-steps, committed (the interpreter
runs 32x32 tiles 2.5x faster than the example's own 16x16), and the accepted round takes
32-wide k-steps: a quarter of the iterations on every shape, so the round is faster on each of
them, not only on the aggregate (64x64 tiles overhang the 32x32 shape, were slower there, and
on a loaded machine the per-shape regression rule rolled them back), and by more than a loaded
machine's noise (from 16-wide steps, +20% read AMBIGUOUS beside other processes). The
workspace's rounds are what is checked here, not the example's first gain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernel_ratchet.campaign.lineage.workspace import extract
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import (
    KERNEL,
    break_kernel,
    campaign_dir,
    cli_env,
    git,
    make_project,
    ratchet,
    set_blocks,
)
from tests.shared_build import built_once

pytestmark = pytest.mark.slow


def _ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def ws_accepted(tmp_path_factory) -> Path:
    """A workspace campaign: extracted, baselined, round-2 (32-wide k-steps) ACCEPTED."""

    def build(dest: Path) -> Path:
        root = make_project(dest / "proj")
        set_blocks(root, M=32, N=32, K=8)
        git(root, "commit", "-qm", "32x32 output tiles, 8-wide k-steps", "--", KERNEL)
        _ok(ratchet(root, "init", "--op", "tiny_gemm", "--mode", "workspace", "--yes"))
        _ok(ratchet(root, "baseline"))
        set_blocks(campaign_dir(root) / "src", K=32)
        r = _ok(ratchet(root, "validate", "--hypothesis", "32-wide k-steps"))
        assert "ACCEPTED" in r.stdout
        return root

    return built_once(tmp_path_factory, "workspace-accepted", build)


@pytest.fixture
def ws_copy(ws_accepted: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "proj"
    shutil.copytree(ws_accepted, dest, symlinks=True)
    return dest


def test_extraction_layout_and_imports(ws_accepted):
    root, cdir = ws_accepted, campaign_dir(ws_accepted)
    upstream = git(root, "rev-parse", "HEAD").strip()
    ws = json.loads((cdir / "workspace.json").read_text())
    assert ws["upstream_commit"] == upstream
    assert ws["files"] == {
        "src/tiny_gemm/kernel.py": KERNEL,
        "src/tiny_gemm/__init__.py": "(overlay of tiny_gemm)",
        "tests/test_kernel.py": "tests/test_kernel.py",
        "bench/tiny_gemm/bench.py": "tiny_gemm/bench.py",
    }
    assert (cdir / "tests/test_kernel.py").read_text() == (
        root / "tests/test_kernel.py"
    ).read_text()
    assert (cdir / "rounds/round-1/kernel_snapshot" / KERNEL).read_text() == git(
        root, "show", f"HEAD:{KERNEL}"
    )
    m = yaml.safe_load((cdir / "manifest.yaml").read_text())
    assert (m["execution_mode"], m["git_commit"], m["git_branch"]) == ("workspace", False, "none")
    assert m["starting_commit"] == upstream and "../tests/test_kernel.py" in m["test_command"]
    # the project: same branch, no commit, the campaign dir git-excluded
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert ".ratchet" not in git(root, "status", "--porcelain")
    # in src/, the extracted kernel shadows the project's; the rest comes from the project
    probe = "import tiny_gemm.kernel as k, tiny_gemm.adapter as a; print(k.__file__, a.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cdir / "src",
        capture_output=True,
        text=True,
        env=cli_env(root),
        check=True,
    ).stdout.split()
    assert out == [str(cdir / "src" / KERNEL), str(root / "tiny_gemm/adapter.py")]


def test_rewritten_commands_keep_node_ids_and_options(tmp_path):
    root = make_project(tmp_path / "proj")
    prof = load_profile(root / "ratchet.yaml")
    op = prof.op("tiny_gemm")
    op = type(op)(**{**op.__dict__, "test": "pytest tests/test_kernel.py::test_x -k 'a b' -q"})
    cdir = root / ".ratchet/campaigns/c"
    ext = extract(prof, op, cdir, "abc")
    assert ext.test_command.endswith("pytest ../tests/test_kernel.py::test_x -k 'a b' -q")
    assert ext.test_command.startswith('PYTHONPATH="$PWD:$PWD/../../../..')
    assert (cdir / "src" / KERNEL).read_text() == (root / KERNEL).read_text()


def test_a_kernel_file_to_come_is_extracted_as_absent(tmp_path):
    """A kernel_source file a round will create: recorded as absent, its directory made in the
    workspace; a kernel path that is a directory is refused."""
    root = make_project(tmp_path / "proj")
    prof = load_profile(root / "ratchet.yaml")
    op = prof.op("tiny_gemm")
    new = "tiny_gemm/tiles/blocks.py"
    op = type(op)(**{**op.__dict__, "kernel_source": (KERNEL, new)})
    cdir = root / ".ratchet/campaigns/c"
    extract(prof, op, cdir, "abc")
    files = json.loads((cdir / "workspace.json").read_text())["kernel_files"]
    assert files[new] is None and files[KERNEL] is not None
    assert (cdir / "src/tiny_gemm/tiles").is_dir() and not (cdir / "src" / new).exists()
    (root / new).mkdir(parents=True)
    with pytest.raises(CampaignError, match="not a file"):
        extract(prof, op, root / ".ratchet/campaigns/d", "abc")


def test_rounds_run_in_the_workspace(ws_accepted, ws_copy, ratchet_here):
    root, cdir = ws_copy, campaign_dir(ws_copy)
    # the accepted round changed only the workspace: the project's kernel and history are intact
    assert "BLOCK_M = 32" in (root / KERNEL).read_text()
    assert len(git(root, "log", "--format=%H").split()) == 2
    assert "+BLOCK_K = 32" in (cdir / "rounds/round-2/artifacts/candidate.diff").read_text()
    incumbent = (cdir / "src" / KERNEL).read_text()
    # a failing change is rolled back from the incumbent's snapshot, in the workspace
    break_kernel(cdir / "src")
    r = ratchet_here(root, "validate", "--hypothesis", "shifted loads")
    assert r.returncode == 1 and "ROLLED BACK" in r.stdout, r.stdout + r.stderr
    assert (cdir / "src" / KERNEL).read_text() == incumbent
    # the scope guard watches the workspace's own test, bench and overlay files
    with open(cdir / "tests/test_kernel.py", "a") as f:
        f.write("\n# loosen the test\n")
    set_blocks(cdir / "src", M=64)
    r = ratchet_here(root, "validate", "--hypothesis", "64-row tiles")
    assert r.returncode == 5 and "outside kernel_source" in r.stderr, r.stdout + r.stderr


def test_sync_back_applies_only_the_kernel_and_revalidates(ws_copy, ratchet_here):
    root, cdir = ws_copy, campaign_dir(ws_copy)
    start = git(root, "rev-parse", "HEAD").strip()
    n = len(yaml.safe_load((cdir / "manifest.yaml").read_text())["target_shapes"])
    r = _ok(ratchet_here(root, "sync-back"))
    assert "SYNCED" in r.stdout and f"{n}/{n} shapes PASS" in r.stdout
    # its timing against the BASELINE's (minutes apart, -31% seen on a loaded CPU) gates nothing
    assert "a diagnostic; the paired chain is the campaign's gain" in " ".join(r.stdout.split())
    assert (root / KERNEL).read_text() == (cdir / "src" / KERNEL).read_text()
    assert git(root, "diff", "--name-only", start, "HEAD").split() == [KERNEL]
    assert git(root, "log", "-1", "--format=%s").startswith("[optimize] tiny_gemm TRITON round-2")
    cited = f"Record: campaign {cdir.name}, rounds/round-2/summary.md in its records"
    assert cited in git(root, "log", "-1", "--format=%B")  # not the log git ignores
    # the user's uncommitted work is untouched and still uncommitted
    assert (root / "notes.txt").read_text() == "my notes\n"
    assert sorted(git(root, "status", "--porcelain").split()) == [
        "??",
        "M",
        "notes.txt",
        "pyproject.toml",
    ]
    # the integration gate ran in the project
    test_log = (cdir / "sync-back/test.log").read_text()
    cwd = next(ln for ln in test_log.splitlines() if ln.startswith("# cwd: "))
    rel = cwd.removeprefix("# cwd: ").removesuffix(" (from this log's folder)")
    assert (cdir / "sync-back" / rel).resolve() == root.resolve() and str(root) not in cwd
    assert "tests/test_kernel.py" in test_log
    assert (cdir / "sync-back/benchmark.csv").exists()
    assert json.loads((cdir / "sync-back/result.json").read_text())["ok"] is True
    assert "## Sync-back of round-2" in (cdir / "logs/optimize.md").read_text()
    # a later accepted round can be synced over this one: the project's kernel is now an
    # accepted round's (the tool's own commit), not work from upstream
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.lineage.workspace import load_workspace
    from kernel_ratchet.campaign.sync_back import _upstream_changes

    with Campaign(load_profile(root), cdir) as c:
        later = {KERNEL: b"# a later accepted round's kernel\n"}
        assert _upstream_changes(c.ctx, load_workspace(cdir), later) == []


def test_sync_back_refuses_when_the_kernel_changed_upstream(ws_copy, ratchet_here):
    root = ws_copy
    set_blocks(root, K=16)  # someone else's change to the project's kernel, committed
    git(root, "commit", "-qam", "upstream tweak")
    upstream = (root / KERNEL).read_text()
    r = ratchet_here(root, "sync-back")
    assert r.returncode == 5 and "changed upstream" in r.stderr, r.stdout + r.stderr
    assert (root / KERNEL).read_text() == upstream
    assert not (campaign_dir(root) / "sync-back").exists()


def test_the_tests_of_sharing_ops_are_refused_in_a_workspace(ws_copy, ratchet_here):
    """A workspace carries its own op's tests only: --test-shared says so before any round."""
    root, cdir = ws_copy, campaign_dir(ws_copy)
    before = json.loads((cdir / "state.json").read_text())["next_round"]
    set_blocks(cdir / "src", M=64)
    r = ratchet_here(root, "validate", "--test-shared", "--hypothesis", "64-row tiles")
    assert r.returncode != 0 and "need a repo-mode campaign" in r.stdout + r.stderr
    assert json.loads((cdir / "state.json").read_text())["next_round"] == before


def test_the_incumbent_side_imports_the_accepted_round_not_the_project(ws_copy, monkeypatch):
    """The paired A/B's incumbent runs from a worktree of the project, where the workspace's
    git-excluded src/ is missing: without its package overlays the kernel imported there was
    the project's own (16-wide k-steps), and an unchanged candidate read 8x faster."""
    from kernel_ratchet.campaign.engine import Campaign
    from kernel_ratchet.campaign.lineage.worktree import incumbent_tree

    monkeypatch.chdir(ws_copy)
    with Campaign(load_profile(ws_copy), campaign_dir(ws_copy)) as c:
        root = incumbent_tree(c.ctx)
    probe = "import tiny_gemm.kernel as k; print(k.BLOCK_K, k.__file__)"
    env = {**cli_env(ws_copy), "PYTHONPATH": f"{root}{os.pathsep}{ws_copy}"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, env=env, capture_output=True, text=True
    )
    block, path = out.stdout.split()
    assert block == "32" and Path(path).resolve().is_relative_to(root.resolve()), out.stderr


def test_an_edit_of_the_projects_kernel_is_sent_to_the_workspace(ws_copy, ratchet_here):
    """Rounds edit the workspace's src/: a user who edits the project's own copy is told where."""
    set_blocks(ws_copy, M=64)
    r = ratchet_here(ws_copy, "validate", "--hypothesis", "64-row tiles")
    cdir = campaign_dir(ws_copy)
    assert r.returncode == 5, r.stdout + r.stderr
    assert f"in .ratchet/campaigns/{cdir.name}/src) equal the incumbent's" in r.stderr


def test_a_patch_of_the_projects_kernel_lands_in_the_workspace(ws_copy, monkeypatch, tmp_path):
    """``validate --patch``: a diff made in the project (its paths from the project's top) is
    applied to the workspace's copy of the kernel, which the round measures."""
    from kernel_ratchet.campaign import engine
    from kernel_ratchet.campaign.candidate_patch import validate_patch
    from kernel_ratchet.campaign.engine import Campaign

    set_blocks(ws_copy, K=32)  # the project's kernel as the workspace's incumbent has it
    git(ws_copy, "commit", "-qm", "32-wide k-steps", "--", KERNEL)
    set_blocks(ws_copy, M=64)
    patch = tmp_path / "m64.diff"
    patch.write_text(git(ws_copy, "diff", "--", KERNEL))
    git(ws_copy, "checkout", "--", KERNEL)
    seen = []

    def measure(ctx, n, pending):
        seen.append((ctx.root / KERNEL).read_text())
        raise KeyError("stop")

    monkeypatch.setattr(engine, "measure", measure)
    monkeypatch.chdir(ws_copy)
    with Campaign(load_profile(ws_copy), campaign_dir(ws_copy)) as c, pytest.raises(KeyError):
        validate_patch(c, "64-row tiles", patch)
    (measured,) = seen
    assert "BLOCK_M = 64" in measured and "BLOCK_K = 32" in measured  # the workspace's kernel
    assert "BLOCK_M = 64" not in (ws_copy / KERNEL).read_text()
