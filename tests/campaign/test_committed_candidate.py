"""A candidate the user committed before ``validate``: a rollback restores the kernel files in
the working tree, and says that the commit still holds the change."""

from __future__ import annotations

from pathlib import Path

from tests.campaign.conftest import (  # noqa: F401  (fixtures used by name)
    KERNEL,
    baselined,
    git,
    project,
    ratchet,
    typo_kernel,
)


def test_a_rolled_back_committed_candidate_is_named_with_its_commit(project: Path) -> None:  # noqa: F811
    before = (project / KERNEL).read_text()
    typo_kernel(project)
    git(project, "commit", "-qam", "my candidate")
    head = git(project, "rev-parse", "HEAD").strip()
    r = ratchet(project, "validate", "--hypothesis", "a committed candidate")
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 1, said
    assert (project / KERNEL).read_text() == before  # restored in the working tree
    assert f"it is also in your commit {head[:12]}" in said, said
    assert f"the restored {KERNEL} is uncommitted" in said
