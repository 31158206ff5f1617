"""A paired A/B decision as a campaign records it, for tests that build round records by hand."""

from __future__ import annotations

from typing import Any

from kernel_ratchet.campaign.round_decision import RoundDecision
from kernel_ratchet.scoring.decision import Status


def paired_decision(
    status: Status | str,
    gain: float,
    *,
    reason: str | None = None,
    before: float = 1.0,
    ambiguous: bool = False,
    per_shape: tuple = (),
    gain_ci: tuple[float, float] | None = None,
    **extra: Any,
) -> RoundDecision:
    """A paired decision of ``gain`` (aggregate ``before`` -> ``before * (1 + gain)``, noise
    1%, CI ``gain ± 0.01`` unless given); ``extra``: RoundDecision's optional fields."""
    return RoundDecision(
        status=status,
        reason=reason if reason is not None else f"paired A/B: {gain:+.2%}",
        paired=True,
        trade_off=False,
        regressions=(),
        aggregate_before=before,
        aggregate_after=before * (1 + gain),
        gain=gain,
        gain_noise=0.01,
        ambiguous=ambiguous,
        per_shape=per_shape,
        gain_ci=gain_ci if gain_ci is not None else (gain - 0.01, gain + 0.01),
        **extra,
    )
