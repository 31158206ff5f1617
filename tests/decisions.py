"""A paired A/B decision as a campaign records it, for tests that build round records by hand."""

from __future__ import annotations

from typing import Any

from kernel_ratchet.campaign.category import Category
from kernel_ratchet.campaign.record import RoundDraft, RoundRecord
from kernel_ratchet.campaign.round_decision import RoundDecision, ShapeResult
from kernel_ratchet.scoring.decision import Status

#: The baseline's CSV of a campaign (what a hand-built record names as its measurement).
BASE_CSV = "rounds/round-1/artifacts/benchmark.csv"


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


def measured_record(
    n: int, status: Status, gain: float, category: Category, pending: Any = None
) -> RoundRecord:
    """Round ``n``'s record after a paired A/B of one shape that gained ``gain`` and decided
    ``status`` against round-1, as ``measure`` returns it: of the round ``pending`` opened (its
    hypothesis and notes), else of a round that changed num_warps 4 -> 8."""
    verdict = "FASTER" if status is Status.ACCEPTED else "SAME"
    d = paired_decision(
        status,
        gain,
        ambiguous=status is not Status.ACCEPTED,
        per_shape=(ShapeResult("s", None, None, gain, 0.01, verdict, (gain / 2, gain), 3),),
        gain_ci=(gain / 2, gain),
        rounds=3,
    )
    draft = RoundDraft(n, "warps 8", "K1", "num_warps 4 -> 8", "quick", "t0", "pytest", 1)
    if pending is not None:
        p, notes = pending, dict(pending.notes)
        change = notes.get("change", "")
        draft = RoundDraft(
            n, p.hypothesis, p.bucket, change, p.level, p.started, "pytest", 1, notes
        )
    return draft.decided(d, category, "t1", level="quick", csv=BASE_CSV, incumbent_csv=BASE_CSV)
