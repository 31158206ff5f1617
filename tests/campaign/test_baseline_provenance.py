"""The baseline's summary says when the tree it measured held changes no commit holds."""

from __future__ import annotations

from .conftest import campaign_dir


def test_the_baseline_summary_lists_uncommitted_changes_outside_the_kernel(project):
    """The project of these tests keeps an uncommitted pyproject.toml (and notes.txt, which no
    round can read) when its baseline is measured."""
    summary = (campaign_dir(project) / "rounds" / "round-1" / "summary.md").read_text()
    line = next(x for x in summary.splitlines() if "changes no commit holds" in x)
    assert "pyproject.toml" in line and "notes.txt" not in line, line


def test_a_long_list_of_uncommitted_paths_is_cut_to_a_count():
    from kernel_ratchet.campaign.rounds.close import MAX_NAMED, listed

    paths = [f"scratch/run{i:02d}.sh" for i in range(MAX_NAMED + 5)]
    line = listed(paths)
    assert line.startswith("scratch/run00.sh, ") and f"run{MAX_NAMED - 1:02d}.sh and 5 more" in line
    assert f"run{MAX_NAMED:02d}.sh" not in line
    assert listed(paths[:2]) == "scratch/run00.sh, scratch/run01.sh"
