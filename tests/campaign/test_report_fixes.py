"""The REPORT names fix rounds apart from the directions that gained (those accepted as not
slower, and those accepted on correctness alone), and the accepted rounds whose changed kernel
lines no launch of their shapes reached."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.rounds.correctness_only import FIX_ALONE
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.report import render
from kernel_ratchet.scoring.decision import Status
from kernel_ratchet.scoring.paired_fix import FIX


def test_fix_rounds_are_listed_as_fixes_not_as_effective_directions(monkeypatch):
    reasons = {
        2: "aggregate speed ratio 1.05x ...",
        3: f"{FIX}: the aggregate's CI lies above",
        4: f"{FIX_ALONE}: the focused test and the harness's correctness check pass",
    }
    alone = SimpleNamespace(correctness_only=True)
    monkeypatch.setattr(
        render,
        "read_record",
        lambda p: SimpleNamespace(
            reason=reasons[int(p.parent.name[6:])],
            unreached=(),
            decision=alone if p.parent.name == "round-4" else None,
        ),
    )
    c = SimpleNamespace(round_dir=lambda n: Path(f"rounds/round-{n}"))
    acc = [
        ClosedEntry(n, Status.ACCEPTED, "full", Category.OK, h)
        for n, h in ((2, "wider tiles"), (3, "guard the race"), (4, "own rows"))
    ]
    text = render._directions_kept(c, acc)
    assert "- Effective directions: wider tiles\n" in text
    assert "- Fixes (accepted as not slower, no gain claimed): guard the race\n" in text
    assert "- Fixes accepted on correctness alone (the incumbent fails " in text
    assert text.endswith("no speed is claimed): own rows\n")
    assert render._directions_kept(c, acc[:1]) == "- Effective directions: wider tiles\n"


def test_accepted_rounds_with_unreached_lines_are_named(monkeypatch):
    far = ("k.py:40-44 (`_kernel`): under `if WRITE_T`, which no recorded launch takes",)
    records = {
        2: SimpleNamespace(reason="1.05x", unreached=(), decision=None),
        3: SimpleNamespace(reason=f"{FIX}: not slower", unreached=far, decision=None),
    }
    monkeypatch.setattr(render, "read_record", lambda p: records[int(p.parent.name[6:])])
    c = SimpleNamespace(round_dir=lambda n: Path(f"rounds/round-{n}"))
    acc = [ClosedEntry(n, Status.ACCEPTED, "full", Category.OK, "h") for n in (2, 3)]
    text = render._directions_kept(c, acc)
    assert (
        "no launch of their shapes reached (their verdicts do not speak for them): "
        f"round 3: {far[0]}" in text
    )
    assert "round 2" not in text.split("reached")[-1]
    assert "reached" not in render._directions_kept(c, acc[:1])
