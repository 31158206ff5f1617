"""Red team (CPU): cheats that live outside the kernel's code, against a whole campaign on the
tiny example project (scope check, backend rule, round records).

The suite already covers an edited focused test (``tests/campaign/test_guards.py``: any file
outside ``kernel_source``), an edited harness and an edited log. Here: an edited reference and
a shrunk problem (both outside the kernel's files, so the scope check must refuse the round
before any measurement), the same edit hidden from ``git status``, and the Triton kernel
replaced by the vendor library in a TRITON campaign.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kernel_ratchet.campaign.engine import Campaign
from kernel_ratchet.errors import CampaignError
from kernel_ratchet.profile.loader import load_profile
from tests.campaign.conftest import (  # noqa: F401  (fixtures used by name)
    KERNEL,
    baselined,
    campaign_dir,
    project,
    set_blocks,
)
from tests.redteam import sources as S
from tests.redteam.expect import expect_flagged

pytestmark = pytest.mark.slow


@pytest.fixture
def validate(project: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    """``validate(hypothesis)``: one round of the campaign in ``project``; its record."""
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(project), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.chdir(project)

    def _validate(hypothesis: str) -> dict[str, Any]:
        with Campaign(load_profile(project), campaign_dir(project)) as c:
            return c.validate(hypothesis).to_dict()

    return _validate


def _shrink_inputs(text: str) -> str:
    return text.replace("torch.randn(shape.M, shape.K", "torch.randn(max(shape.M // 4, 1), shape.K")


def _float32_reference(text: str) -> str:
    return text.replace("(a.double() @ b.double().T).to(torch.float32)", "a @ b.T")


def _explain(rec: dict[str, Any]) -> str:
    keep = ("status", "category", "reason", "out_of_scope")
    return str({k: rec.get(k) for k in keep})


def _expect_rolled_back(rec: dict[str, Any], category: str, says: str) -> None:
    """The round ``rec`` was rolled back in ``category``, its reason saying ``says``."""
    expect_flagged(
        rec["status"] == "ROLLED BACK" and rec["category"] == category,
        rec["reason"],
        says,
        _explain(rec),
    )


def _refused(project: Path, validate, hypothesis: str) -> str:  # noqa: F811
    """The refusal of ``validate(hypothesis)``: no round opened, the kernel edit kept, the
    refusal in the campaign's log."""
    kernel = (project / KERNEL).read_text()
    with pytest.raises(CampaignError) as refused:
        validate(hypothesis)
    cdir = campaign_dir(project)
    assert not (cdir / "rounds/round-2").exists()
    assert (project / KERNEL).read_text() == kernel
    assert "validate refused before a round" in (cdir / "logs/optimize.md").read_text()
    return str(refused.value)


@pytest.mark.parametrize(
    ("rel", "edit"),
    [
        pytest.param("tiny_gemm/reference.py", _float32_reference, id="edited-reference"),
        pytest.param("tiny_gemm/adapter.py", _shrink_inputs, id="shrunk-problem-in-the-adapter"),
    ],
)
def test_an_edit_outside_the_kernel_is_refused_before_measuring(
    project: Path,  # noqa: F811
    validate,
    rel: str,
    edit,
) -> None:
    path = project / rel
    changed = edit(path.read_text())
    assert changed != path.read_text()
    path.write_text(changed)
    set_blocks(project, M=32, N=32)
    why = _refused(project, validate, "32x32 tiles")
    expect_flagged("outside kernel_source changed" in why, why, f"['{rel}']", why)


def test_an_edit_hidden_from_git_status_is_still_out_of_scope(
    project: Path,  # noqa: F811
    validate,
) -> None:
    ref = project / "tiny_gemm/reference.py"
    ref.write_text(_float32_reference(ref.read_text()))
    subprocess.run(
        ["git", "update-index", "--skip-worktree", "tiny_gemm/reference.py"],
        cwd=project,
        check=True,
    )
    set_blocks(project, M=32, N=32)
    why = _refused(project, validate, "32x32 tiles")
    expect_flagged("outside kernel_source" in why, why, "tiny_gemm/reference.py", why)
    assert "--no-skip-worktree" in why  # how to make git show the edit again


def test_an_edit_committed_outside_the_kernel_is_still_out_of_scope(
    project: Path,  # noqa: F811
    validate,
) -> None:
    """A commit does not take a change out of the round's scope: a reference loosened and
    committed before the round is refused as an uncommitted one is, with how to restore it."""
    ref = project / "tiny_gemm/reference.py"
    ref.write_text(_float32_reference(ref.read_text()))
    subprocess.run(["git", "commit", "-qam", "tweak the reference"], cwd=project, check=True)
    set_blocks(project, M=32, N=32)
    why = _refused(project, validate, "32x32 tiles")
    expect_flagged("outside kernel_source" in why, why, "tiny_gemm/reference.py", why)
    assert "changed in a commit since the incumbent's" in why and "git checkout " in why


def test_a_kernel_that_reaches_for_the_checker_is_refused_before_measuring(
    project: Path,  # noqa: F811
    validate,
) -> None:
    """A kernel file that swaps the harness's SNR code for "always a match" (and returns zeros)
    is refused by what it adds before any process is started."""
    path = project / KERNEL
    path.write_text(
        path.read_text()
        + "\nimport importlib\n"
        + "_c = importlib.import_module('kernel_ratchet.harness.correctness')\n"
        + "_c.snr_db.__code__ = (lambda out, ref: float('inf')).__code__\n"
    )
    rec = validate("a faster kernel")
    _expect_rolled_back(rec, "cheat", "__code__")
    assert "refused before any measurement" in rec["reason"]


