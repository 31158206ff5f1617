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

import importlib
from typing import Any

#: Where each name lives. Imported on first use: the simulation needs torch, and a reader of
#: the records (``ratchet status``, ``report``, the dashboard) should not pay for it.
_WHERE = {
    "DynamicResult": "transfer_result",
    "judge_idioms": "dynamic_transfer",
    "simulate_training": "dynamic_transfer",
    "weight_quant_ratio": "dynamic_transfer",
    "skew_robustness": "skew",
    "StaticAudit": "static_audit",
    "audit_change": "static_audit",
    "TRANSFER_KEYS": "transfer",
    "Attribution": "transfer",
    "RoundGain": "transfer",
    "TransferEstimate": "transfer",
    "attribute_gain": "transfer",
    "estimate_real_gain": "transfer",
    "transfer_check": "transfer",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
