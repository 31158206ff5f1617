"""The search optimizer: conformance, and behaviour against recorded rounds (no harness)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kernel_ratchet.knobs.tunables import parse_tunables
from kernel_ratchet.optimizers.base import OptimizerError
from kernel_ratchet.optimizers.search import SearchOptimizer, stagnant_families, undoing
from kernel_ratchet.optimizers.testing import (
    OptimizerConformance,
    RecordedRounds,
    make_toy_project,
    recorded_round,
)


class TestSearchConformance(OptimizerConformance):
    def make_optimizer(self, root: Path) -> SearchOptimizer:
        return SearchOptimizer()


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return make_toy_project(tmp_path / "toy")


def test_first_move_is_one_knob_of_the_least_efficient_bucket(toy):
    analysis = {
        "shapes": [
            {"label": "s32", "efficiency": 0.1},
            {"label": "l256", "efficiency": 0.7},
            {"label": "l512", "efficiency": 0.8},
        ]
    }
    p = SearchOptimizer().propose(RecordedRounds(toy).context(analysis))
    assert p.direction.startswith("CONFIGS/fwd/small:")
    assert p.bucket == "K1" and set(p.files) == {"pkg/configs.py"}
    # exactly one literal changed, every other byte kept
    old = (toy / "pkg/configs.py").read_text().splitlines()
    new = p.files["pkg/configs.py"].splitlines()
    assert len(old) == len(new)
    assert sum(a != b for a, b in zip(old, new, strict=True)) == 1
    # the "bwd" kind is not used by op "toy_fwd"; the order is deterministic
    assert SearchOptimizer().propose(RecordedRounds(toy).context(analysis)) == p


def test_slowest_bucket_moves_when_the_analysis_changes(toy):
    analysis = {
        "shapes": [{"label": "s32", "efficiency": 0.9}, {"label": "l256", "efficiency": 0.2}]
    }
    p = SearchOptimizer().propose(RecordedRounds(toy).context(analysis))
    assert p.direction.startswith("CONFIGS/fwd/large:")


def test_never_repeats_an_ineffective_direction_and_ends_when_exhausted(toy):
    rec = RecordedRounds(toy, default_gain=-0.03)
    proposals = rec.run(SearchOptimizer(), 200)
    directions = [p.direction for p in proposals]
    assert len(directions) == len(set(directions))
    assert SearchOptimizer().propose(rec.context()) is None  # every move spent
    ineffective = {r.direction_key for r in rec.context().ineffective}
    assert ineffective == set(directions)
    assert not any(d.startswith("CONFIGS/bwd/") for d in directions)


def test_switches_family_after_two_rollbacks_in_one_family(toy):
    rec = RecordedRounds(toy, default_gain=-0.03)
    t = parse_tunables((toy / "pkg/configs.py").read_text())
    proposals = rec.run(SearchOptimizer(), 12)
    families = [p.family for p in proposals]
    # num_warps of the "large" bucket (2 shapes) has three untried values (4, 2, 1): after two
    # rollbacks the search switches family
    assert families[:3] == ["num_warps", "num_warps", "num_stages"]
    assert "num_warps" in stagnant_families(rec.records[:3], t)
    # the stagnant family is demoted, not dropped: its third value comes after the others
    later = [p.direction for p in proposals[3:]]
    assert "CONFIGS/fwd/large:num_warps=1" in later
    # an accepted round clears the stagnation
    rec.records.append(recorded_round(99, "ACCEPTED", "ok", direction="x"))
    assert stagnant_families(rec.records, t) == set()


def test_accepted_moves_climb_from_the_new_incumbent(toy):
    # larger blocks win in this recorded table; module knobs of pkg/kernel.py
    gains = lambda d: 0.1 if d.endswith(("=32", "=64")) and "BLOCK_" in d else -0.05  # noqa: E731
    rec = RecordedRounds(toy, gains=gains, tunables="pkg/kernel.py")
    rec.run(SearchOptimizer(), 30)
    text = rec.incumbent["pkg/kernel.py"]
    assert "BLOCK_M = 64" in text and "BLOCK_N = 64" in text and "BLOCK_K = 32" in text
    accepted = [r for r in rec.records if r.status == "ACCEPTED"]
    assert len(accepted) >= 3


def test_never_undoes_the_last_accepted_move(toy):
    # undoing an accepted move (num_stages 4 -> 3, then 3 -> 4) re-measures what its own
    # paired A/B already lost
    first = SearchOptimizer().propose(RecordedRounds(toy).context())
    rec = RecordedRounds(toy, gains=lambda d: 0.05 if d == first.direction else -0.03)
    proposals = rec.run(SearchOptimizer(), 200)
    assert proposals[0] == first and rec.records[1].status == "ACCEPTED"
    (knob,) = first.notes["changes"]
    undo = f"{first.notes['entry']}:{knob}={first.notes['old'][knob]!r}"
    assert undoing(rec.records) == {undo}
    assert undo not in [p.direction for p in proposals]
    # it is a move of the new incumbent's space: without the accepted record it comes first
    ctx = rec.context()
    fresh = replace(ctx, rounds=ctx.rounds[:1], ineffective=())
    t = parse_tunables(rec.incumbent["pkg/configs.py"])
    assert undo in [d for *_, d in SearchOptimizer().moves(t, fresh)]
    # a later acceptance makes it a candidate again
    assert undoing([*rec.records, recorded_round(99, "ACCEPTED", "ok", direction="x")]) == set()


def test_undoing_reads_the_engine_record_of_a_search_move():
    rec = recorded_round(
        2,
        "ACCEPTED",
        "ok",
        direction="CONFIGS/fp8_block/large:num_stages=3",
        summary="CONFIGS/fp8_block/large: num_stages 4 -> 3",
    )
    assert undoing([rec]) == {"CONFIGS/fp8_block/large:num_stages=4"}
    assert undoing([rec, recorded_round(3, "ROLLED BACK", "no-gain", direction="y")]) == {
        "CONFIGS/fp8_block/large:num_stages=4"
    }
    assert undoing([replace(rec, summary="a person's words")]) == set()
    assert undoing([replace(rec, direction='CONFIGS/x:preset={"num_stages": 3}')]) == set()


def test_refuses_a_tunables_file_outside_the_kernel_files(toy):
    rec = RecordedRounds(toy, tunables="pkg/bench.py")
    with pytest.raises(OptimizerError, match="kernel_source"):
        SearchOptimizer().propose(rec.context())
    with pytest.raises(OptimizerError, match="no tunables"):
        SearchOptimizer().propose(RecordedRounds(toy, tunables=None).context())


def test_knobs_restrict_every_move_and_a_wrong_knob_is_named(toy):
    rec = RecordedRounds(toy, default_gain=-0.03)
    proposals = rec.run(SearchOptimizer(knobs="num_stages"), 200)
    assert proposals, "the restricted space still has moves"
    assert {p.family for p in proposals} == {"num_stages"}
    # the unrestricted search of the same project also moves other knobs
    assert {
        p.family for p in RecordedRounds(toy, default_gain=-0.03).run(SearchOptimizer(), 200)
    } > {"num_stages"}
    with pytest.raises(OptimizerError, match=r"\['block_q'\].*choose from"):
        SearchOptimizer(knobs=["num_stages", "block_q"]).propose(RecordedRounds(toy).context())


def test_a_move_whose_candidate_crashed_is_not_proposed_again(toy):
    """A crash in the candidate's worker would repeat: the next proposal is another move. A
    failure of the incumbent (infrastructure) says nothing about the move: it may come back."""
    rec = RecordedRounds(toy)
    first = SearchOptimizer().propose(rec.context())
    rec.records.append(recorded_round(2, "ROLLED BACK", "crash", direction=first.direction))
    assert SearchOptimizer().propose(rec.context()).direction != first.direction
    rec.records[-1] = recorded_round(2, "ROLLED BACK", "incumbent", direction=first.direction)
    assert SearchOptimizer().propose(rec.context()).direction == first.direction


def test_a_run_pauses_when_the_incumbent_fails_twice_in_a_row():
    from kernel_ratchet.optimizers.budget import incumbent_unmeasurable

    crash = recorded_round(2, "ROLLED BACK", "crash")
    inc = [recorded_round(n, "ROLLED BACK", "incumbent", reason="worker died") for n in (3, 4)]
    assert incumbent_unmeasurable([crash, inc[0]]) is None
    assert incumbent_unmeasurable([inc[0], crash]) is None
    why = incumbent_unmeasurable([crash, *inc])
    assert "2 rounds in a row" in why and "round-4: worker died" in why and "resume" in why
