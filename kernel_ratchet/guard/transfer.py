"""The round's real-training transfer check and the campaign's gain attribution (SPEC section 8).

:func:`transfer_check` turns the static audit, the dynamic check and the skew check of one round
into the eight values of ``summary.md``'s ``## Real-training transfer check`` section (exactly
the keys of :data:`TRANSFER_KEYS`, the order
:func:`kernel_ratchet.campaign.render.transfer_section` prints). :func:`estimate_real_gain`
gives the same decision with the estimated gain as a number, for the round record.

:func:`attribute_gain` splits a campaign's headline gain into S_real, W_real and R_real. Gains
are relative (0.05 = +5%) and compose multiplicatively over the chain of rounds, so the parts
are products, not sums:

* ``S_real = Π_K (1 + g) − 1`` over the K1–K4 rounds (they transfer 1:1);
* ``W_real = Π_K (1 + g) · Π_W1 (1 + ĝ) − Π_K (1 + g)``: what the W1 rounds' *bounded*
  estimates ``ĝ`` add on top of S_real;
* ``R_real = Π_R (1 + g) − 1`` over the rejected / overfit rounds that still count in the
  headline (W2, W3, or decision REJECT-as-overfit) — it must be 0;
* ``headline = Π_all (1 + g) − 1`` over the benchmark gains, unless the measured total is given;
* inflation gap ``= headline − (S_real + W_real)``; over 1% (0.01) is called out, and so is any
  non-zero R_real.

A measured headline (the full validation, baseline against final, in the harness) and the
rounds' gains (paired A/B, one round at a time) are two instruments, and they disagree by
noise and drift: on the CPU example +138% against a chain product of +88%. The gap is meant to
show the share of the headline that would not transfer, not that disagreement, so with a
measured headline each part is its share of the chain in log space applied to the headline:
``part' = (1 + H)^(log Π_part / log Π_all) − 1``. A chain of K rounds then explains the whole
headline (gap 0) whatever the instruments read; a W2 round's share stays in the gap. The text
states both totals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kernel_ratchet.guard.skew import REJECT as SKEW_REJECT
from kernel_ratchet.guard.static_audit import REJECT, StaticAudit
from kernel_ratchet.guard.transfer_result import OVERFIT, DynamicResult

TRANSFER_KEYS = (
    "Bucket",
    "Cache key (if any)",
    "id(...) audit",
    "4-step trace hit rate",
    "Workload distribution robustness (grouped ops)",
    "Benchmark gain",
    "Estimated real-training gain",
    "Decision",
)
#: The values that need a measurement (a round stopped before one has only the static audit).
TRANSFER_MEASURED = TRANSFER_KEYS[3:7]
ACCEPT_REAL, ACCEPT_ASTERISK = "ACCEPT-as-real", "ACCEPT-with-asterisk"
DECISIONS = (ACCEPT_REAL, ACCEPT_ASTERISK, REJECT)
CALL_OUT_GAP = 0.01
BUCKET_TEXT = {
    "K1": "kernel-internal",
    "K2": "layout variant",
    "K3": "single-launch fusion",
    "K4": "same-call data flow",
    "W1": "weight cache",
    "W2": "activation / grad_out cache",
    "W3": "generic memoization",
}


@dataclass(frozen=True)
class TransferEstimate:
    """The decision, the estimated real-training gain (relative) and how it was derived."""

    decision: str
    gain: float
    derivation: str


def estimate_real_gain(
    static: StaticAudit,
    dynamic: DynamicResult | None,
    benchmark_gain: float,
    *,
    quant_time_ratio: float | None = None,
    skew: tuple[str, str] | None = None,
) -> TransferEstimate:
    """Decide one round (see :func:`transfer_check` for the rules)."""
    rejected = []
    if static.verdict == REJECT:
        rejected.append(f"static audit: {static.reason}")
    if dynamic is not None and dynamic.verdict == OVERFIT:
        rejected.append(f"dynamic check on {dynamic.label}: {dynamic.reason}")
    if skew is not None and skew[0] == SKEW_REJECT:
        rejected.append(f"skew check: {skew[1]}")
    if rejected:
        why = "; ".join(rejected)
        return TransferEstimate(REJECT, 0.0, f"+0.00%: the gain does not transfer ({why})")
    if static.bucket == "W1":
        if quant_time_ratio is None:
            why = (
                f"+0.00% counted: benchmark {benchmark_gain:+.2%} is bounded by "
                "quant_time(weight)/step_time, which was not measured; measure it to count the gain"
            )
            return TransferEstimate(ACCEPT_ASTERISK, 0.0, why)
        est = min(benchmark_gain, quant_time_ratio)
        why = (
            f"{est:+.2%} = min(benchmark {benchmark_gain:+.2%}, quant_time(weight)/step_time "
            f"{quant_time_ratio:.2%})"
        )
        return TransferEstimate(ACCEPT_ASTERISK, est, why)
    if dynamic is None:
        checked = "dynamic check not run"
    else:
        checked = (
            f"dynamic gap {dynamic.gap_ms:+.4g} ms/step within noise {dynamic.noise_ms:.3g} ms"
        )
    why = f"{benchmark_gain:+.2%} = benchmark gain ({static.bucket} transfers 1:1; {checked})"
    return TransferEstimate(ACCEPT_REAL, benchmark_gain, why)


def _audit_text(static: StaticAudit, limit: int = 4) -> str:
    cache_lines = [e for e in static.evidence if "(key: " in e]
    if not cache_lines:
        return "clean: the change adds no cache and no id()/data_ptr()/tensor-identity key"
    more = f" (+{len(cache_lines) - limit} more)" if len(cache_lines) > limit else ""
    return "; ".join(cache_lines[:limit]) + more


def transfer_check(
    static: StaticAudit,
    dynamic: DynamicResult | None,
    benchmark_gain: float,
    *,
    quant_time_ratio: float | None = None,
    skew: tuple[str, str] | None = None,
) -> dict[str, str]:
    """The ``## Real-training transfer check`` values of one round, keyed by TRANSFER_KEYS.

    ``benchmark_gain`` is the round's relative gain on the primary metric (0.05 = +5%);
    ``quant_time_ratio`` the measured quant_time(weight)/step_time (W1 only); ``skew`` the
    result of :func:`.skew.skew_robustness` (grouped ops only). Decision: REJECT-as-overfit
    when the static audit, the dynamic check or the skew check rejects; ACCEPT-with-asterisk
    for W1 (estimated gain = min(benchmark gain, quant_time_ratio), 0 until the ratio is
    measured); ACCEPT-as-real for K1–K4 (estimated gain = benchmark gain).
    """
    est = estimate_real_gain(
        static, dynamic, benchmark_gain, quant_time_ratio=quant_time_ratio, skew=skew
    )
    hits = "not measured (no dynamic check run)" if dynamic is None else dynamic.hit_rate_text()
    values = [
        f"{static.bucket} ({BUCKET_TEXT[static.bucket]}) — {static.reason}",
        "; ".join(static.cache_keys) or "none",
        _audit_text(static),
        hits,
        f"{skew[0]}: {skew[1]}" if skew is not None else "n/a (not a grouped op)",
        f"{benchmark_gain:+.2%} (candidate vs incumbent, primary metric)",
        est.derivation,
        est.decision,
    ]
    return dict(zip(TRANSFER_KEYS, values, strict=True))


@dataclass(frozen=True)
class RoundGain:
    """One accepted round of the chain as the attribution sees it.

    ``gain``: the round's benchmark gain over its incumbent (relative); ``decision``: its
    transfer decision; ``real_gain``: the estimated real-training gain (W1: bounded); None
    means ``gain`` for K1–K4 and 0 for W1 (an unmeasured bound counts nothing).
    """

    round: int
    bucket: str
    decision: str
    gain: float
    real_gain: float | None = None

    def __post_init__(self) -> None:
        if self.bucket not in BUCKET_TEXT:
            raise ValueError(f"round-{self.round}: bucket must be one of {sorted(BUCKET_TEXT)}")
        if self.decision not in DECISIONS:
            raise ValueError(f"round-{self.round}: decision must be one of {DECISIONS}")
        if self.gain <= -1 or (self.real_gain is not None and self.real_gain <= -1):
            raise ValueError(f"round-{self.round}: gains are relative and must be > -1")

    @property
    def part(self) -> str:
        """``S``, ``W`` or ``R``: where the round's gain is attributed."""
        if self.decision == REJECT or self.bucket in ("W2", "W3"):
            return "R"
        return "W" if self.bucket == "W1" else "S"


