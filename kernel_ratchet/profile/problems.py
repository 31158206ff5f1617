"""The problem list of one ``ratchet.yaml`` validation, bounded whatever the input.

Every problem is one line naming the file, the dotted key and the fix. A hostile or broken
profile (hundreds of thousands of unknown keys, a value holding a huge list) must still give a
short message in time linear in its size, so the list shows at most :data:`MAX_SHOWN` lines
and counts the rest, and user values are shown through :func:`show`, which bounds their length.
"""

from __future__ import annotations

import reprlib
from pathlib import Path

from kernel_ratchet.errors import ProfileError

#: Problem lines shown in one ProfileError; the rest are counted in a closing line.
MAX_SHOWN = 40
#: Longest key or value text quoted in a problem line.
MAX_TEXT = 80

_REPR = reprlib.Repr()
_REPR.maxstring = MAX_TEXT
_REPR.maxother = MAX_TEXT
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 6
_REPR.maxlevel = 3


def show(value: object) -> str:
    """``repr(value)``, shortened (with ``...``) when it would be longer than ~MAX_TEXT."""
    return _REPR.repr(value)


def short(text: str) -> str:
    """``text`` itself when short, else its head, ``...`` and its length (for dotted keys)."""
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[: MAX_TEXT - 20]}...({len(text)} characters)"


class Problems:
    """Collects the problems of one profile; ``count`` is the total, shown or not."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.count = 0
        self.hidden = 0

    def add(self, key: str, problem: str, fix: str, *, times: int = 1) -> None:
        """Record ``times`` problems under one line (``times`` > 1 summarizes a group)."""
        self.count += times
        if len(self.lines) < MAX_SHOWN:
            self.lines.append(f"{self.path}: {short(key)}: {problem}. Fix: {fix}")
        else:
            self.hidden += times

    def raise_if_any(self) -> None:
        """Raise one ProfileError listing the problems (at most MAX_SHOWN lines), if any."""
        if not self.count:
            return
        n = self.count
        head = f"{self.path}: {n} problem{'s' if n > 1 else ''}:"
        lines = [head, *("  - " + line for line in self.lines)]
        if self.hidden:
            lines.append(
                f"  ... and {self.hidden} more problems, not shown; fix the ones above and run "
                "again to see the rest"
            )
        raise ProfileError("\n".join(lines))
