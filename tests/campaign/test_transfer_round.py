"""The round's dynamic transfer verdict compares incumbent and candidate simulations."""

from __future__ import annotations

from kernel_ratchet.campaign.rounds.transfer import _verdict


def _sim(bench, train, verdict="TRANSFERS", noise=0.01):
    return {
        "label": "s",
        "bench_ms": bench,
        "train_ms": train,
        "noise_ms": noise,
        "verdict": verdict,
        "reason": "r",
    }


def test_a_gain_seen_in_both_idioms_transfers():
    v = _verdict(_sim(2.0, 2.2), _sim(1.5, 1.65))
    assert v["verdict"] == "TRANSFERS"
    assert abs(v["bench_gain"] - 1 / 3) < 1e-9 and abs(v["train_gain"] - 1 / 3) < 1e-9


def test_a_gain_only_in_the_benchmark_idiom_is_overfit():
    # an output cache: repeated tensors hit it, fresh ones never do
    v = _verdict(_sim(2.0, 2.2), _sim(1.0, 2.2))
    assert v["verdict"] == "OVERFIT" and "does not transfer" in v["reason"]


def test_shared_effects_cancel_and_a_candidate_only_overfit_is_caught():
    # both sides are faster on repeated tensors (L2 reuse): not the candidate's doing
    assert _verdict(_sim(1.0, 1.6, "OVERFIT"), _sim(0.8, 1.28, "OVERFIT"))["verdict"] == (
        "TRANSFERS"
    )
    v = _verdict(_sim(2.0, 2.0), _sim(1.9, 2.0, "OVERFIT"))
    assert v["verdict"] == "OVERFIT" and "only the candidate" in v["reason"]


def test_noise_protects_a_small_gain():
    v = _verdict(_sim(2.0, 2.0, noise=0.2), _sim(1.9, 1.99, noise=0.2))
    assert v["verdict"] == "TRANSFERS"


def test_a_large_gain_must_hold_in_fresh_processes():
    from kernel_ratchet.campaign.rounds.paired import unconfirmed_shapes
    from kernel_ratchet.scoring.paired import PairedVerdict, ShapeRow

    def row(label, ratio, lo, hi, verdict=PairedVerdict.FASTER):
        return ShapeRow(label, ratio, lo, hi, verdict, 10, {})

    first = [row("a", 3.0, 2.8, 3.2), row("b", 2.0, 1.9, 2.1), row("c", 1.8, 1.7, 1.9)]
    again = [
        row("a", 2.9, 2.7, 3.1),  # holds
        row("b", 1.02, 0.98, 1.06, PairedVerdict.SAME),  # collapsed: a warm-state artefact
        row("c", 1.25, 1.2, 1.3),
    ]  # FASTER but far under half the first gain (1.4)
    assert unconfirmed_shapes(first, again, ["a", "b", "c"]) == ["b", "c"]


def test_the_summary_says_when_the_simulations_gains_are_all_noise():
    """Eager steps of a 0.5 ms op on an H200 read -48% and -16% for a change the paired A/B
    measured at +0.4%, with ±53% noise: the summary must not read them as gains."""
    from kernel_ratchet.campaign.rounds.view import _noise

    lost = _verdict(_sim(0.41, 0.56, noise=0.26), _sim(0.80, 0.67, noise=0.09))
    assert lost["verdict"] == "TRANSFERS"
    assert _noise(lost) == " (noise ±52.24%: both within it, not a measured gain)"
    held = _verdict(_sim(2.0, 2.2), _sim(1.5, 1.65))
    assert _noise(held) == " (noise ±1.21%)"
    assert _noise({"train_gain": 0.1, "bench_gain": 0.1}) == ""  # a record written before


def test_the_summary_says_when_the_simulation_disagrees_with_the_paired_ab():
    """A dispatch change that leaves a model shape's path alone: the paired A/B read +0.37%
    [-1.85%, +4.98%] there, two eager steps read -8.91% and -11.30% with ±5.71% noise. The
    line must say they disagree and that the paired A/B decides; within its CI it must not."""
    from kernel_ratchet.campaign.round_decision import ShapeResult
    from kernel_ratchet.campaign.rounds.view import _noise

    paired = ShapeResult("m", None, None, 0.0037, 0.03, "AMBIGUOUS", ci=(-0.0185, 0.0498))
    dyn = {"train_gain": -0.0891, "bench_gain": -0.1130, "noise": 0.0571}
    got = _noise(dyn, paired)
    assert got.startswith(" (noise ±5.71%; the paired A/B measured +0.37% [-1.85%, +4.98%]")
    assert "disagree" in got and "rests on the paired A/B" in got
    near = {"train_gain": -0.05, "bench_gain": -0.06, "noise": 0.0571}
    assert _noise(near, paired) == " (noise ±5.71%)"  # within the CI widened by the noise
    assert _noise(dyn) == " (noise ±5.71%)"  # no paired result: nothing to compare
