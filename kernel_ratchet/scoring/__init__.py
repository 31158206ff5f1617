"""Scoring: primary metric and combined step, aggregates, the decision, representative shapes."""

from __future__ import annotations

from kernel_ratchet.scoring.chain import check_chain
from kernel_ratchet.scoring.decision import Decision, ShapeDelta, Status, Verdict, decide
from kernel_ratchet.scoring.metrics import (
    Aggregates,
    aggregates,
    combined_step_tflops,
    geomean,
    primary_value,
    score_vector,
)
from kernel_ratchet.scoring.representative import choose_representative

__all__ = [
    "Aggregates",
    "Decision",
    "ShapeDelta",
    "Status",
    "Verdict",
    "aggregates",
    "check_chain",
    "choose_representative",
    "combined_step_tflops",
    "decide",
    "geomean",
    "primary_value",
    "score_vector",
]
