"""Historical tips: ``<tips_root>/<gpu>/<op>/<backend lowercased>/tips.md`` (SPEC section 7)."""

from __future__ import annotations

from pathlib import Path

from kernel_ratchet.campaign.clock import now
from kernel_ratchet.campaign.fsutil import append_text
from kernel_ratchet.campaign.render import tip_entry


def tips_path(tips_root: Path, gpu: str, op: str, backend: str) -> Path:
    """``<tips_root>/<gpu>/<op>/<backend lowercased>/tips.md``."""
    return Path(tips_root) / gpu / op / backend.lower() / "tips.md"


def read_tips(path: Path) -> str:
    """The tips file's text (empty when there is none yet)."""
    return path.read_text(encoding="utf-8") if path.exists() else ""


def add_tip(
    path: Path, n: int, status: str, context: str, signal: str, takeaway: str, applicability: str
) -> str:
    """Append one entry (creating the file with a title); returns the entry."""
    if not path.exists():
        append_text(
            path,
            f"# Tips: {path.parent.parent.name} on {path.parent.parent.parent.name}"
            f" ({path.parent.name})\n\n",
        )
    entry = tip_entry(now(), n, status, context, signal, takeaway, applicability)
    append_text(path, entry)
    return entry
