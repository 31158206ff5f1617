"""Which timed samples are compared with the reference: drawn after each sample ran."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from kernel_ratchet.harness.timed_checks import TimedCallChecks


def _hooks(samples: int, spot_checks: int, inplace=None) -> TimedCallChecks:
    session = SimpleNamespace(engine=SimpleNamespace(samples=samples))
    return TimedCallChecks(session, None, None, None, 1, "fwd", None, spot_checks, inplace=inplace)


def test_exactly_the_asked_spots_each_sample_alike():
    chosen: Counter[int] = Counter()
    for _ in range(2000):
        h = _hooks(4, 1)
        picks = [i for i in range(4) if h._spot(i)]
        assert len(picks) == 1
        chosen.update(picks)
    assert all(400 < chosen[i] < 600 for i in range(4)), chosen  # 500 each; 5 sigma is 95


def test_nothing_decided_before_a_sample_runs():
    """Two hooks of the same request seed draw independently: the choice is not a function
    of anything the process holds before the sample (the old design's seeded set was)."""
    draws = {tuple(h._spot(i) for i in range(8)) for h in (_hooks(8, 3) for _ in range(50))}
    assert len(draws) > 1
    assert all(sum(d) == 3 for d in draws)


def test_no_spot_past_the_planned_samples_or_for_in_place_ops():
    h = _hooks(2, 5)
    assert [h._spot(i) for i in range(4)] == [True, True, False, False]
    inplace = SimpleNamespace(storages=lambda case: set())
    assert not any(_hooks(4, 3, inplace)._spot(i) for i in range(4))


def test_the_draw_reads_the_os_at_the_call(monkeypatch):
    """No generator object stands between the draw and os.urandom (the Sentinel keeps
    os.urandom): replacing what a generator instance holds cannot switch the checks off."""
    import os

    from kernel_ratchet.harness import timed_checks

    monkeypatch.setattr(os, "urandom", lambda n: bytes(n))
    assert timed_checks._draw(5) == 0
    monkeypatch.setattr(os, "urandom", lambda n: b"\x07" + bytes(n - 1))
    assert timed_checks._draw(5) == 2


def test_fewer_spot_checks_than_drawn_is_a_cheat():
    """The draw takes exactly min(asked, samples): a measurement that made fewer had its draw
    interfered with (a spot draw told "not compared" on the samples the op skipped)."""
    import pytest

    from kernel_ratchet.harness.cheat import CheatDetected

    h = _hooks(4, 3)
    h.spot_done = 3
    assert h.all_drawn() is h
    h.spot_done = 2
    with pytest.raises(CheatDetected, match="2 of the 3 spot checks"):
        h.all_drawn()
    few = _hooks(2, 3)  # fewer samples than checks asked: each sample is compared
    few.spot_done = 2
    assert few.all_drawn() is few
    inplace = _hooks(4, 3, SimpleNamespace(storages=lambda case: set()))
    assert inplace.all_drawn() is inplace  # in-place ops are never spot-checked


def test_a_second_collection_of_samples_gets_its_own_spot_checks():
    """An engine that times again (eagerly, after a graph timing lost in the flush
    subtraction) keeps the second collection's samples: they are compared too, and the
    measurement owes the spot checks of both."""
    import pytest

    from kernel_ratchet.harness.cheat import CheatDetected

    h = _hooks(4, 3)
    h.batch(1)
    first = sum(h._spot(i) for i in range(4))
    h.batch(8)
    second = sum(h._spot(i) for i in range(4))
    assert (first, second) == (3, 3)
    h.spot_done = 3
    with pytest.raises(CheatDetected, match="3 of the 6 spot checks"):
        h.all_drawn()
    h.spot_done = 6
    assert h.all_drawn() is h
