"""Chain integrity of accepted rounds."""

from __future__ import annotations

import pytest

from kernel_ratchet.scoring.chain import check_chain


def test_intact_chain_and_drop_within_tolerance():
    assert check_chain([(1, 100.0), (2, 105.0), (4, 110.0)]) == []
    assert check_chain([(1, 100.0), (3, 99.5)]) == []  # -0.5% is noise


def test_drop_beyond_one_percent_is_reported():
    problems = check_chain([(1, 100.0), (2, 110.0), (5, 108.0)])
    assert len(problems) == 1
    assert "round-5" in problems[0] and "round-2" in problems[0] and "1.82%" in problems[0]


def test_small_drops_cannot_accumulate():
    problems = check_chain([(1, 100.0), (2, 99.3), (3, 98.6)])
    assert len(problems) == 1 and "round-3" in problems[0] and "round-1" in problems[0]


def test_tolerance_is_configurable_and_order_checked():
    assert check_chain([(1, 100.0), (2, 97.0)], tolerance=0.05) == []
    assert check_chain([(1, 100.0), (2, 97.0)], tolerance=0.0)
    assert any("order" in p for p in check_chain([(3, 100.0), (2, 101.0)]))
    assert any("positive" in p for p in check_chain([(1, 100.0), (2, float("nan"))]))
    with pytest.raises(ValueError):
        check_chain([], tolerance=-0.1)