@pytest.mark.parametrize(
    ("source", "why"),
    [
        pytest.param(S.VENDOR_LINEAR, "backend", id="named-in-the-source"),
        pytest.param(S.VENDOR_COMPUTED_NAME, "aten::mm", id="name-built-at-run-time"),
    ],
)
def test_a_vendor_library_swap_is_not_accepted_as_a_kernel_gain(
    project: Path,  # noqa: F811
    validate,
    source: str,
    why: str,
) -> None:
    (project / KERNEL).write_text(source)
    rec = validate("use the vendor GEMM")
    _expect_rolled_back(rec, "backend", why)


@pytest.mark.parametrize("ignored", [False, True], ids=["untracked", "ignored"])
def test_a_new_module_beside_the_kernel_is_out_of_scope_even_when_ignored(
    project: Path,  # noqa: F811
    validate,
    ignored: bool,
) -> None:
    """A module the round adds beside the kernel: no commit would hold it, so an accepted
    kernel that imports it could not be rebuilt from git, also when an ignore rule hides it
    from ``git status``. The refusal says kernel_source is frozen, not to ignore it."""
    (project / "tiny_gemm" / "helper_new.py").write_text("FAST = True\n")
    if ignored:
        with open(project / ".git" / "info" / "exclude", "a") as f:
            f.write("tiny_gemm/helper_new.py\n")
    set_blocks(project, M=32, N=32)
    why = _refused(project, validate, "32x32 tiles with a helper")
    assert "tiny_gemm/helper_new.py is a module no commit holds" in why, why
    assert "kernel_source is frozen" in why and ".gitignore" not in why, why


#: Kernel code that, imported by a worker, writes a package ``kernel/`` into the incumbent's
#: worktree: beside ``kernel.py`` it wins the incumbent's next import (a slowed copy would).
PLANT = """
import os as _os, pathlib as _pl
if "KR_WORKER_SPEC" in _os.environ:
    _root = _pl.Path(__file__).resolve().parents[1] / ".ratchet"
    for _d in _root.glob("**/.incumbent/tiny_gemm"):
        (_d / "kernel").mkdir(exist_ok=True)
        (_d / "kernel" / "__init__.py").write_text("SLOW = True\\n")
"""

#: Kernel code that, imported by a worker, leaves a process in a session of its own.
ESCAPE = """
import os as _os
if "KR_WORKER_SPEC" in _os.environ:
    _os.system("setsid sleep 98 >/dev/null 2>&1 </dev/null &")
"""


#: Kernel code that, imported by a worker, edits the campaign's frozen manifest (its gates).
EDIT_MANIFEST = """
import os as _os, pathlib as _pl
if "KR_WORKER_SPEC" in _os.environ:
    for _m in (_pl.Path(__file__).resolve().parents[1] / ".ratchet").glob("**/manifest.yaml"):
        _m.write_text(_m.read_text() + "\\n# loosened\\n")
"""


@pytest.mark.parametrize(
    ("code", "says"),
    [
        pytest.param(PLANT, "code files of the incumbent's worktree changed", id="planted-module"),
        pytest.param(ESCAPE, "processes outside both workers", id="escaped-process"),
        pytest.param(EDIT_MANIFEST, "sealed files of the campaign changed", id="edited-manifest"),
    ],
)
def test_code_that_works_on_the_incumbents_side_is_a_cheat(
    project: Path,  # noqa: F811
    validate,
    code: str,
    says: str,
) -> None:
    """A candidate that slows the incumbent, through its worktree's files or a process that
    left the candidate's worker, gains nothing: the round is rolled back as a cheat."""
    _rolled_back_as_cheat(project, validate, code, says)


def _rolled_back_as_cheat(root: Path, validate, code: str, says: str) -> None:
    """A 32x32-tile round whose kernel file also runs ``code``: rolled back as a cheat that
    ``says`` so."""
    set_blocks(root, M=32, N=32)
    path = root / KERNEL
    path.write_text(path.read_text() + code)
    rec = validate("32x32 tiles")
    _expect_rolled_back(rec, "cheat", says)


#: PLANT, hidden by an ignore rule, in a round that also edits a file outside the kernel (a
#: scope rollback must not hide the cheat, and the plant must not outlive the round).
PLANT_IGNORED = """
import os as _os, pathlib as _pl
if "KR_WORKER_SPEC" in _os.environ:
    _proj = _pl.Path(__file__).resolve().parents[1]
    with open(_proj / ".git" / "info" / "exclude", "a") as _f:
        _f.write("/tiny_gemm/kernel/\\n")
    for _d in (_proj / ".ratchet").glob("**/.incumbent/tiny_gemm"):
        (_d / "kernel").mkdir(exist_ok=True)
        (_d / "kernel" / "__init__.py").write_text("SLOW = True\\n")
    _b = _proj / "tiny_gemm" / "bench.py"
    _b.write_text(_b.read_text() + "\\n# a note\\n")
"""


def test_an_ignored_plant_beside_a_scope_slip_is_a_cheat_and_is_cleaned(
    project: Path,  # noqa: F811
    validate,
) -> None:
    from kernel_ratchet.campaign.lineage import tree_seal
    from kernel_ratchet.campaign.lineage.worktree import incumbent_tree

    _rolled_back_as_cheat(
        project, validate, PLANT_IGNORED, "code files of the incumbent's worktree changed"
    )
    planted = list((project / ".ratchet").glob("**/.incumbent/tiny_gemm/kernel/__init__.py"))
    assert planted, "the plant was written (the test plants what it claims)"
    with Campaign(load_profile(project), campaign_dir(project)) as c:
        tree_seal.reset()  # the next round's first preparation
        incumbent_tree(c.ctx)
    assert not any(p.exists() for p in planted)
