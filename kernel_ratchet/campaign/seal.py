"""Sealed records: a closed round's files and the append-only logs cannot be edited unnoticed.

When a round is closed, the sha256 of every file in ``rounds/round-N/`` (its ``round.json``,
summary, benchmark CSVs, provenance and kernel snapshot) is written into the state's
``records``. Not sealed: ``__pycache__`` and the steps' raw output (``*.log``), which no decision
reads and which a step killed with the round (Ctrl+C, SIGTERM) may still be flushing after it
closed. Every command that reads the records (``validate``, ``status``,
``report``, the MCP tools) calls :func:`verify_records` first, so a value edited in a CSV or a
``round.json`` stops the command (LogTamperedError, exit 7) instead of changing a decision or
the REPORT's gain.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ratchet.campaign.fsutil import file_sha256
from kernel_ratchet.errors import LogTamperedError

if TYPE_CHECKING:
    from kernel_ratchet.campaign.context import CampaignContext

APPEND_ONLY_LOGS = ("logs/optimize.md", "logs/performance_trend.md")


def _record_files(rdir: Path) -> Iterator[Path]:
    for path in sorted(rdir.rglob("*")):
        unsealed = "__pycache__" in path.parts or path.suffix in (".pyc", ".log")
        if path.is_file() and not unsealed:
            yield path


def seal_round(c: CampaignContext, n: int) -> None:
    """Record the sha256 of each of round ``n``'s files in the state (saved by the caller)."""
    for path in _record_files(c.round_dir(n)):
        c.state.records[c.rel(path)] = file_sha256(path)


def verify_records(c: CampaignContext) -> None:
    """Raise LogTamperedError when an append-only log's written part or a sealed round file
    was changed or removed since it was written."""
    for rel in APPEND_ONLY_LOGS:
        c.log(rel).verify()
    changed = [
        rel for rel, sha in sorted(c.state.records.items()) if file_sha256(c.dir / rel) != sha
    ]
    if changed:
        raise LogTamperedError(
            f"the records of closed rounds were changed after they were written: "
            f"{', '.join(changed)} (in {c.dir}). The decisions and the REPORT read them; "
            "restore the originals (a git checkout or backup of the campaign directory) or "
            "start a new campaign"
        )
