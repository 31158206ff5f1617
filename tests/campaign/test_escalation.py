"""A quick gain under 5% escalates to the full level, unless the quick shapes already are the
full target set: the same shapes are never measured twice in one round."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.record import RoundDraft
from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.campaign.rounds import levels


def _campaign(tmp_path: Path, reps: list[str]) -> SimpleNamespace:
    m = SimpleNamespace(representative_shapes=reps, target_shapes=[{"label": "a"}, {"label": "b"}])
    state = SimpleNamespace(incumbent_quick_csv="q.csv", incumbent_full_csv="f.csv")
    return SimpleNamespace(
        m=m,
        state=state,
        say=lambda _m: None,
        rel=lambda p: str(p),
        incumbent_passes_none=lambda: False,
    )


@pytest.mark.parametrize(
    ("reps", "levels_run"), [(["a", "b"], ["quick"]), (["a"], ["quick", "full"])]
)
def test_full_validation_never_remeasures_the_quick_shapes(tmp_path, monkeypatch, reps, levels_run):
    ran = []
    gain = RoundDecision("ACCEPTED", "gain", False, False, (), 1.0, 1.02, 0.02, 0.0, False, ())

    def level(c, n, draft, art, lvl, name, workers=None, early=None, abandon=None):
        ran.append(lvl)
        art.mkdir(parents=True, exist_ok=True)
        (art / name).write_text("csv")
        return levels.LevelResult(art / name, gain, Category.OK)

    monkeypatch.setattr(levels, "_level", level)
    draft = RoundDraft(2, "h", "K1", "c", "quick", "t0", "pytest", 1)
    rec = levels.measure_levels(_campaign(tmp_path, reps), 2, draft, tmp_path)
    assert ran == levels_run
    assert rec.escalated is (len(levels_run) == 2)
    assert (levels.QUICK_IS_FULL in rec.reason) is (len(levels_run) == 1)


@pytest.mark.parametrize("escalated", [False, True])
def test_the_summary_names_the_ab_that_decided(escalated):
    from kernel_ratchet.campaign.rounds.view import _notes

    decision = SimpleNamespace(paired=True, quantity=None, time_weighted=None)
    record = SimpleNamespace(
        escalated=escalated,
        quick_csv="q.csv",
        incumbent_csv="f.csv",
        decision=decision,
        failed_tests=(),
    )
    (note,) = [n for n in _notes(record) if n.startswith("Decided by")]
    assert ("artifacts/full/paired.json" in note) is escalated
