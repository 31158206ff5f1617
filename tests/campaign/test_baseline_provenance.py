"""The baseline's summary says when the tree it measured held changes no commit holds."""

from __future__ import annotations

from .conftest import campaign_dir


def test_the_baseline_summary_lists_uncommitted_changes_outside_the_kernel(project):
    """The project of these tests keeps an uncommitted pyproject.toml (and notes.txt, which no
    round can read) when its baseline is measured."""
    summary = (campaign_dir(project) / "rounds" / "round-1" / "summary.md").read_text()
    line = next(x for x in summary.splitlines() if "changes no commit holds" in x)
    assert "pyproject.toml" in line and "notes.txt" not in line, line
