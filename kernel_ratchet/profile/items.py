"""One line of ``ratchet check``: what was checked, whether it passed, and the fix."""

from __future__ import annotations

from dataclasses import dataclass

from kernel_ratchet.profile.schema import OpProfile


@dataclass(frozen=True)
class CheckItem:
    """One checklist line: ``ok`` or not, what was found, and the fix when not ok."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # ok, but worth a look (shown as such)


def item(op: OpProfile, what: str, ok: bool, detail: str, fix: str = "") -> CheckItem:
    return CheckItem(f"{op.name}: {what}", ok, detail, "" if ok else fix)
