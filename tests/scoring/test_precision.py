"""The paired A/B's precision comparison of the two sides on the same inputs."""

from __future__ import annotations

import math

from kernel_ratchet.scoring.paired_looks import PairedLooks
from kernel_ratchet.scoring.precision import CEILING_DB, precision_drop, precision_drops


def test_a_drop_beyond_the_margin_is_named() -> None:
    why = precision_drop({"s": {"out": 140.0}}, {"s": {"out": 49.6}})
    assert why is not None and "precision" in why and "s/out" in why


def test_a_drop_within_the_margin_is_not() -> None:
    assert precision_drop({"s": {"out": 80.0}}, {"s": {"out": 65.0}}) is None


def test_values_above_the_ceiling_are_equal() -> None:
    inc, cand = {"s": {"out": math.inf}}, {"s": {"out": CEILING_DB + 1.0}}
    assert precision_drops(inc, cand) == []


def test_missing_outputs_and_nan_are_skipped() -> None:
    assert precision_drops({"s": {"out": 100.0, "g": math.nan}}, {"s": {"g": 10.0}}) == []


def test_the_paired_rule_uses_its_margin() -> None:
    inc, cand = {"s": {"out": 100.0}}, {"s": {"out": 85.0}}
    assert PairedLooks().precision_drop(inc, cand) is None
    assert PairedLooks(precision_margin_db=10.0).precision_drop(inc, cand) is not None
