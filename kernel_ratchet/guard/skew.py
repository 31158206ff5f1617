"""Workload-distribution robustness of a grouped-GEMM / MoE gain (SPEC section 8).

Tokens per expert are a runtime tensor: groups can be empty and counts are not tile multiples.
A gain that exists on the uniform distribution only is over-fitting. :func:`skew_robustness`
reads each shape's distribution from its label (the convention of
:mod:`kernel_ratchet.scoring.representative`: a ``uniform`` token, or a skewed token such as
``skewed``/``zipf``/``top2``) and compares the gains:

* no uniform and no skewed shape → ``NOT-APPLICABLE`` (not a grouped op's shape set);
* a uniform shape but no skewed one → ``REJECT-as-overfit`` (robustness cannot be shown; add a
  skewed shape — representative shapes of grouped ops must include one);
* uniform gain ``u`` (geometric mean over uniform shapes) ``<= tolerance`` → ``ROBUST`` (no
  uniform-only gain to explain);
* else ``REJECT-as-overfit`` when the skewed geometric-mean gain ``s <= tolerance`` (the gain
  does not hold there) or any skewed shape regressed by more than ``tolerance``; ``ROBUST``
  otherwise.

Where the set holds the same layer under both routings (twins: equal groups, N and K), the
uniform shapes that have twins are judged against their twins, the others against all skewed
shapes, and both judgements must hold.

Gains are relative (0.10 = +10%, candidate over incumbent on the primary metric);
``tolerance`` is in the same unit.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

from kernel_ratchet.scoring.representative import is_skewed, is_uniform

ROBUST, REJECT, NOT_APPLICABLE = "ROBUST", "REJECT-as-overfit", "NOT-APPLICABLE"


def _geo_gain(gains: list[float]) -> float:
    return math.exp(sum(math.log1p(g) for g in gains) / len(gains)) - 1.0


def _judge(
    uniform: Mapping[str, float],
    skewed: Mapping[str, float],
    worst_of: Mapping[str, float],
    tolerance: float,
    what: str,
) -> tuple[str, str]:
    """The rule of the module docstring for uniform gains against skewed gains (the worst
    regression looked for among ``worst_of``)."""
    u, s = _geo_gain(list(uniform.values())), _geo_gain(list(skewed.values()))
    worst_label = min(worst_of, key=worst_of.__getitem__)
    worst = worst_of[worst_label]
    text = (
        f"{what}: uniform {u:+.2%} ({len(uniform)} shapes), skewed {s:+.2%} ({len(skewed)} shapes)"
    )
    if u <= tolerance:
        return ROBUST, f"{text}: no uniform-only gain"
    if s <= tolerance:
        return REJECT, f"{text}: the gain holds on uniform loads only (tolerance {tolerance:.2%})"
    if worst < -tolerance:
        return REJECT, f"{text}: {worst_label} regressed {worst:+.2%} while uniform shapes gained"
    return ROBUST, f"{text}: the gain holds on skewed loads"


def twins(
    uniform: Mapping[str, float], skewed: Mapping[str, float], layers: Mapping[str, Hashable]
) -> dict[str, list[str]]:
    """{uniform label: its skewed twins}: the skewed shapes of the same layer (equal
    ``layers`` keys), for the uniform shapes that have any."""
    found: dict[str, list[str]] = {}
    for u in uniform:
        key = layers.get(u)
        same = [s for s in skewed if key is not None and layers.get(s) == key]
        if same:
            found[u] = same
    return found


def skew_robustness(
    per_shape_gain: Mapping[str, float],
    *,
    tolerance: float = 0.02,
    layers: Mapping[str, Hashable] | None = None,
) -> tuple[str, str]:
    """(verdict, reason) for per-shape relative gains keyed by shape label (module docstring).

    ``layers`` ({label: layer key}, e.g. groups, N and K) pairs each uniform shape with the
    skewed shapes of its own layer: a uniform gain is judged against its twins where the set has
    them, and against every skewed shape where it does not (a change that applies by group size
    touches some layers only, and another layer's skewed shape says nothing about it). Both
    judgements must hold. Raises ValueError on a gain <= -1 (not a relative gain) or a negative
    tolerance.
    """
    if tolerance < 0:
        raise ValueError("tolerance must be >= 0")
    if any(g <= -1.0 or not math.isfinite(g) for g in per_shape_gain.values()):
        raise ValueError("gains must be finite relative gains > -1 (0.10 = +10%)")
    skewed = {k: g for k, g in per_shape_gain.items() if is_skewed(k)}
    uniform = {k: g for k, g in per_shape_gain.items() if is_uniform(k) and k not in skewed}
    if not skewed and not uniform:
        return NOT_APPLICABLE, "no shape label names a token distribution (not a grouped op)"
    if not skewed:
        return REJECT, (
            f"only uniform shapes measured ({', '.join(sorted(uniform))}); a gain must be shown "
            "on a skewed tokens-per-expert distribution too"
        )
    if not uniform:
        s = _geo_gain(list(skewed.values()))
        worst_label = min(skewed, key=skewed.__getitem__)
        return (
            ROBUST,
            f"skewed shapes only: {s:+.2%} (worst {worst_label} {skewed[worst_label]:+.2%})",
        )
    pairs = twins(uniform, skewed, layers or {})
    verdicts = []
    if pairs:
        mates = {t: skewed[t] for ts in pairs.values() for t in ts}
        paired = {u: uniform[u] for u in pairs}
        verdicts.append(_judge(paired, mates, skewed, tolerance, "same layers"))
    alone = {u: g for u, g in uniform.items() if u not in pairs}
    if alone:
        what = "other layers" if pairs else "uniform and skewed shapes of different layers"
        verdicts.append(_judge(alone, skewed, skewed, tolerance, what))
    verdict = REJECT if any(v == REJECT for v, _ in verdicts) else ROBUST
    return verdict, "; ".join(why for _, why in verdicts)
