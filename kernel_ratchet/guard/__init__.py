"""What keeps results honest: the real-training transfer guard (SPEC section 8).

* :mod:`.static_audit` — :func:`audit_change`: the change's caches and cache keys, read from the
  syntax tree, and its bucket K1–K4 / W1–W3 (W2/W3 rejected before any benchmark);
* :mod:`.dynamic_transfer` — :func:`simulate_training`: the verdict on benchmark idiom vs.
  training idiom, as :mod:`kernel_ratchet.harness.training_sim` measures them (with cache hit
  counts);
* :mod:`.skew` — :func:`skew_robustness`: uniform-only gains of grouped ops;
* :mod:`.transfer` — :func:`transfer_check` (the summary section) and :func:`attribute_gain`
  (S_real / W_real / R_real and the inflation gap of the report).
"""

from __future__ import annotations

from kernel_ratchet.guard.dynamic_transfer import (
    DynamicResult,
    judge_idioms,
    simulate_training,
    weight_quant_ratio,
)
from kernel_ratchet.guard.skew import skew_robustness
from kernel_ratchet.guard.static_audit import StaticAudit, audit_change
from kernel_ratchet.guard.transfer import (
    TRANSFER_KEYS,
    Attribution,
    RoundGain,
    TransferEstimate,
    attribute_gain,
    estimate_real_gain,
    transfer_check,
)

__all__ = [
    "TRANSFER_KEYS",
    "Attribution",
    "DynamicResult",
    "RoundGain",
    "StaticAudit",
    "TransferEstimate",
    "attribute_gain",
    "audit_change",
    "estimate_real_gain",
    "judge_idioms",
    "simulate_training",
    "skew_robustness",
    "transfer_check",
    "weight_quant_ratio",
]
