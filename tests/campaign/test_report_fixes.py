"""The REPORT names fix rounds apart from the directions that gained."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.report import render
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired_fix import FIX


def test_fix_rounds_are_listed_as_fixes_not_as_effective_directions(monkeypatch):
    reasons = {2: "aggregate speed ratio 1.05x ...", 3: f"{FIX}: the aggregate's CI lies above"}
    monkeypatch.setattr(
        render, "read_record", lambda p: SimpleNamespace(reason=reasons[int(p.parent.name[6:])])
    )
    c = SimpleNamespace(round_dir=lambda n: Path(f"rounds/round-{n}"))
    acc = [
        ClosedEntry(n, Status.ACCEPTED, "full", Category.OK, h)
        for n, h in ((2, "wider tiles"), (3, "guard the race"))
    ]
    text = render._directions_kept(c, acc)
    assert "- Effective directions: wider tiles\n" in text
    assert "- Fixes (accepted as not slower, no gain claimed): guard the race\n" in text
    assert render._directions_kept(c, acc[:1]) == "- Effective directions: wider tiles\n"