@dataclass(frozen=True)
class Attribution:
    """The report's re-attribution; every value relative (0.05 = +5%)."""

    S_real: float
    W_real: float
    R_real: float
    headline: float
    gap: float
    called_out: bool
    text: str


def _prod(values: Sequence[float]) -> float:
    return math.prod(1.0 + v for v in values)


def attribute_gain(
    rounds: Sequence[RoundGain], *, headline: float | None = None, measured: str = "measured"
) -> Attribution:
    """Split the campaign's gain into S_real, W_real, R_real (formulas: module docstring).

    ``rounds`` are the accepted rounds of the chain; ``headline`` the measured total gain
    (``measured`` says by what), else the product of the rounds' benchmark gains.
    """
    parts: dict[str, list[RoundGain]] = {"S": [], "W": [], "R": []}
    for r in rounds:
        parts[r.part].append(r)
    p_s = _prod([r.gain if r.real_gain is None else r.real_gain for r in parts["S"]])
    p_w = _prod([0.0 if r.real_gain is None else r.real_gain for r in parts["W"]])
    p_r = _prod([r.gain for r in parts["R"]])
    chain = _prod([r.gain for r in rounds])
    total = chain - 1.0 if headline is None else headline
    k = 1.0  # exponent that maps the chain's log gains onto the measured headline
    if headline is not None and headline > -1.0 and chain > 0 and abs(math.log(chain)) > 1e-12:
        k = math.log1p(headline) / math.log(chain)
    p_s, p_w, p_r = p_s**k, p_w**k, p_r**k
    s_real, w_real, r_real = p_s - 1.0, p_s * p_w - p_s, p_r - 1.0
    # no accepted round: the code is the baseline's, a measured headline is noise, not inflation
    gap = total - (s_real + w_real) if rounds else 0.0
    called = gap > CALL_OUT_GAP or abs(r_real) > 1e-12
    names = {k: ", ".join(f"round-{r.round}" for r in v) or "none" for k, v in parts.items()}
    lines = [
        "Real-training attribution (gains compose multiplicatively: S_real = Π_K(1+g) − 1; "
        "W_real = what the W1 rounds' bounded gains add on top of S_real; "
        "R_real = Π_rejected(1+g) − 1):",
        f"- S_real (K1–K4, transfers 1:1): {s_real:+.2%} ({names['S']})",
        f"- W_real (W1, bounded by quant_time(weight)/step_time): {w_real:+.2%} ({names['W']})",
        f"- R_real (rejected / overfit, must be 0): {r_real:+.2%} ({names['R']})",
        f"- Headline: {total:+.2%}"
        + (
            f" ({measured}; the accepted rounds' own gains compose to {chain - 1:+.2%}, and each "
            "part above is its log share of the chain applied to the headline)"
            if headline is not None
            else " (product of round gains)"
        ),
        f"- Inflation gap: headline − (S_real + W_real) = {total:+.2%} − "
        f"({s_real:+.2%} + {w_real:+.2%}) = {gap:+.2%}",
    ]
    if called:
        why = [f"the gap exceeds {CALL_OUT_GAP:.0%}"] if gap > CALL_OUT_GAP else []
        why += [f"R_real is {r_real:+.2%}, not 0"] if abs(r_real) > 1e-12 else []
        lines.append(f"- CALLED OUT: {' and '.join(why)}; the headline overstates real training")
    return Attribution(s_real, w_real, r_real, total, gap, called, "\n".join(lines) + "\n")
