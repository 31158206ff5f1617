"""The REPORT tells a direction that broke correctness from one that was slow."""

from __future__ import annotations

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.state import ClosedEntry
from kernel_ratchet.report.render import _ineffective, _rounds
from kernel_ratchet.scoring.decision import Status


def _rolled(n: int, category: Category, hypothesis: str) -> ClosedEntry:
    return ClosedEntry(n, Status.ROLLED_BACK, "quick", category, hypothesis)


def test_a_wrong_result_is_not_filed_as_a_slow_direction():
    rounds = [
        _rolled(3, Category.NO_GAIN, "wider tiles"),
        _rolled(5, Category.TEST, "skip the bias gradient"),
        _rolled(6, Category.CORRECTNESS, "fp16 accumulator"),
    ]
    listed = _rounds(rounds)
    assert "- round-3: wider tiles (no-gain)\n" in listed
    assert "round-5: skip the bias gradient (test: the focused test failed: a wrong" in listed
    assert "round-6: fp16 accumulator (correctness: the correctness check failed" in listed
    line = _ineffective(rounds)
    assert line.startswith("- Ineffective directions: wider tiles\n")
    assert "broke correctness or the build: skip the bias gradient (test); fp16" in line
    assert _ineffective(rounds[:1]) == "- Ineffective directions: wider tiles\n"


def test_a_cheat_or_an_overfit_is_refused_not_open_to_try_again():
    from kernel_ratchet.report.render import rollbacks

    rolled = [
        _rolled(2, Category.NO_GAIN, "slow"),
        _rolled(3, Category.OVERFIT, "reuse the result for a repeated input"),
        _rolled(4, Category.CHEAT, "hijack the reference"),
        _rolled(5, Category.HARNESS, "crashed the harness"),
        _rolled(6, Category.INTERRUPTED, "interrupted"),
        _rolled(7, Category.INTERRUPTED, "accepted later"),
    ]
    rej, refused, open_ = rollbacks(rolled, accepted_later={7})
    assert [r.round for r in rej] == [2]
    assert [r.round for r in refused] == [3, 4]
    assert [r.round for r in open_] == [5, 6]
