"""Append-only logs (``logs/optimize.md``, ``logs/performance_trend.md``).

After each append the tool records the file's length and sha256 in the campaign state and keeps
a shadow copy. Before the next append it checks that the recorded prefix is unchanged: text
added after it (a correction appended by hand) is welcome; an edit to what was already written
stops the tool with the first changed line and how to append a correction instead. Text appended
by hand may not read as the tool's own records (a round's trend row, a heading of the tool's
sections): the tool's next append would seal it among them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from kernel_ratchet.campaign.fsutil import append_text, atomic_write_text, sha256_bytes
from kernel_ratchet.errors import LogTamperedError

#: Lines only the tool writes: a trend row, and the headings of its sections (a round, the
#: baseline, the report, the termination, acceptance, sync-back, calibration, a review).
_TOOL_RECORD = re.compile(
    r"^\s*(\|\s*round-\d|#{1,4}\s*(Round \d|Baseline|Final report|Termination|Acceptance|"
    r"Sync-back|Calibration|Current best|Stagnation review|Basic information))"
)


class AppendOnlyLog:
    """One append-only log of a campaign; ``digests`` (the state's ``logs``) holds what was
    written so far. Raises LogTamperedError when the written part was edited."""

    def __init__(self, campaign_dir: Path, rel: str, digests: MutableMapping[str, Any]) -> None:
        self.dir = Path(campaign_dir)
        self.rel = rel
        self.path = self.dir / rel
        self.shadow = self.dir / ".shadow" / rel.replace("/", "__")
        self.digests = digests

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.path.exists() else ""

    def verify(self) -> None:
        """Raise LogTamperedError when the already-written prefix was changed."""
        rec = self.digests.get(self.rel)
        if rec is None:
            return
        data = self.path.read_bytes() if self.path.exists() else b""
        n = int(rec["len"])
        if len(data) >= n and sha256_bytes(data[:n]) == rec["sha256"]:
            return
        shadow = self.shadow.read_bytes() if self.shadow.exists() else b""
        intact = sha256_bytes(shadow[:n]) == rec["sha256"]
        where = _first_change(
            shadow.decode(encoding="utf-8", errors="replace"),
            data.decode(encoding="utf-8", errors="replace"),
        )
        copy = (
            f"a copy is in {self.shadow}"
            if intact
            else f"its copy {self.shadow} was changed too: take it from a backup or git"
        )
        raise LogTamperedError(
            f"{self.path} is append-only, but its already-written part was changed ({where}). "
            f"Restore the original text ({copy}) and append a correction at the end instead, "
            "e.g. a line '> Correction (YYYY-MM-DD HH:MM): ...'."
        )

    def refuse_forged(self) -> None:
        """Raise LogTamperedError when text after the written part reads as a record (call it
        with no round in flight: a round killed mid-write leaves its own text there, which
        recovery seals)."""
        rec = self.digests.get(self.rel)
        data = self.path.read_bytes() if self.path.exists() and rec else b""
        added = data[int(rec["len"]) :].decode(encoding="utf-8", errors="replace") if rec else ""
        forged = [ln for ln in added.splitlines() if _TOOL_RECORD.match(ln)]
        if forged:
            raise LogTamperedError(
                f"{self.path} holds text appended by hand that reads as the tool's own records "
                f"({forged[0]!r}): a round's row or a section heading of the tool's is written "
                "by the tool only. Remove it; a correction is a line "
                "'> Correction (YYYY-MM-DD HH:MM): ...', and notes of your own may follow it."
            )

    def append(self, text: str) -> None:
        self.verify()
        append_text(self.path, text)
        data = self.path.read_bytes()
        self.digests[self.rel] = {"len": len(data), "sha256": sha256_bytes(data)}
        atomic_write_text(self.shadow, data.decode(encoding="utf-8"))

    def contains(self, marker: str) -> bool:
        return marker in self.text()


def _first_change(old: str, new: str) -> str:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    sm = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, _i2, j1, _j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        was = old_lines[i1] if i1 < len(old_lines) else "<end of file>"
        now = new_lines[j1] if j1 < len(new_lines) else "<removed>"
        return f"line {i1 + 1} was {was!r}, now {now!r}"
    return "the file is shorter than what was written"
